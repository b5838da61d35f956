package kernels

import (
	"encoding/binary"
	"math"
)

// BF16 weights on a CPU with AVX512-BF16: llama.cpp multiplies them with
// VDPBF16PS, which adds each pair of products into an f32 lane one after the
// other (odd element first), each product exact and each sum rounded; vec_dot
// keeps two 16-lane accumulators over 64 elements per step and tinyBLAS one
// over 32. These Go loops reproduce that order; they are used where the CPU
// has AVX512-BF16, so that results agree with a native llama.cpp there.

func bf16At(w []byte, i int) float32 {
	return f32frombits(uint32(binary.LittleEndian.Uint16(w[2*i:])) << 16)
}

// dp adds a[i+1]·x[i+1] then a[i]·x[i] into acc, as one VDPBF16PS lane.
func dp(acc float32, w []byte, x []float32, i int) float32 {
	acc += bf16At(w, i+1) * x[i+1]
	acc += bf16At(w, i) * x[i]
	return acc
}

func dotBF16VecDP(w []byte, xr *xrow) float32 {
	x := xr.f
	var c1, c2 [16]float32
	i := 0
	for ; i+64 <= len(x); i += 64 {
		for j := range 16 {
			c1[j] = dp(c1[j], w, x, i+2*j)
			c2[j] = dp(c2[j], w, x, i+32+2*j)
		}
	}
	sum := float64(reduce16(&c1))
	sum += float64(reduce16(&c2))
	for ; i < len(x); i++ {
		sum += float64(bf16At(w, i) * x[i])
	}
	return float32(sum)
}

func dotBF16TinyDP(w []byte, xr *xrow) float32 {
	x := xr.f
	if len(x)%32 != 0 {
		return dotBF16VecDP(w, xr)
	}
	var acc [16]float32
	for i := 0; i < len(x); i += 32 {
		for j := range 16 {
			acc[j] = dp(acc[j], w, x, i+2*j)
		}
	}
	return reduce16(&acc)
}

func f32frombits(u uint32) float32 { return math.Float32frombits(u) }
