package kernels

import (
	"encoding/binary"
	"math"

	"hybrid/models/quant"
)

// Portable dot products of float weight rows with f32 activations. They sum in
// four lanes, as the vector code does, which also shortens the add chain.

func dotF32Go(w []byte, x *xrow) float32 {
	f := x.f
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(f); i += 4 {
		b := w[4*i : 4*i+16]
		s0 += math.Float32frombits(binary.LittleEndian.Uint32(b)) * f[i]
		s1 += math.Float32frombits(binary.LittleEndian.Uint32(b[4:])) * f[i+1]
		s2 += math.Float32frombits(binary.LittleEndian.Uint32(b[8:])) * f[i+2]
		s3 += math.Float32frombits(binary.LittleEndian.Uint32(b[12:])) * f[i+3]
	}
	for ; i < len(f); i++ {
		s0 += math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:])) * f[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// f16 is the f16-to-f32 table, shared with package quant.
var f16 = quant.F16Table()

func dotF16Go(w []byte, x *xrow) float32 {
	f := x.f
	var s0, s1 float32
	i := 0
	for ; i+2 <= len(f); i += 2 {
		b := w[2*i : 2*i+4]
		s0 += f16[binary.LittleEndian.Uint16(b)] * f[i]
		s1 += f16[binary.LittleEndian.Uint16(b[2:])] * f[i+1]
	}
	for ; i < len(f); i++ {
		s0 += f16[binary.LittleEndian.Uint16(w[2*i:])] * f[i]
	}
	return s0 + s1
}

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
