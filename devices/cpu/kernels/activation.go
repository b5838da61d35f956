package kernels

import (
	"math"

	"hybrid/quant"
)

// xrow is one activation row prepared for a weight type's kernel. Which fields
// are set depends on the type: f for the float types; q and d (blocks of 32)
// plus s for Q4_1 and Q5_1; q, d (blocks of 256) and bs for the K-quants.
type xrow struct {
	f  []float32 // the activations themselves
	q  []int8    // quantized activations, in [-127, 127]
	d  []float32 // one scale per block: x[i] ≈ d[i/block]*q[i]
	s  []float32 // per block of 32: d times the sum of its q
	bs []int16   // per 16 elements: the sum of their q
}

// roundInt rounds f, |f| < 2^22, to the nearest integer, ties to even, by
// letting a float add do the rounding.
func roundInt(f float32) int32 {
	return int32(math.Float32bits(f+12582912)&0x7fffff) - 0x400000
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// quantize32 fills r.q, r.d and r.s from x in blocks of 32 exactly as ggml's
// quantize_row_q8_0 and quantize_row_q8_1 do on x86, so that the dot products
// equal llama.cpp's: d = max|x|/127 is stored as binary16 (r.d holds the
// rounded value the dot uses), q = x·(127/max|x|) rounded to nearest even,
// and s is the rounded d times Σq (exact in f32), for Q4_0's offset, or with
// q81 (Q4_1 and Q5_1 weights) ggml's Q8_1 sum: the unrounded d times Σq,
// rounded to binary16.
// q stays in [-127, 127]: the assembly kernels flip activation signs, and
// -128 has no positive counterpart.
//
// Where the CPU allows, an assembly version (quantize_amd64.s) does the same
// arithmetic, op for op, to the bit (TestQuantize32BitIdentical).
func quantize32(x []float32, r *xrow, q81 bool) { quantize32Impl(x, r, q81) }

// quantize256 fills r.q, r.d and r.bs from x in blocks of 256 exactly as
// ggml's quantize_row_q8_K does: the scale comes from the value of largest
// magnitude (the first, on a tie) with its sign, iscale = -127/max, q =
// min(127, iscale·x rounded to nearest even), d = 1/iscale in f32, and the
// sum of every 16 q.
//
// As quantize32, it has an assembly version that gives the same bits
// (TestQuantize256BitIdentical).
func quantize256(x []float32, r *xrow) { quantize256Impl(x, r) }

// quantize32Impl and quantize256Impl are the portable Go versions unless
// quantize_amd64.go finds the CPU features its assembly needs (AVX-512 F,
// or for quantize32 AVX2). quantize32AVX2Impl is the AVX2 quantize32 where
// the CPU can run it, in use or not (nil elsewhere), for its test.
var (
	quantize32Impl     = quantize32Go
	quantize256Impl    = quantize256Go
	quantize32AVX2Impl func(x []float32, r *xrow, q81 bool)
)

// quantize32Go is quantize32 in portable Go, the reference for the assembly.
func quantize32Go(x []float32, r *xrow, q81 bool) {
	for b := range len(x) / 32 {
		xb, qb := x[32*b:32*b+32], r.q[32*b:32*b+32]
		var amax float32
		for _, v := range xb {
			amax = max(amax, abs32(v))
		}
		d := amax / 127
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		var sum int32
		for i, v := range xb {
			q := roundInt(v * id)
			qb[i] = int8(q)
			sum += q
		}
		r.d[b] = quant.F16ToF32(quant.F32ToF16(d))
		if q81 {
			r.s[b] = quant.F16ToF32(quant.F32ToF16(d * float32(sum)))
		} else {
			r.s[b] = r.d[b] * float32(sum)
		}
	}
}

// quantize256Go is quantize256 in portable Go, the reference for the
// assembly.
func quantize256Go(x []float32, r *xrow) {
	for b := range len(x) / 256 {
		xb, qb := x[256*b:256*b+256], r.q[256*b:256*b+256]
		var amax, mx float32
		for _, v := range xb {
			if a := abs32(v); a > amax {
				amax, mx = a, v
			}
		}
		if amax == 0 {
			clear(qb)
			clear(r.bs[16*b : 16*b+16])
			r.d[b] = 0
			continue
		}
		iscale := -127 / mx
		for g := range 16 {
			var sum int32
			for i, v := range xb[16*g : 16*g+16] {
				q := min(127, roundInt(iscale*v))
				qb[16*g+i] = int8(q)
				sum += q
			}
			r.bs[16*b+g] = int16(sum)
		}
		r.d[b] = 1 / iscale
	}
}
