package kernels

import "encoding/binary"

// Q4_K batches on AMX tiles (see amx.go for Q4_0 and Q8_0).
//
// A packed Q4_K panel (packed.go) is unpacked per mat-mul into one B tile
// per sub-block of 32 columns (its nibbles as bytes) and, per pair of
// sub-blocks, the 16 rows' two scales, two mins, d and dmin as floats. Each
// TDPBSUD then gives the exact sums ie (even sub-block) or io (odd) of 16
// inputs × 16 rows, and the vector units fold a pair at a time in the order
// of llama.cpp's repacked Q4_K GEMM (gemvPackedKGo with pairs):
//
//	acc    = fma(ie·sc_e + io·sc_o, d·xd,    acc)
//	accMin = fma(m_e·bs_e + m_o·bs_o, dmin·xd, accMin)
//	y      = acc − accMin
//
// where bs are the input's sums over the sub-blocks. The integer products
// are taken in float32, exactly: |ie|, |io| ≤ 32·15·127 and scales ≤ 63, so
// ie·sc_e + io·sc_o < 2^23, and |m·bs| ≤ 63·32·127; float32 holds every
// integer below 2^24, so each float product and sum is the integer one.
// So the tile kernel agrees with gemvPackedKGo to the bit, as the VNNI
// kernel does, for the batch inputs that llama.cpp takes four at a time
// through its GEMM (all but the last n%4, which keep the gemv's order).

// amxSuper is the floats of one super-block of an unpacked Q4_K panel: the
// 16 rows' d and dmin, then per pair of sub-blocks their two scales and two
// mins.
const amxSuper = 2*panelRows + 4*4*panelRows

// gemmAMXK, where AMX runs, multiplies one unpacked Q4_K panel by all the
// prepared inputs a: out[i*16+r] is input i's product with row r.
var gemmAMXK func(p *panel, a *amxKInputs, pairs int, out []float32)

// amxKInputs is a Q4_K batch laid out for gemmAMXK in tiles of 16 inputs,
// the last padded with zero inputs: q as amxInputs' (per tile, block of 32
// and input, the block's activations); xd per tile, super-block and input,
// the input's scale; bs per tile, pair of sub-blocks and input, the input's
// sums over the pair's two sub-blocks (the 16 even ones, then the 16 odd
// ones), as floats.
type amxKInputs struct {
	tiles int
	q     []byte
	xd    []float32
	bs    []float32
}

func (a *amxKInputs) size(tiles, cols int) {
	a.tiles = tiles
	pairs := cols / 64
	a.q = grow(a.q, tiles*amxIn*cols)
	a.xd = grow(a.xd, tiles*cols/256*amxIn)
	a.bs = grow(a.bs, tiles*pairs*2*amxIn)
}

// layTile lays out tile ti of the Q8_K inputs x.
func (a *amxKInputs) layTile(x []xrow, ti, cols int) {
	pairs := cols / 64
	for t := range amxIn {
		i := ti*amxIn + t
		for b := range 2 * pairs {
			j := (ti*2*pairs+b)*amxIn + t
			dst := a.q[j*32 : j*32+32]
			if i >= len(x) {
				clear(dst)
				continue
			}
			copy(dst, int8Bytes(x[i].q[32*b:32*b+32]))
		}
		for pr := range pairs {
			j := (ti*pairs + pr) * amxIn
			if i >= len(x) {
				a.bs[2*j+t], a.bs[2*j+amxIn+t] = 0, 0
				continue
			}
			bs := x[i].bs[4*pr : 4*pr+4]
			a.bs[2*j+t] = float32(int32(bs[0]) + int32(bs[1]))
			a.bs[2*j+amxIn+t] = float32(int32(bs[2]) + int32(bs[3]))
		}
		for b := range pairs / 4 {
			v := float32(0)
			if i < len(x) {
				v = x[i].d[b]
			}
			a.xd[(ti*pairs/4+b)*amxIn+t] = v
		}
	}
}

// unpackPanelK writes panel pi of a packed Q4_K matrix for gemmAMXK: p.q
// one B tile per sub-block, p.k amxSuper floats per super-block.
func (pk *Packed) unpackPanelK(pi int, p *panel) {
	nb := pk.Cols / 256
	p.q = grow(p.q, panelRows*pk.Cols)
	p.k = grow(p.k, nb*amxSuper)
	w := pk.data[pi*nb*packedBlockK : (pi+1)*nb*packedBlockK]
	for b := range nb {
		blk := w[b*packedBlockK:]
		for pr := range 4 {
			src := blk[pkQs+512*pr : pkQs+512*pr+512]
			lo := p.q[(8*b+2*pr)*512:]
			hi := p.q[(8*b+2*pr+1)*512:]
			for o := 0; o < 512; o += 8 {
				v := binary.LittleEndian.Uint64(src[o:])
				binary.LittleEndian.PutUint64(lo[o:], v&0x0f0f0f0f0f0f0f0f)
				binary.LittleEndian.PutUint64(hi[o:], v>>4&0x0f0f0f0f0f0f0f0f)
			}
			f := p.k[b*amxSuper+2*panelRows+pr*4*panelRows:]
			for r := range panelRows {
				f[r] = float32(blk[pkScales+16*(2*pr)+r])
				f[16+r] = float32(blk[pkScales+16*(2*pr+1)+r])
				f[32+r] = float32(blk[pkMins+16*(2*pr)+r])
				f[48+r] = float32(blk[pkMins+16*(2*pr+1)+r])
			}
		}
		for r := range panelRows {
			p.k[b*amxSuper+r] = half(blk[2*r:])
			p.k[b*amxSuper+panelRows+r] = half(blk[pkDmin+2*r:])
		}
	}
}

// gemmAMXKGo is gemmAMXK's arithmetic in Go, in its order.
func gemmAMXKGo(p *panel, a *amxKInputs, pairs int, out []float32) {
	for ti := range a.tiles {
		var acc, accMin [amxIn][panelRows]float32
		for pr := range pairs {
			sb := p.k[pr/4*amxSuper:]
			f := sb[2*panelRows+pr%4*4*panelRows:]
			xd := a.xd[(ti*pairs/4+pr/4)*amxIn:]
			j := (ti*pairs + pr) * amxIn
			for t := range amxIn {
				for r := range panelRows {
					var ie, io int32
					for k := range 32 {
						w := (k/4)*64 + 4*r + k%4
						ie += int32(int8(a.q[((ti*2*pairs+2*pr)*amxIn+t)*32+k])) * int32(p.q[2*pr*512+w])
						io += int32(int8(a.q[((ti*2*pairs+2*pr+1)*amxIn+t)*32+k])) * int32(p.q[(2*pr+1)*512+w])
					}
					ps := fma32(float32(ie), f[r], float32(io)*f[16+r])
					acc[t][r] = fma32(ps, sb[r]*xd[t], acc[t][r])
					pm := fma32(f[32+r], a.bs[2*j+t], f[48+r]*a.bs[2*j+amxIn+t])
					accMin[t][r] = fma32(pm, sb[panelRows+r]*xd[t], accMin[t][r])
				}
			}
		}
		for t := range amxIn {
			for r := range panelRows {
				out[(ti*amxIn+t)*panelRows+r] = acc[t][r] - accMin[t][r]
			}
		}
	}
}

// amxKTask is a Q4_K batch's AMX GEMM over panels.
type amxKTask struct {
	pk   *Packed
	a    *amxKInputs
	n    int
	y    []float32
	bufs chan *panel
}

func (m *amxKTask) run(lo, hi int) {
	p := <-m.bufs
	defer func() { m.bufs <- p }()
	pairs := m.pk.Cols / 64
	for pi := lo; pi < hi; pi++ {
		m.pk.unpackPanelK(pi, p)
		p.out = grow(p.out, m.a.tiles*amxIn*panelRows)
		gemmAMXK(p, m.a, pairs, p.out)
		r0 := pi * panelRows
		scatterRows(m.y, p.out, m.n, m.pk.Rows, r0, panelRows)
	}
}

// gemmK multiplies the prepared Q8_K inputs xs by the packed Q4_K matrix pk
// on gemmAMXK.
func (p *Pool) gemmK(pk *Packed, xs []xrow, y []float32) {
	s := &p.scratch
	s.panelBufs(p.threads)
	nt := (len(xs) + amxIn - 1) / amxIn
	s.axk.size(nt, pk.Cols)
	s.fa = amxFillTask{a: &s.axk, x: xs, cols: pk.Cols}
	p.runTask(&s.fa, nt, 1)
	s.fa = amxFillTask{}
	s.kt = amxKTask{pk: pk, a: &s.axk, n: len(xs), y: y, bufs: s.panels}
	p.runTask(&s.kt, pk.Rows/panelRows, 1)
	s.kt = amxKTask{}
}
