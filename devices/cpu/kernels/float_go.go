package kernels

import (
	"encoding/binary"

	"hybrid/quant"
)

// The portable BF16 dot product (F32 and F16 follow llama.cpp's order, in
// floatorder.go). It sums in two lanes to shorten the add chain.

// f16 is the f16-to-f32 table, shared with package quant.
var f16 = quant.F16Table()

func dotBF16Go(w []byte, x *xrow) float32 {
	f := x.f
	var s0, s1 float32
	i := 0
	for ; i+2 <= len(f); i += 2 {
		b := w[2*i : 2*i+4]
		s0 += quant.BF16ToF32(binary.LittleEndian.Uint16(b)) * f[i]
		s1 += quant.BF16ToF32(binary.LittleEndian.Uint16(b[2:])) * f[i+1]
	}
	for ; i < len(f); i++ {
		s0 += quant.BF16ToF32(binary.LittleEndian.Uint16(w[2*i:])) * f[i]
	}
	return s0 + s1
}

// dotGo and axpyGo are the portable Dot and Axpy.
func dotGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func axpyGo(a float32, x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += a * v
	}
}
