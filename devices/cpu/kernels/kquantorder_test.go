//go:build amd64 && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"hybrid/quant"
)

// llamaDotK is the definition of ggml_vec_dot_q4_K_q8_K and
// ggml_vec_dot_q5_K_q8_K on AVX2 (ggml-cpu/arch/x86/quants.c): per
// super-block, eight int32 lanes (lane m holds elements 4m..4m+3 of every
// sub-block, times its scale) go into eight f32 lanes by FMA with d·dx; the
// mins meet the per-16 sums in four int32 lanes, which Q4_K keeps as four f32
// lanes by FMA with dmin·dx and Q5_K sums as integers into one f32 by FMA.
// The row is hsum_float_8 of the eight lanes minus the mins, reduced as
// (m0+m2)+(m1+m3) for Q4_K. llama.cpp adds the mins negated (dmin is -dx·dmin),
// which rounds to the same values.
func llamaDotK(typ quant.Type, w []byte, x *xrow) float32 {
	var acc [8]float32
	var mins [4]float32
	bsz := typ.BlockBytes()
	for b, xd := range x.d {
		blk, q, bs := w[bsz*b:bsz*b+bsz], x.q[256*b:256*b+256], x.bs[16*b:16*b+16]
		d, dmin := xd*half(blk), xd*half(blk[2:])
		var sc, mn [8]int32
		for s := range 8 {
			a, m := quant.ScaleMinK4(s, blk[4:16])
			sc[s], mn[s] = int32(a), int32(m)
		}
		var prod [4]int32
		for j := range 4 {
			for k := 2 * j; k < 2*j+2; k++ {
				prod[j] += mn[k] * (int32(bs[2*k]) + int32(bs[2*k+1]))
			}
		}
		if typ == quant.Q5_K {
			mins[0] = fma32(dmin, float32(prod[0]+prod[1]+prod[2]+prod[3]), mins[0])
		} else {
			for j := range 4 {
				mins[j] = fma32(dmin, float32(prod[j]), mins[j])
			}
		}
		var sumi [8]int32
		for s := range 8 {
			for e := range 32 {
				var v int32
				if typ == quant.Q4_K {
					v = int32(blk[16+32*(s/2)+e] >> (4 * uint(s&1)) & 15)
				} else {
					v = int32(blk[48+32*(s/2)+e]>>(4*uint(s&1))&15) | int32(blk[16+e]>>s&1)<<4
				}
				sumi[e/4] += sc[s] * v * int32(q[32*s+e])
			}
		}
		for m := range 8 {
			acc[m] = fma32(d, float32(sumi[m]), acc[m])
		}
	}
	var r [4]float32
	for k := range 4 {
		r[k] = acc[k+4] + acc[k]
	}
	return ((r[0] + r[2]) + (r[1] + r[3])) - ((mins[0] + mins[2]) + (mins[1] + mins[3]))
}

// TestKQuantOrderAssembly checks that the Q4_K and Q5_K assembly rows give
// exactly, bit for bit, llama.cpp's AVX2 results (llamaDotK): on a model whose
// layers amplify differences, one ulp here grows past the 2e-2 logit rule
// (an 8-bit activation or f16 cache value rounds the other way downstream).
func TestKQuantOrderAssembly(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this CPU")
	}
	rng := rand.New(rand.NewPCG(13, 13))
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q5_K} {
		for _, cols := range []int{256, 512, 2048} {
			const rows = 64
			w := randomWeights(t, rng, typ, rows, cols)
			in := randomInput(rng, cols)
			x := &xrow{f: in, q: make([]int8, cols), d: make([]float32, cols/256), bs: make([]int16, cols/16)}
			quantize256(in, x)
			got := make([]float32, rows)
			stride := len(w) / rows
			kernelFor[typ].rows(w, stride, x, got)
			for r := range rows {
				want := llamaDotK(typ, w[r*stride:(r+1)*stride], x)
				if got[r] != want {
					t.Errorf("%s cols=%d row %d: %g (%08x), llama.cpp's order %g (%08x)", typ, cols, r,
						got[r], math.Float32bits(got[r]), want, math.Float32bits(want))
				}
			}
		}
	}
}
