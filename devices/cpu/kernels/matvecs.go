package kernels

import (
	"fmt"

	"hybrid/quant"
)

// VecJob is one matrix of MatVecs: a weight in the file's layout (T, W,
// Rows) or repacked (P, whose type and rows are its own), and its output Y
// of Rows values.
type VecJob struct {
	P    *Packed
	T    quant.Type
	W    []byte
	Rows int
	Y    []float32
}

// Type is the weight's type.
func (j *VecJob) Type() quant.Type {
	if j.P != nil {
		return j.P.Type
	}
	return j.T
}

// SameInput reports whether MatVecs can multiply one input by weights of
// types a and b in one job: both quantize the input into the same blocks,
// so it is prepared once.
func SameInput(a, b quant.Type) bool {
	ka, kb := kernelFor[a], kernelFor[b]
	return ka != nil && kb != nil && ka.block > 0 && ka.block == kb.block && ka.q81 == kb.q81
}

// MatVecs sets jobs[i].Y = W_i·x for one input x of cols values and each
// job's matrix, as MatVec (or Packed.MatMul) would one after another, bit
// for bit, but as one parallel job: x is quantized once, and the workers
// go from one matrix's rows to the next's without a barrier between them,
// so that small matrices (a decode step's k and v) do not leave most of 16
// threads waiting. Every pair of job types must be SameInput; it panics
// if not, or if a length does not fit, which are the caller's bugs.
func MatVecs(p *Pool, x []float32, cols int, jobs []VecJob) {
	if len(jobs) == 0 {
		return
	}
	t0 := jobs[0].Type()
	for i := range jobs {
		j := &jobs[i]
		t := j.Type()
		if !SameInput(t0, t) {
			panic(fmt.Sprintf("kernels: MatVecs of %s and %s weights", t0, t))
		}
		if j.P != nil {
			if j.P.Cols != cols || len(j.Y) != j.P.Rows {
				panic("kernels: MatVecs: a packed matrix's input or output of the wrong size")
			}
			continue
		}
		check(t, j.W, j.Rows, cols, x, 1, j.Y)
	}
	s := &p.scratch
	xs := s.prepare(p, kernelFor[t0], x, 1, cols)
	s.parts = s.parts[:0]
	pieces := 0
	for i := range jobs {
		j := &jobs[i]
		pt := vecPart{first: pieces}
		if j.P != nil {
			bc, bb := packedShape(j.P.Type)
			nb := cols / bc
			off := s.offOf(j.P.Type, xs, nb)
			pt.pt = packedTask{pk: j.P, x: xs, off: off, y: j.Y}
			pt.units = j.P.Rows / panelRows
			pt.per = max(1, minChunkBytes/(nb*bb))
		} else {
			stride := len(j.W) / j.Rows
			pt.mt = matTask{k: kernelFor[j.T], w: j.W, stride: stride, tile: j.Rows, x: xs, rows: j.Rows, y: j.Y}
			pt.units = j.Rows
			pt.per = max(1, minChunkBytes/stride)
		}
		pt.pieces = (pt.units + pt.per - 1) / pt.per
		pieces += pt.pieces
		s.parts = append(s.parts, pt)
	}
	s.vt = vecsTask{parts: s.parts}
	p.runTask(&s.vt, pieces, 1)
	s.vt = vecsTask{}
	clear(s.parts)
}

// offOf lays out one input's offsets for a packed type's kernel (Q4_0: 8·Σq
// per block; Q4_K: its sums per sub-block of 32), each type in a scratch
// slice of its own, so that a group of both types keeps both.
func (s *scratch) offOf(t quant.Type, xs []xrow, nb int) []int32 {
	k4 := t == quant.Q4_K
	dst := &s.off
	per := 1
	if k4 {
		dst, per = &s.offK, 8
	}
	*dst = grow(*dst, nb*per)
	l := layoutTask{k4: k4, x: xs, off: *dst, nb: nb, per: per}
	l.run(0, 1)
	return *dst
}

// vecPart is one matrix of a MatVecs job: its units (rows, or panels of a
// packed matrix) in pieces of per units, the job's pieces [first,
// first+pieces).
type vecPart struct {
	mt                        matTask
	pt                        packedTask
	first, pieces, per, units int
}

// vecsTask runs MatVecs's pieces: a claimed range of them is, in each
// matrix it covers, one call of that matrix's row (panel) range.
type vecsTask struct{ parts []vecPart }

func (v *vecsTask) run(lo, hi int) {
	for i := range v.parts {
		pt := &v.parts[i]
		a, b := max(lo, pt.first), min(hi, pt.first+pt.pieces)
		if a >= b {
			continue
		}
		ulo, uhi := (a-pt.first)*pt.per, min((b-pt.first)*pt.per, pt.units)
		if pt.pt.pk != nil {
			pt.pt.run(ulo, uhi)
		} else {
			pt.mt.run(ulo, uhi)
		}
	}
}
