package kernels

import "hybrid/quant"

// iqpMinBatch is the smallest batch llama.cpp multiplies IQ4_XS weights in
// its "IQ panel" order (ggml-cpu/iqp.cpp, GGML_IQP_MIN_BATCH), on CPUs with
// AVX2 and for matrices whose rows come in groups of eight; smaller
// batches, and decode, use vec_dot's order (dotIQ4_XSGo).
const iqpMinBatch = 8

// iqpApplies reports whether llama.cpp takes the panel path for a batch of
// n inputs against rows weight rows.
func iqpApplies(n, rows int) bool { return n >= iqpMinBatch && rows%8 == 0 }

// dotIQ4_XSPanelGo is one weight row's dot product with x in the panel
// order: each super-block's products are summed exactly in integers, each
// 32-element group weighted by its signed 6-bit scale, and the super-block
// sums are accumulated in one f32 by a fused multiply-add with the f32
// product of the weight's and the activation's scales.
func dotIQ4_XSPanelGo(w []byte, x *xrow) float32 {
	var acc float32
	for b, xd := range x.d {
		blk, q := w[136*b:136*b+136], x.q[256*b:256*b+256]
		var isum int32
		for j := range 8 {
			ls := int32(quant.ScaleIQ4XS(j, blk))
			lo, hi := iq4Nibbles(blk[8+16*j:24+16*j], q[32*j:32*j+32], 0, 16)
			isum += ls * (lo + hi)
		}
		acc = fma32(float32(isum), half(blk)*xd, acc)
	}
	return acc
}
