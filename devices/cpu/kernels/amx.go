package kernels

import "unsafe"

// The GEMM on AMX tiles, where the CPU has them (Intel Xeon from Sapphire
// Rapids on).
//
// An AMX tile multiply (TDPBSUD) takes a tile of 16 rows × 32 signed bytes
// (A) and one of 8 rows × 64 unsigned bytes (B) and adds to a tile of 16 × 16
// int32 sums (C) all 8192 products of A's rows with B's columns, B read as
// 16 columns of 4 interleaved bytes: exactly a block of the GEMM's panel
// (gemm.go), whose group g holds at lane r the row r's four elements 4g..4g+3.
// So A is one block (32 columns) of 16 inputs, B the panel's block, and C the
// 16 inputs' exact integer sums Σ u·q over the block, per row, which the
// vector units then fold into float sums block after block in the tile
// kernel's order: per block, input and row,
//
//	acc = fma(float(Σu·q − c·Σq), scale·d, acc)
//
// the same operations as gemmTileGo, so an AMX GEMM and a VNNI one agree to
// the bit. One TDPBSUD does the work of 128 VPDPBUSD; what is left on the
// vector units is the per-block fold, four instructions per 16 sums.
//
// Q8_0, which the VNNI GEMM sums in vec_dot's 8 float lanes per row (the row
// kernel's order, for bit equality with a decode step), takes this tile
// order where AMX runs: per-lane folds would cost eight times the fold above.
// llama.cpp on such a CPU multiplies Q8_0 prompts on AMX too, in an order of
// its own, so neither order is its order there.

// amxIn is the number of inputs per AMX tile (C's and A's 16 rows).
const amxIn = 16

// amxMin is the smallest batch the AMX kernels take, but for Q8_0's, which
// take any from gemmMin on (its VNNI GEMM, in vec_dot's lanes, is half as
// fast): below it the panels' unpacking, once per mat-mul and panel, costs
// more than the tiles save (BenchmarkGEMM on the H100 host at 64 inputs:
// Q4_0 76 GMAC/s on AMX against 87 on VNNI, Q6_K 34 against 42).
var amxMin = 128

// gemmAMX, where the CPU and OS allow AMX, multiplies one panel by all the
// prepared inputs a: out[i*16+r] is input i's product with the panel's row
// r (the last tile's padding inputs included). nil leaves batches on the
// VNNI kernels.
var gemmAMX func(p *panel, a *amxInputs, nb int, out []float32)

// amxInputs is a batch laid out for gemmAMX in tiles of 16 inputs, the last
// padded with zero inputs: q per tile, block and input the block's 32
// quantized activations (so a block's A tile is 512 contiguous bytes); d and
// off per tile, block and input the input's scale and c·Σq.
type amxInputs struct {
	g     *gemmSpec // the weight type's, for layTile
	tiles int
	q     []byte
	d     []float32
	off   []int32
}

func (a *amxInputs) size(tiles, cols int) {
	a.tiles = tiles
	nb := cols / 32
	a.q = grow(a.q, tiles*amxIn*cols)
	a.d = grow(a.d, tiles*nb*amxIn)
	a.off = grow(a.off, tiles*nb*amxIn)
}

// layTile lays out tile ti of inputs x for the spec in a.g, set by
// gemmPanels.
func (a *amxInputs) layTile(x []xrow, ti, cols int) {
	nb := cols / 32
	for t := range amxIn {
		i := ti*amxIn + t
		for b := range nb {
			j := (ti*nb+b)*amxIn + t
			dst := a.q[j*32 : j*32+32]
			if i >= len(x) {
				clear(dst)
				a.d[j], a.off[j] = 0, 0
				continue
			}
			src := x[i].q[32*b : 32*b+32]
			copy(dst, int8Bytes(src))
			var sum int32
			for _, v := range src {
				sum += int32(v)
			}
			a.d[j] = x[i].d[b]
			a.off[j] = a.g.c * sum
		}
	}
}

// tileFiller is a batch's layout for an AMX kernel, made one tile of 16
// inputs at a time.
type tileFiller interface {
	layTile(x []xrow, ti, cols int)
}

// amxFillTask lays out a batch's tiles in parallel.
type amxFillTask struct {
	a    tileFiller
	x    []xrow
	cols int
}

func (f *amxFillTask) run(lo, hi int) {
	for ti := lo; ti < hi; ti++ {
		f.a.layTile(f.x, ti, f.cols)
	}
}

// gemmAMXGo is gemmAMX's arithmetic in Go, in its order: the reference for
// the assembly, and a way to test the AMX path's layout on any CPU.
func gemmAMXGo(p *panel, a *amxInputs, nb int, out []float32) {
	for ti := range a.tiles {
		var acc [amxIn][panelRows]float32
		for b := range nb {
			blk := ti*nb + b
			aq := a.q[blk*amxIn*32:]
			wq := p.q[b*512:]
			for t := range amxIn {
				for r := range panelRows {
					var s int32
					for k := range 32 {
						s += int32(int8(aq[32*t+k])) * int32(wq[(k/4)*64+4*r+k%4])
					}
					f := float32(s - a.off[blk*amxIn+t])
					acc[t][r] = fma32(f, p.sc[b*16+r]*a.d[blk*amxIn+t], acc[t][r])
				}
			}
		}
		for t := range amxIn {
			copy(out[(ti*amxIn+t)*panelRows:], acc[t][:])
		}
	}
}

// amxScratch returns p's 64-byte aligned scratch for the kernels: two
// buffers of two C tiles (2 × 2 × 16 × 16 int32), then gemmTileAMXK's 32
// vectors of scales.
func (p *panel) amxScratch() []int32 {
	if p.c == nil {
		buf := make([]int32, 1536+16)
		off := int(uintptr(unsafe.Pointer(&buf[0]))&63) / 4
		if off != 0 {
			off = 16 - off
		}
		p.c = buf[off : off+1536]
	}
	return p.c
}

// scatterRows copies each of n inputs' nr products (out[i*16:], 16 apart)
// to y[i*rows+r0:]; a full panel's 16 go as one 64-byte value, not through
// a memmove call each (a few percent of a prompt on the H100 host).
func scatterRows(y, out []float32, n, rows, r0, nr int) {
	if nr < panelRows {
		for i := range n {
			copy(y[i*rows+r0:][:nr], out[i*panelRows:i*panelRows+nr])
		}
		return
	}
	for i := range n {
		*(*[panelRows]float32)(y[i*rows+r0:]) = *(*[panelRows]float32)(out[i*panelRows:])
	}
}
