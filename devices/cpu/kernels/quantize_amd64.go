//go:build amd64 && !purego

package kernels

// The assembly activation quantizers (quantize_amd64.s): quantize32Go and
// quantize256Go op for op on 16 lanes (AVX-512 F; hasAVX512 also has DQ),
// and quantize32Go on 8 (AVX2), so to the bit.

//go:noescape
func quantize32AVX512(x *float32, q *int8, d, s *float32, nb int, q81 bool)

//go:noescape
func quantize32AVX2(x *float32, q *int8, d, s *float32, nb int, q81 bool)

//go:noescape
func quantize256AVX512(x *float32, q *int8, d *float32, bs *int16, nb int)

func init() {
	if hasAVX2 {
		quantize32AVX2Impl = block32Quantizer(quantize32AVX2)
		quantize32Impl = quantize32AVX2Impl
	}
	if hasAVX512 {
		quantize32Impl = block32Quantizer(quantize32AVX512)
		quantize256Impl = quantize256Asm
	}
}

// block32Quantizer adapts an assembly quantize32.
func block32Quantizer(f func(x *float32, q *int8, d, s *float32, nb int, q81 bool)) func([]float32, *xrow, bool) {
	return func(x []float32, r *xrow, q81 bool) {
		nb := len(x) / 32
		if nb == 0 {
			return
		}
		_, _, _ = r.q[32*nb-1], r.d[nb-1], r.s[nb-1]
		f(&x[0], &r.q[0], &r.d[0], &r.s[0], nb, q81)
	}
}

func quantize256Asm(x []float32, r *xrow) {
	nb := len(x) / 256
	if nb == 0 {
		return
	}
	_, _, _ = r.q[256*nb-1], r.d[nb-1], r.bs[16*nb-1]
	quantize256AVX512(&x[0], &r.q[0], &r.d[0], &r.bs[0], nb)
}
