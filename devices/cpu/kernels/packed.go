package kernels

import (
	"encoding/binary"

	"hybrid/quant"
)

// Packed is a weight matrix repacked for this CPU's kernels, replacing the
// file's layout, 16 rows at a time. For Q4_0, per block of 32 columns, the
// 16 rows' f16 scales and then their nibble bytes interleaved four at a time
// (packed_amd64.s): the same 18 bytes per row and block as the file. For
// Q4_K, per super-block of 256, the 16 rows' f16 d and dmin, their 6-bit
// sub-block scales and mins unpacked to a byte each, and their nibble bytes
// interleaved as Q4_0's: 148 bytes per row and super-block against the
// file's 144. A decode step then reads one sequential stream per worker,
// and one VPDPBUSD against a broadcast of four activations serves 16 rows,
// as llama.cpp's repacked layouts (Q4_0_8x8, Q4_K_8x8) do for 8; a batch
// unpacks the panels for the GEMM (gemm.go) with a mask and a shift instead
// of a gather. Q4_0 sums in the GEMM's order, which is llama.cpp's repacked
// Q4_0 order, so a prompt and a decode step give a row the same arithmetic.
// Q4_K sums each super-block in integers as llama.cpp does, then
// Σ d·(Σ sc·Σqx) and Σ dmin·(Σ m·Σx) in floats apart, super-block after
// super-block, subtracted at the end: its repacked Q4_K order, for a
// decode step and a batch alike.
type Packed struct {
	Type       quant.Type
	Rows, Cols int
	data       []byte
	free       func()
}

// Free gives the packed matrix's memory back; it must not be used after.
func (pk *Packed) Free() {
	if pk.free != nil {
		pk.free()
		pk.free, pk.data = nil, nil
	}
}

// The bytes of a 16-row panel's block: of 32 columns for Q4_0, of 256 for
// Q4_K, with the offsets of Q4_K's parts.
const (
	packedBlock  = 16 * 18
	packedBlockK = 32 + 32 + 128 + 128 + 2048
	pkDmin       = 32
	pkScales     = 64
	pkMins       = 192
	pkQs         = 320
)

// blockCols and blockBytes are the columns and panel bytes of t's block.
func packedShape(t quant.Type) (blockCols, blockBytes int) {
	if t == quant.Q4_K {
		return 256, packedBlockK
	}
	return 32, packedBlock
}

// Packable reports whether Pack takes a t matrix of rows×cols here.
func Packable(t quant.Type, rows, cols int) bool {
	if !packedKernels || rows <= 0 || rows%panelRows != 0 {
		return false
	}
	switch t {
	case quant.Q4_0:
		return cols%32 == 0
	case quant.Q4_K:
		return cols%256 == 0
	}
	return false
}

// Pack repacks the rows×cols t matrix w (the file's layout), or returns nil
// if Packable says no. It reads all of w, over the pool: a memory fault
// there (a truncated file) is the pool's Fault, and the result is garbage.
func Pack(p *Pool, t quant.Type, w []byte, rows, cols int) *Packed {
	if !Packable(t, rows, cols) {
		return nil
	}
	stride, err := quant.RowBytes(t, cols)
	if err != nil || len(w) != rows*stride {
		return nil
	}
	bc, bb := packedShape(t)
	nb := cols / bc
	data, free := allocBig(rows / panelRows * nb * bb)
	pk := &Packed{Type: t, Rows: rows, Cols: cols, data: data, free: free}
	p.Run(rows/panelRows, func(lo, hi int) {
		for pi := lo; pi < hi; pi++ {
			src, dst := w[pi*panelRows*stride:(pi+1)*panelRows*stride], pk.data[pi*nb*bb:(pi+1)*nb*bb]
			if t == quant.Q4_K {
				packQ4_K(src, stride, nb, dst)
			} else {
				packQ4_0(src, stride, nb, dst)
			}
		}
	})
	return pk
}

// packQ4_KGo repacks one panel of 16 Q4_K rows, stride bytes apart, into dst.
func packQ4_KGo(w []byte, stride, nb int, dst []byte) {
	for r := range panelRows {
		row := w[r*stride:][:stride]
		for b := range nb {
			blk, o := row[144*b:144*b+144], b*packedBlockK
			dst[o+2*r], dst[o+2*r+1] = blk[0], blk[1]
			dst[o+pkDmin+2*r], dst[o+pkDmin+2*r+1] = blk[2], blk[3]
			for s := range 8 {
				sc, m := quant.ScaleMinK4(s, blk[4:16])
				dst[o+pkScales+16*s+r], dst[o+pkMins+16*s+r] = sc, m
			}
			for c := range 32 {
				copy(dst[o+pkQs+64*c+4*r:][:4], blk[16+4*c:20+4*c])
			}
		}
	}
}

// packQ4_0Go repacks one panel of 16 rows, stride bytes apart, into dst.
func packQ4_0Go(w []byte, stride, nb int, dst []byte) {
	for r := range panelRows {
		row := w[r*stride:][:stride]
		for b := range nb {
			blk, o := row[18*b:18*b+18], b*packedBlock
			dst[o+2*r], dst[o+2*r+1] = blk[0], blk[1]
			for c := range 4 {
				copy(dst[o+32+64*c+4*r:][:4], blk[2+4*c:6+4*c])
			}
		}
	}
}

// packScalesQ4_K writes only the unpacked sub-block scales and mins of a
// Q4_K panel (the assembly packer does the rest).
func packScalesQ4_K(w []byte, stride, nb int, dst []byte) {
	for r := range panelRows {
		row := w[r*stride:][:stride]
		for b := range nb {
			blk, o := row[144*b+4:144*b+16], b*packedBlockK
			for s := range 8 {
				sc, m := quant.ScaleMinK4(s, blk)
				dst[o+pkScales+16*s+r], dst[o+pkMins+16*s+r] = sc, m
			}
		}
	}
}

// Bytes is the packed matrix's size.
func (pk *Packed) Bytes() int { return len(pk.data) }

// MatMul sets y[i*Rows+r] = W[r]·x[i] for the n inputs of x as MatMul does
// for the file's layout.
func (pk *Packed) MatMul(p *Pool, x []float32, n int, y []float32) {
	if len(x) != n*pk.Cols || len(y) != n*pk.Rows || n <= 0 {
		panic("kernels: Packed.MatMul: input or output of the wrong size")
	}
	k := kernelFor[pk.Type]
	s := &p.scratch
	xs := s.prepare(p, k, x, n, pk.Cols)
	// Q4_K multiplies a batch too as llama.cpp's repacked Q4_K does, input
	// after input (its GEMM sums each in the gemv's order), each panel
	// staying in cache for all of them; Q4_0's GEMM is its repacked order.
	if n >= gemmMin && gemmTile != nil && pk.Type == quant.Q4_0 {
		p.gemmPanels(gemmFor[pk.Type], pk.Rows, pk.Cols, xs, y, pk)
		return
	}
	// Where AMX runs, the inputs llama.cpp's GEMM takes (all but the last
	// n%4) go through the tile kernel, in that GEMM's order; the rest below.
	if m := n - n%4; pk.Type == quant.Q4_K && gemmAMXK != nil && m >= amxMin {
		p.gemmK(pk, xs[:m], y[:m*pk.Rows])
		if m == n {
			return
		}
		xs, y, n = xs[m:], y[m*pk.Rows:], n-m
	}
	bc, _ := packedShape(pk.Type)
	nb := pk.Cols / bc
	// Per input and block: Q4_0's offset 8·Σq; Q4_K's activation sums per
	// sub-block of 32 (Σ of two of Q8_K's sums of 16).
	per := bc / 32
	s.off = grow(s.off, n*nb*per)
	// A prompt's inputs are laid out in parallel: at 16 threads, done by
	// the caller alone, they left the other threads idle for a tenth of a
	// Q4_K_M prefill. Q4_K inputs in groups of four (llama.cpp's GEMM
	// order) go through the four-input kernel, laid out for it here.
	var tiles []kTile
	if pk.Type == quant.Q4_K && n >= 4 {
		if cap(s.ktiles) < n/4 {
			s.ktiles = make([]kTile, n/4)
		}
		tiles = s.ktiles[:n/4]
	}
	s.lt = layoutTask{k4: pk.Type == quant.Q4_K, x: xs, off: s.off, nb: nb, per: per}
	p.runTask(&s.lt, n, 1)
	s.lt.tiles = tiles
	p.runTask(&s.lt, len(tiles), 1)
	s.lt = layoutTask{}
	s.pt = packedTask{pk: pk, x: xs, off: s.off, y: y, k4: tiles}
	p.runTask(&s.pt, pk.Rows/panelRows, 1)
	s.pt = packedTask{}
}

// layoutTask lays out a packed mat-mul's inputs: without tiles, each
// input's offsets (Q4_0: 8·Σq per block; Q4_K: its sums per sub-block of
// 32); with them, each group of four inputs as a kTile.
type layoutTask struct {
	k4      bool
	x       []xrow
	off     []int32
	nb, per int
	tiles   []kTile
}

func (l *layoutTask) run(lo, hi int) {
	nb, per := l.nb, l.per
	if l.tiles != nil {
		for j := lo; j < hi; j++ {
			l.tiles[j].fill(l.x[4*j:4*j+4], l.off[4*j*nb*per:], nb)
		}
		return
	}
	for i := lo; i < hi; i++ {
		off := l.off[i*nb*per : (i+1)*nb*per]
		if l.k4 {
			for j := range off {
				off[j] = int32(l.x[i].bs[2*j]) + int32(l.x[i].bs[2*j+1])
			}
			continue
		}
		q := l.x[i].q
		for b := range nb {
			var sum int32
			for _, v := range q[32*b : 32*b+32] {
				sum += int32(v)
			}
			off[b] = 8 * sum
		}
	}
}

// kTile is four inputs laid out for gemmPackedK4: per super-block the 64
// groups of 4 columns, each the four inputs' 4 bytes; the four inputs' sums
// per sub-block of 32; their scales.
type kTile struct {
	q    []byte
	bsum []int32
	d    []float32
}

// fill lays out x (4 inputs) with their sums per 32 in bsum (nb·8 each,
// one input after another).
func (k *kTile) fill(x []xrow, bsum []int32, nb int) {
	k.q = grow(k.q, nb*1024)
	k.bsum = grow(k.bsum, nb*32)
	k.d = grow(k.d, nb*4)
	for t := range 4 {
		q := int8Bytes(x[t].q)
		for G := range nb * 64 {
			put32(k.q, G*16+4*t, get32(q, 4*G))
		}
		for j := range nb * 8 {
			k.bsum[j*4+t] = bsum[t*nb*8+j]
		}
		for b := range nb {
			k.d[b*4+t] = x[t].d[b]
		}
	}
}

// unpackPanel writes panel pi of a Q4_0 matrix into the GEMM's panel layout
// (only Q4_0 batches take the GEMM).
func (pk *Packed) unpackPanel(pi, nr int, p *panel) {
	nb := pk.Cols / 32
	unpackPacked(pk.data[pi*nb*packedBlock:(pi+1)*nb*packedBlock], nb, p)
}

// packedTask is Packed.MatMul's work over panels for a few inputs.
type packedTask struct {
	pk  *Packed
	x   []xrow
	off []int32
	y   []float32
	k4  []kTile // Q4_K: the first len(k4)·4 inputs, four at a time
}

func (t *packedTask) run(lo, hi int) {
	bc, bb := packedShape(t.pk.Type)
	nb := t.pk.Cols / bc
	per := bc / 32
	if len(t.x) == 1 && t.pk.Type == quant.Q4_0 {
		// A decode step: the range's panels read four places at a time.
		gemvPackedStreams(t.pk.data[lo*nb*bb:hi*nb*bb], hi-lo, nb, &t.x[0], t.off[:nb*per], t.y[lo*panelRows:hi*panelRows])
		return
	}
	for pi := lo; pi < hi; pi++ {
		w := t.pk.data[pi*nb*bb : (pi+1)*nb*bb]
		var out [4 * panelRows]float32
		for j := range t.k4 {
			gemmPackedK4(w, nb, &t.k4[j], &out)
			for u := range 4 {
				copy(t.y[(4*j+u)*t.pk.Rows+pi*panelRows:][:panelRows], out[u*panelRows:])
			}
		}
		for i := 4 * len(t.k4); i < len(t.x); i++ {
			y := t.y[i*t.pk.Rows+pi*panelRows:][:panelRows]
			off := t.off[i*nb*per : (i+1)*nb*per]
			if t.pk.Type == quant.Q4_K {
				// llama.cpp takes the inputs of a batch four at a time
				// through its GEMM, the rest through its gemv.
				gemvPackedK(w, nb, &t.x[i], off, y, i < len(t.x)-len(t.x)%4)
			} else {
				gemvPacked(w, nb, &t.x[i], off, y)
			}
		}
	}
}

// gemvPackedKGo is gemvPackedK's arithmetic in Go, for tests: x's Q8_K
// activations, bsum their sums per 32; with pairs, the float sums are taken
// every pair of sub-blocks (llama.cpp's GEMM order) instead of every
// super-block (its gemv's).
func gemvPackedKGo(w []byte, nb int, x *xrow, bsum []int32, y []float32, pairs bool) {
	var acc, accMin [panelRows]float32
	for b := range nb {
		blk := w[b*packedBlockK:]
		q := x.q[256*b:]
		for r := range panelRows {
			d := half(blk[2*r:]) * x.d[b]
			dmin := half(blk[pkDmin+2*r:]) * x.d[b]
			var isum, imin int32
			for pr := range 4 {
				var ie, io int32
				for c := range 8 {
					v := binary.LittleEndian.Uint32(blk[pkQs+64*(8*pr+c)+4*r:])
					for i := range 4 {
						byt := int32(v >> (8 * i) & 0xff)
						ie += (byt & 15) * int32(q[64*pr+4*c+i])
						io += (byt >> 4) * int32(q[64*pr+32+4*c+i])
					}
				}
				ps := ie*int32(blk[pkScales+16*(2*pr)+r]) + io*int32(blk[pkScales+16*(2*pr+1)+r])
				pm := int32(blk[pkMins+16*(2*pr)+r])*bsum[8*b+2*pr] + int32(blk[pkMins+16*(2*pr+1)+r])*bsum[8*b+2*pr+1]
				if pairs {
					acc[r] = fma32(float32(ps), d, acc[r])
					accMin[r] = fma32(float32(pm), dmin, accMin[r])
				}
				isum += ps
				imin += pm
			}
			if !pairs {
				acc[r] = fma32(float32(isum), d, acc[r])
				accMin[r] = fma32(float32(imin), dmin, accMin[r])
			}
		}
	}
	for r := range y[:panelRows] {
		y[r] = acc[r] - accMin[r]
	}
}

// gemvPackedGo is gemvPacked's arithmetic in Go, for tests.
func gemvPackedGo(w []byte, nb int, x *xrow, off []int32, y []float32) {
	var acc [panelRows]float32
	for b := range nb {
		blk := w[b*packedBlock:]
		q := x.q[32*b:]
		for r := range panelRows {
			var s int32
			for c := range 4 {
				v := binary.LittleEndian.Uint32(blk[32+64*c+4*r:])
				for i := range 4 {
					byt := int32(v >> (8 * i) & 0xff)
					s += (byt & 15) * int32(q[4*c+i])
					s += (byt >> 4) * int32(q[16+4*c+i])
				}
			}
			sc := half(blk[2*r:]) * x.d[b]
			acc[r] = fma32(float32(s-off[b]), sc, acc[r])
		}
	}
	copy(y, acc[:])
}
