package kernels

import "encoding/binary"

// Q6_K batches on AMX tiles (see amx.go).
//
// Q6_K's scales are per 16 columns, so its tiles are one sub-block of 16
// columns deep: A is 16 inputs × 16 activations, B the sub-block's 6-bit
// weights of 16 rows less their offset 32 (signed bytes, unpacked from the
// file's layout per mat-mul), and TDPBSSD gives the exact Σ(q−32)·a. The
// vector units multiply each by its row's scale and sum the 16 sub-blocks of
// a super-block in int32, then per super-block, input and row
//
//	acc = fma(float(Σ scale·Σ(q−32)·a), d·xd, acc)
//
// which is llama.cpp's order for Q6_K batches on such a CPU (its AMX
// build's VNNI kernel). It is not the row kernel's order, which keeps 8
// float lanes per row (llama.cpp's AVX2 vec_dot): as for Q8_0 (amx.go), a
// prompt and a decode step then sum a Q6_K row in different orders where
// AMX runs, each within the rounding of the other.

// gemmAMX6, where AMX runs, multiplies one unpacked Q6_K panel by all the
// prepared inputs a: out[i*16+r] is input i's product with row r.
var gemmAMX6 func(p *panel, a *amx6Inputs, nsb int, out []float32)

// amx6Inputs is a Q8_K batch laid out for gemmAMX6 in tiles of 16 inputs,
// the last padded with zero inputs: q per tile, sub-block of 16 columns and
// input the sub-block's 16 activations; xd per tile, super-block and input
// the input's scale.
type amx6Inputs struct {
	tiles int
	q     []byte
	xd    []float32
}

func (a *amx6Inputs) size(tiles, cols int) {
	a.tiles = tiles
	a.q = grow(a.q, tiles*amxIn*cols)
	a.xd = grow(a.xd, tiles*cols/256*amxIn)
}

// layTile lays out tile ti of the Q8_K inputs x.
func (a *amx6Inputs) layTile(x []xrow, ti, cols int) {
	nsb := cols / 256
	for t := range amxIn {
		i := ti*amxIn + t
		for s := range cols / 16 {
			j := (ti*cols/16+s)*amxIn + t
			dst := a.q[j*16 : j*16+16]
			if i >= len(x) {
				clear(dst)
				continue
			}
			copy(dst, int8Bytes(x[i].q[16*s:16*s+16]))
		}
		for b := range nsb {
			v := float32(0)
			if i < len(x) {
				v = x[i].d[b]
			}
			a.xd[(ti*nsb+b)*amxIn+t] = v
		}
	}
}

const (
	lowNibbles = 0x0f0f0f0f0f0f0f0f
	lowPairs   = 0x0303030303030303
	highBits   = 0x8080808080808080
	minus32    = 0x2020202020202020
)

// q6Word returns 8 Q6_K weights less 32 as signed bytes, from 8 bytes of
// nibbles (shifted so that the wanted ones are low) and 8 of bit pairs
// (shifted likewise); the subtraction runs on all 8 bytes at once, each
// first lifted by 128 so that none borrows from its neighbour.
func q6Word(nib, pairs uint64) uint64 {
	v := nib&lowNibbles | (pairs&lowPairs)<<4
	return ((v | highBits) - minus32) ^ highBits
}

// unpackPanel6 writes rows [0, nr) of a Q6_K panel, the first row at w[0:],
// stride bytes apart, for gemmAMX6: p.q one B tile per sub-block of 16
// (4 rows of 64 bytes: group g holds at lane r row r's 4 weights 4g..4g+3),
// p.ki the rows' scales per sub-block, p.k their d per super-block. Rows
// from nr on are zero.
func unpackPanel6(w []byte, stride, nr, cols int, p *panel) {
	nsb := cols / 256
	p.q = grow(p.q, panelRows*cols)
	p.ki = grow(p.ki, nsb*256)
	p.k = grow(p.k, nsb*panelRows)
	if nr < panelRows {
		clear(p.q)
		clear(p.ki)
		clear(p.k)
	}
	for r := range nr {
		row := w[r*stride:]
		for b := range nsb {
			blk := row[210*b : 210*b+210]
			tiles := p.q[b*4096:]
			for h := range 2 {
				ql, qh := blk[64*h:], blk[128+32*h:]
				for l := 0; l < 32; l += 8 {
					ql0 := binary.LittleEndian.Uint64(ql[l:])
					ql1 := binary.LittleEndian.Uint64(ql[32+l:])
					hb := binary.LittleEndian.Uint64(qh[l:])
					for k, v := range [4]uint64{
						q6Word(ql0, hb), q6Word(ql1, hb>>2), q6Word(ql0>>4, hb>>4), q6Word(ql1>>4, hb>>6),
					} {
						e := 128*h + 32*k + l // the first of the 8 weights
						o := (e/16)*256 + (e%16/4)*64 + 4*r
						binary.LittleEndian.PutUint32(tiles[o:], uint32(v))
						binary.LittleEndian.PutUint32(tiles[o+64:], uint32(v>>32))
					}
				}
			}
			for s := range 16 {
				p.ki[b*256+s*16+r] = int32(int8(blk[192+s]))
			}
			p.k[b*panelRows+r] = half(blk[208:])
		}
	}
}

// gemmAMX6Go is gemmAMX6's arithmetic in Go, in its order.
func gemmAMX6Go(p *panel, a *amx6Inputs, nsb int, out []float32) {
	for ti := range a.tiles {
		var acc [amxIn][panelRows]float32
		for b := range nsb {
			for t := range amxIn {
				for r := range panelRows {
					var isum int32
					for s := range 16 {
						aq := a.q[((ti*nsb*16+16*b+s)*amxIn+t)*16:]
						wq := p.q[b*4096+s*256:]
						var dot int32
						for k := range 16 {
							dot += int32(int8(aq[k])) * int32(int8(wq[(k/4)*64+4*r+k%4]))
						}
						isum += p.ki[b*256+s*16+r] * dot
					}
					acc[t][r] = fma32(float32(isum), p.k[b*panelRows+r]*a.xd[(ti*nsb+b)*amxIn+t], acc[t][r])
				}
			}
		}
		for t := range amxIn {
			copy(out[(ti*amxIn+t)*panelRows:], acc[t][:])
		}
	}
}

// amx6Task is a Q6_K batch's AMX GEMM over panels.
type amx6Task struct {
	w      []byte
	stride int
	rows   int
	cols   int
	a      *amx6Inputs
	n      int
	y      []float32
	bufs   chan *panel
}

func (m *amx6Task) run(lo, hi int) {
	p := <-m.bufs
	defer func() { m.bufs <- p }()
	nsb := m.cols / 256
	for pi := lo; pi < hi; pi++ {
		r0 := pi * panelRows
		nr := min(panelRows, m.rows-r0)
		unpackPanel6(m.w[r0*m.stride:], m.stride, nr, m.cols, p)
		p.out = grow(p.out, m.a.tiles*amxIn*panelRows)
		gemmAMX6(p, m.a, nsb, p.out)
		scatterRows(m.y, p.out, m.n, m.rows, r0, nr)
	}
}

// gemm6 multiplies the prepared Q8_K inputs xs by the rows×cols Q6_K matrix
// w (the file's layout) on gemmAMX6.
func (p *Pool) gemm6(w []byte, rows, cols int, xs []xrow, y []float32) {
	s := &p.scratch
	s.panelBufs(p.threads)
	nt := (len(xs) + amxIn - 1) / amxIn
	s.ax6.size(nt, cols)
	s.fa = amxFillTask{a: &s.ax6, x: xs, cols: cols}
	p.runTask(&s.fa, nt, 1)
	s.fa = amxFillTask{}
	s.t6 = amx6Task{w: w, stride: len(w) / rows, rows: rows, cols: cols, a: &s.ax6, n: len(xs), y: y, bufs: s.panels}
	p.runTask(&s.t6, (rows+panelRows-1)/panelRows, 1)
	s.t6 = amx6Task{}
}
