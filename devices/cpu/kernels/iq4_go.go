package kernels

import "hybrid/quant"

// Dot products of the 4-bit non-linear types, each nibble a level of
// quant.IQ4Levels, in the order of float additions llama.cpp uses for them
// on an AVX-512 x86 CPU (llamaorder_test.go checks them against its mat-mul
// outputs to the bit):
//
//   - IQ4_NL, with activations quantized by quantize32 (ggml's Q8_0):
//     llama.cpp repacks the weights of a matrix whose row count is a
//     multiple of 8 (IQ4_NL_8x8, on every AVX2 CPU) and multiplies them per
//     row with one integer sum per block of 32, FMA'd into a running float by
//     the product of the two f16 scales; its GEMV and GEMM
//     (gemv/gemm_q4_b32_8x8_q8_0_lut_avx) do the same per (row, input), so a
//     batch takes the row kernel too. A matrix of another row count is not
//     repacked: llama.cpp then sums a decode step in
//     ggml_vec_dot_iq4_nl_q8_0's eight lanes of two accumulators and a batch
//     in llamafile's tinyBLAS, which this kernel does not follow (it agrees
//     with them within rounding).
//   - IQ4_XS, with activations quantized by quantize256 (Q8_K): never
//     repacked on x86; ggml_vec_dot_iq4_xs_q8_K keeps eight int32 lanes per
//     super-block (lane m holds elements 4m..4m+3 of every sub-block of 32,
//     times their scales), FMAs them into eight float lanes by d times the
//     activation's scale, and adds the lanes at the end as hsum8 does.
//
// In Go they are bound by the per-element table lookups (about 0.5 GB/s of
// weights on one Zen 5 thread); lowbit_amd64.s has AVX2 row kernels that
// give these functions' results to the bit, installed where the CPU has the
// features (TestLowBitKernelBitIdentical).

// iq4Nibbles returns the dot of 16 bytes of nibbles (elements j and j+16 in
// byte j) with activations q[0:32], over elements [lo, hi) of each half.
func iq4Nibbles(qs []byte, q []int8, lo, hi int) (low, high int32) {
	for j := lo; j < hi; j++ {
		low += int32(quant.IQ4Levels[qs[j]&15]) * int32(q[j])
		high += int32(quant.IQ4Levels[qs[j]>>4]) * int32(q[j+16])
	}
	return low, high
}

// IQ4_NL: {f16 d; u8 qs[16]}, element j is d*IQ4Levels[nibble j], nibbles
// laid out as Q4_0's.
func dotIQ4_NLGo(w []byte, x *xrow) float32 {
	var sum float32
	for b, xd := range x.d {
		blk, q := w[18*b:18*b+18], x.q[32*b:32*b+32]
		lo, hi := iq4Nibbles(blk[2:18], q, 0, 16)
		sum = fma32(float32(lo+hi), half(blk)*xd, sum)
	}
	return sum
}

// IQ4_XS: {f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}, sub-block j of
// 32 laid out as an IQ4_NL block with the scale quant.ScaleIQ4XS(j).
func dotIQ4_XSGo(w []byte, x *xrow) float32 {
	var acc [8]float32
	for b, xd := range x.d {
		blk, q := w[136*b:136*b+136], x.q[256*b:256*b+256]
		var lanes [8]int32
		for j := range 8 {
			ls := int32(quant.ScaleIQ4XS(j, blk))
			qs, qa := blk[8+16*j:24+16*j], q[32*j:32*j+32]
			for m := range 4 {
				lo, hi := iq4Nibbles(qs, qa, 4*m, 4*m+4)
				lanes[m] += ls * lo
				lanes[m+4] += ls * hi
			}
		}
		d := half(blk) * xd
		for m := range acc {
			acc[m] = fma32(d, float32(lanes[m]), acc[m])
		}
	}
	return hsum8(&acc)
}
