package kernels

import (
	"encoding/binary"
	"unsafe"

	"hybrid/quant"
)

// The batched mat-mul of the quantized types (prefill) as a GEMM.
//
// A batch of n ≥ gemmMin inputs is multiplied 16 weight rows × 8 inputs at a
// time. The 16 rows are first unpacked, once for all n inputs, into a panel
// of unsigned bytes interleaved four elements per row (lane r of a 64-byte
// group holds elements 4g..4g+3 of row r), so that one VPDPBUSD of a group
// against a broadcast of an input's four matching activations adds 64
// products to 16 rows' sums at once, and the sums of 8 inputs are kept in
// registers. Per block b of 32 elements of row r, with integer weights u in
// 0..255:
//
//	W_r·x ≈ Σ_b scale[r,b]·d[b]·(Σ_i u_i·q_i − c·Σ_i q_i)
//
// where q, d are the activations quantized as llama.cpp does (Q8_0) and c
// the type's offset (Q4_0's 8, Q8_0's 128 after its signed bytes are
// flipped to unsigned). The integer sums are exact, as in the row kernels.
//
// Only types for which this can follow llama.cpp's own order of the float
// adds take it: Q4_0, which llama.cpp repacks (Q4_0_8x8) and multiplies per
// block as the tile kernel does, and Q8_0, which it sums in vec_dot's 8
// lanes as the lanes kernel does (to the bit of the row kernel: TestMatMul).
// Q4_K it repacks and sums in its own orders (packed.go); the others it
// multiplies row by row in vec_dot order. A GEMM in another order (this
// tile kernel's was tried for all types) stays within the rule of
// ../shared/models/README.md on first-step logits, about 1e-2 on random
// synthetic models, but on synthetic TinyLlama Q4_K_M that was enough for a
// greedy token to differ at step 11 with a margin of 0.18, past the rule's
// ties; so those types' batches take the row kernels.
//
// The panel is unpacked per mat-mul from the weights as they lie in the file,
// so nothing is repacked at load and the mapped weights stay the only copy;
// unpacking costs about one pass over the rows' bytes, small against the n/8
// passes of the multiply for a prompt.

// gemmMin is the smallest batch the GEMM takes; smaller ones (a decode step,
// a short prompt) go through the row kernels, which read each weight once
// without unpacking it.
const gemmMin = 8

const (
	panelRows = 16 // weight rows per panel, one per 32-bit lane of a ZMM register
	tileIn    = 8  // inputs per tile, one accumulator each
)

// gemmSpec is how one weight type unpacks into panels.
type gemmSpec struct {
	c int32 // offset subtracted per activation: Σ(u−c)·q
	// unpack writes rows [0, nrows) of the panel from w, the first row at
	// w[0:], stride bytes apart.
	unpack func(w []byte, stride, nrows int, p *panel)
	// lanes: multiplied by gemmLanes, in vec_dot's order (Q8_0); the others
	// by gemmTile. Where AMX runs, all take the tile order (amx.go).
	lanes bool
}

// inLanes reports whether g's batches are summed in vec_dot's lanes here:
// where AMX runs, Q8_0's take the AMX kernel whatever their size (amx.go).
func (g *gemmSpec) inLanes() bool { return g.lanes && gemmAMX == nil }

var gemmFor = map[quant.Type]*gemmSpec{
	quant.Q4_0: {c: 8, unpack: unpackQ4_0},
	quant.Q8_0: {c: 128, unpack: unpackQ8_0, lanes: true},
}

// gemmLanes, where the CPU has it, is the GEMM of the specs with lanes set:
// each (row, input) keeps 8 float lanes, one per group of 4 columns, and
// adds them at the end, as llama.cpp's vec_dot (and tinyBLAS) sum Q8_0.
var gemmLanes = gemmLanesGo

// gemmLanesGo is the lanes GEMM's arithmetic in Go: the reference for the
// assembly, and what runs without it.
func gemmLanesGo(p *panel, a *inTile, nsb int, out *[tileIn * panelRows]float32) {
	for t := range tileIn {
		for r := range panelRows {
			var l [8]float32
			for b := range nsb {
				d := p.sc[b*16+r] * a.d[b*tileIn+t]
				for g := range 8 {
					G := b*8 + g
					s := a.corr[G*tileIn+t]
					for i := range 4 {
						s += int32(p.q[G*64+4*r+i]) * int32(int8(a.q[G*32+4*t+i]))
					}
					l[g] = fma32(float32(s), d, l[g])
				}
			}
			// HSUM's order.
			a0, a1, a2, a3 := l[0]+l[4], l[1]+l[5], l[2]+l[6], l[3]+l[7]
			out[t*panelRows+r] = (a0 + a2) + (a1 + a3)
		}
	}
}

// gemmTile, where the CPU has a fast one, multiplies one panel by one tile
// of inputs: out[t*16+r] = Σ_b over nsb blocks of the formula above, block
// after block. nil leaves batches on the row kernels.
var gemmTile func(p *panel, a *inTile, nsb int, out *[tileIn * panelRows]float32)

// panel is 16 weight rows unpacked: q holds for each block its 8 groups of
// 64 bytes; sc the 16 rows' scales per block.
type panel struct {
	q   []byte
	sc  []float32
	c   []int32   // the AMX kernels' tile scratch (amxScratch)
	out []float32 // the AMX kernels' products for all inputs
	k   []float32 // an unpacked K-quant panel's float scales (unpackPanelK, unpackPanel6)
	ki  []int32   // an unpacked Q6_K panel's scales (unpackPanel6)
}

func (p *panel) size(cols int) {
	p.q = grow(p.q, panelRows*cols)
	p.sc = grow(p.sc, panelRows*cols/32)
}

// inTile is 8 inputs laid out for the kernels: q holds, for each group of 4
// columns, the 8 inputs' 4 activations (32 bytes); d and off hold per block
// the 8 inputs' scale and c·Σq (gemmTile), corr per group of 4 columns their
// −c·Σq (gemmLanes).
type inTile struct {
	q    []byte
	d    []float32
	off  []int32
	corr []int32
}

// put32 writes v at b[i:i+4], little-endian.
func put32(b []byte, i int, v uint32) { binary.LittleEndian.PutUint32(b[i:], v) }

func get32(b []byte, i int) uint32 { return binary.LittleEndian.Uint32(b[i:]) }

const nib = 0x0f0f0f0f

// The unpackers write each row's blocks into the panel: Q4_0's groups 0..3
// come from the low nibbles of its 16 bytes and groups 4..7 from the high
// ones, as the type stores them; Q8_0's bytes are flipped to unsigned.
func unpackQ4_0(w []byte, stride, nrows int, p *panel) {
	nb := stride / 18
	for r := range nrows {
		row := w[r*stride:]
		for b := range nb {
			blk := row[18*b:]
			o := b*8*64 + 4*r
			for g := range 4 {
				v := get32(blk, 2+4*g)
				put32(p.q, o+g*64, v&nib)
				put32(p.q, o+(g+4)*64, v>>4&nib)
			}
			p.sc[b*16+r] = half(blk)
		}
	}
}

func unpackQ8_0(w []byte, stride, nrows int, p *panel) {
	nb := stride / 34
	for r := range nrows {
		row := w[r*stride:]
		for b := range nb {
			blk := row[34*b:]
			o := b*8*64 + 4*r
			for g := range 8 {
				put32(p.q, o+g*64, get32(blk, 2+4*g)^0x80808080)
			}
			p.sc[b*16+r] = half(blk)
		}
	}
}

// fillTile lays out inputs x[i0:i0+8] (fewer at the end of the batch, the
// rest zero) for spec g.
func fillTile(g *gemmSpec, x []xrow, i0, cols int, a *inTile) {
	nb := cols / 32
	a.q = grow(a.q, tileIn*cols)
	a.d = grow(a.d, tileIn*nb)
	if g.lanes {
		a.corr = grow(a.corr, tileIn*cols/4)
	} else {
		a.off = grow(a.off, tileIn*nb)
	}
	for t := range tileIn {
		i := i0 + t
		if i >= len(x) {
			for G := range cols / 4 {
				put32(a.q, G*32+4*t, 0)
				if g.lanes {
					a.corr[G*tileIn+t] = 0
				}
			}
			for b := range nb {
				a.d[b*tileIn+t] = 0
				if !g.lanes {
					a.off[b*tileIn+t] = 0
				}
			}
			continue
		}
		xr := &x[i]
		q := int8Bytes(xr.q)
		for G := range cols / 4 {
			put32(a.q, G*32+4*t, get32(q, 4*G))
		}
		for b := range nb {
			a.d[b*tileIn+t] = xr.d[b]
		}
		if g.lanes {
			for G := range cols / 4 {
				v := xr.q[4*G : 4*G+4]
				a.corr[G*tileIn+t] = -g.c * (int32(v[0]) + int32(v[1]) + int32(v[2]) + int32(v[3]))
			}
			continue
		}
		for b := range nb {
			var sum int32
			for _, v := range xr.q[32*b : 32*b+32] {
				sum += int32(v)
			}
			a.off[b*tileIn+t] = g.c * sum
		}
	}
}

// int8Bytes views q as bytes.
func int8Bytes(q []int8) []byte {
	if len(q) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&q[0])), len(q))
}

// gemmTileGo is the kernel's arithmetic in Go, in its order, for tests.
func gemmTileGo(p *panel, a *inTile, nsb int, out *[tileIn * panelRows]float32) {
	const gpb = 8 // groups of 4 columns per block
	var acc [tileIn][panelRows]float32
	for b := range nsb {
		var isum [tileIn][panelRows]int32
		for g := range gpb {
			G := b*gpb + g
			wq := p.q[G*64 : G*64+64]
			aq := a.q[G*32 : G*32+32]
			for t := range tileIn {
				for r := range panelRows {
					var s int32
					for i := range 4 {
						s += int32(wq[4*r+i]) * int32(int8(aq[4*t+i]))
					}
					isum[t][r] += s
				}
			}
		}
		for t := range tileIn {
			for r := range panelRows {
				f := float32(isum[t][r] - a.off[b*tileIn+t])
				acc[t][r] = fma32(f, p.sc[b*16+r]*a.d[b*tileIn+t], acc[t][r])
			}
		}
	}
	for t := range tileIn {
		copy(out[t*panelRows:], acc[t][:])
	}
}

// gemmTask is MatMul's GEMM over panels of 16 rows.
type gemmTask struct {
	g     *gemmSpec
	rows  int
	cols  int
	n     int
	tiles []inTile
	y     []float32
	bufs  chan *panel
	src   panelSource
	amx   *amxInputs // the inputs for gemmAMX, or nil
}

// panelSource writes panel pi (nr rows, fewer only for the last) of a
// matrix into p.
type panelSource interface {
	unpackPanel(pi, nr int, p *panel)
}

// fileMatrix is a matrix in the file's layout, its rows stride bytes apart.
type fileMatrix struct {
	g      *gemmSpec
	w      []byte
	stride int
}

func (f *fileMatrix) unpackPanel(pi, nr int, p *panel) {
	f.g.unpack(f.w[pi*panelRows*f.stride:], f.stride, nr, p)
}

func (m *gemmTask) run(lo, hi int) {
	p := <-m.bufs
	defer func() { m.bufs <- p }()
	p.size(m.cols)
	nsb := m.cols / 32
	var out [tileIn * panelRows]float32
	for pi := lo; pi < hi; pi++ {
		r0 := pi * panelRows
		nr := min(panelRows, m.rows-r0)
		if nr < panelRows {
			clear(p.sc)
		}
		m.src.unpackPanel(pi, nr, p)
		if m.amx != nil {
			p.out = grow(p.out, m.amx.tiles*amxIn*panelRows)
			gemmAMX(p, m.amx, nsb, p.out)
			scatterRows(m.y, p.out, m.n, m.rows, r0, nr)
			continue
		}
		tile := gemmTile
		if m.g.lanes {
			tile = gemmLanes
		}
		for ti := range m.tiles {
			tile(p, &m.tiles[ti], nsb, &out)
			for t := range min(tileIn, m.n-ti*tileIn) {
				copy(m.y[(ti*tileIn+t)*m.rows+r0:][:nr], out[t*panelRows:t*panelRows+nr])
			}
		}
	}
}

// fillTask lays out the input tiles in parallel.
type fillTask struct {
	g     *gemmSpec
	x     []xrow
	cols  int
	tiles []inTile
}

func (f *fillTask) run(lo, hi int) {
	for i := lo; i < hi; i++ {
		fillTile(f.g, f.x, i*tileIn, f.cols, &f.tiles[i])
	}
}

// gemm multiplies the prepared inputs xs by w (the file's layout) with spec g.
func (p *Pool) gemm(g *gemmSpec, w []byte, rows, cols int, xs []xrow, y []float32) {
	s := &p.scratch
	s.fm = fileMatrix{g: g, w: w, stride: len(w) / rows}
	p.gemmPanels(g, rows, cols, xs, y, &s.fm)
	s.fm = fileMatrix{}
}

// gemmPanels multiplies the prepared inputs xs by the rows×cols matrix whose
// panels unpack writes, with spec g.
func (p *Pool) gemmPanels(g *gemmSpec, rows, cols int, xs []xrow, y []float32, src panelSource) {
	s := &p.scratch
	n := len(xs)
	s.panelBufs(p.threads)
	if gemmAMX != nil && (g.lanes || n >= amxMin) {
		nt := (n + amxIn - 1) / amxIn
		s.ax.size(nt, cols)
		s.ax.g = g
		s.fa = amxFillTask{a: &s.ax, x: xs, cols: cols}
		p.runTask(&s.fa, nt, 1)
		s.fa = amxFillTask{}
		s.gt = gemmTask{g: g, rows: rows, cols: cols, n: n, y: y, bufs: s.panels, src: src, amx: &s.ax}
		p.runTask(&s.gt, (rows+panelRows-1)/panelRows, 1)
		s.gt = gemmTask{}
		return
	}
	nt := (n + tileIn - 1) / tileIn
	if cap(s.tiles) < nt {
		s.tiles = append(s.tiles[:cap(s.tiles)], make([]inTile, nt-cap(s.tiles))...)
	}
	tiles := s.tiles[:nt]
	s.ft = fillTask{g: g, x: xs, cols: cols, tiles: tiles}
	p.runTask(&s.ft, nt, 1)
	s.ft = fillTask{}
	s.gt = gemmTask{g: g, rows: rows, cols: cols, n: n, tiles: tiles, y: y, bufs: s.panels, src: src}
	p.runTask(&s.gt, (rows+panelRows-1)/panelRows, 1)
	s.gt = gemmTask{}
}

// panelBufs makes the scratch's panel buffers, one per thread, on first use.
func (s *scratch) panelBufs(threads int) {
	if s.panels == nil {
		s.panels = make(chan *panel, threads)
		for range threads {
			s.panels <- &panel{}
		}
	}
}
