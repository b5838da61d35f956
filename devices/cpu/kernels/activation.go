package kernels

import "math"

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

// blockScale returns d = max|x|/127 and its inverse (0 for an all-zero block),
// so that x/d rounds into [-127, 127]. -128 is never produced: the assembly
// kernels flip activation signs and -128 has no positive counterpart.
func blockScale(x []float32) (d, id float32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	if amax == 0 {
		return 0, 0
	}
	d = amax / 127
	return d, 1 / d
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// quantize32 fills r.q, r.d and r.s from x in blocks of 32 (Q8_1-like: f32
// scale and, for the weight types with an offset, d times the block's sum).
func quantize32(x []float32, r *xrow) {
	for b := range len(x) / 32 {
		xb, qb := x[32*b:32*b+32], r.q[32*b:32*b+32]
		d, id := blockScale(xb)
		var sum int32
		for i, v := range xb {
			q := roundInt(v * id)
			qb[i] = int8(q)
			sum += q
		}
		r.d[b] = d
		r.s[b] = d * float32(sum)
	}
}

// quantize256 fills r.q, r.d and r.bs from x in blocks of 256 (Q8_K-like: one
// f32 scale per block and the sum of every 16 quantized values).
func quantize256(x []float32, r *xrow) {
	for b := range len(x) / 256 {
		xb, qb := x[256*b:256*b+256], r.q[256*b:256*b+256]
		d, id := blockScale(xb)
		for g := range 16 {
			var sum int32
			for i, v := range xb[16*g : 16*g+16] {
				q := roundInt(v * id)
				qb[16*g+i] = int8(q)
				sum += q
			}
			r.bs[16*b+g] = int16(sum)
		}
		r.d[b] = d
	}
}
