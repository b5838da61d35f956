package kernels

// SiluMul sets out[i] = g[i]/(1+e(-g[i]))·u[i] for the leading elements of
// g that fill whole vectors of ggml's native build, 16 lanes where
// HasAVX512, else 8, e being that build's ggml_v_expf; that is
// ggml_vec_swiglu_f32's vector loop. It returns how many elements it did:
// len(g) rounded down to the lanes, or 0 where there is no assembly for it
// (purego, or a CPU without AVX2), leaving the caller to do the rest in Go.
// u and out must be at least as long as the part done.
//
// The assembly (silu_amd64.s) does ggml's instruction sequence, so its
// results are those of the per-lane Go emulations (VExpF512,
// VExpF256, attn.go) to the bit (TestSiluMul512BitIdentical,
// TestSiluMul256BitIdentical).
func SiluMul(g, u, out []float32) int {
	f, lanes := siluMul256Impl, 8
	if HasAVX512() {
		f, lanes = siluMul512Impl, 16
	}
	n := len(g) &^ (lanes - 1)
	if f == nil || n == 0 {
		return 0
	}
	f(g[:n], u[:n], out[:n])
	return n
}

// siluMul512Impl and siluMul256Impl do SiluMul on len(g) elements, a
// multiple of 16 or 8, with the AVX-512 or AVX2 build's expf; nil where the
// CPU lacks what they need.
var siluMul512Impl, siluMul256Impl func(g, u, out []float32)
