package kernels

import (
	"encoding/binary"

	"hybrid/quant"
)

// Packed is a weight matrix repacked for this CPU's kernels, replacing the
// file's layout: for Q4_0, 16 rows at a time, per block of 32 columns the 16
// rows' f16 scales and then their nibble bytes interleaved four at a time
// (packed_amd64.s), the same 18 bytes per row and block as the file. A
// decode step then reads one sequential stream per worker, and one VPDPBUSD
// against a broadcast of four activations serves 16 rows, as llama.cpp's
// repacked Q4_0 (its Q4_0_8x8 layout) does for 8; a batch unpacks the panels
// for the GEMM (gemm.go) with a mask and a shift instead of a gather. Both
// sum in the GEMM's order, so a prompt and a decode step give a row the same
// arithmetic.
type Packed struct {
	Type       quant.Type
	Rows, Cols int
	data       []byte
}

// packedBlock is the bytes of a 16-row panel's block of 32 columns.
const packedBlock = 16 * 18

// Packable reports whether Pack takes a t matrix of rows×cols here.
func Packable(t quant.Type, rows, cols int) bool {
	return t == quant.Q4_0 && packedKernels && rows%panelRows == 0 && cols%32 == 0 && rows > 0
}

// Pack repacks the rows×cols t matrix w (the file's layout), or returns nil
// if Packable says no. It reads all of w, over the pool: a memory fault
// there (a truncated file) is the pool's Fault, and the result is garbage.
func Pack(p *Pool, t quant.Type, w []byte, rows, cols int) *Packed {
	if !Packable(t, rows, cols) || len(w) != rows*cols/32*18 {
		return nil
	}
	nb, stride := cols/32, cols/32*18
	pk := &Packed{Type: t, Rows: rows, Cols: cols, data: make([]byte, len(w))}
	p.Run(rows/panelRows, func(lo, hi int) {
		for pi := lo; pi < hi; pi++ {
			packQ4_0(w[pi*panelRows*stride:(pi+1)*panelRows*stride], stride, nb, pk.data[pi*nb*packedBlock:(pi+1)*nb*packedBlock])
		}
	})
	return pk
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
	if n >= gemmMin && gemmTile != nil {
		p.gemmPanels(gemmFor[pk.Type], pk.Rows, pk.Cols, xs, y, pk)
		return
	}
	nb := pk.Cols / 32
	s.off = grow(s.off, n*nb)
	for i := range xs {
		q := xs[i].q
		for b := range nb {
			var sum int32
			for _, v := range q[32*b : 32*b+32] {
				sum += int32(v)
			}
			s.off[i*nb+b] = 8 * sum
		}
	}
	s.pt = packedTask{pk: pk, x: xs, off: s.off, y: y}
	p.runTask(&s.pt, pk.Rows/panelRows, 1)
	s.pt = packedTask{}
}

// unpackPanel writes panel pi into the GEMM's panel layout.
func (pk *Packed) unpackPanel(pi, nr int, p *panel) {
	nb := pk.Cols / 32
	unpackPacked(pk.data[pi*nb*packedBlock:(pi+1)*nb*packedBlock], nb, p)
	clear(p.mn[:nb*panelRows])
}

// packedTask is Packed.MatMul's work over panels for a few inputs.
type packedTask struct {
	pk  *Packed
	x   []xrow
	off []int32
	y   []float32
}

func (t *packedTask) run(lo, hi int) {
	nb := t.pk.Cols / 32
	for pi := lo; pi < hi; pi++ {
		w := t.pk.data[pi*nb*packedBlock : (pi+1)*nb*packedBlock]
		for i := range t.x {
			gemvPacked(w, nb, &t.x[i], t.off[i*nb:(i+1)*nb], t.y[i*t.pk.Rows+pi*panelRows:][:panelRows])
		}
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
