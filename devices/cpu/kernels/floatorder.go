package kernels

import (
	"encoding/binary"
	"math"
)

// Float weight rows (F32, F16) are multiplied in the order of additions that
// llama.cpp's native AVX-512 build uses, so that results agree with it to the
// bit rather than within rounding: a last-bit difference can flip a later
// rounding (of an activation to f16, of a key to the f16 cache) and so
// change a small model's logits by far more than an ulp.
//
//   - A batch of two or more inputs with rows a multiple of 16 long goes
//     through llamafile's tinyBLAS: per output, 16 lanes each accumulate
//     every 16th product with FMA, then the lanes are summed as
//     _mm512_reduce_add_ps does (halves, then quarters, then pairs).
//   - A single input, or rows of another length, goes through ggml_vec_dot:
//     four 16-lane accumulators take 64 products per step; they are summed
//     (0+2, 1+3, then 0+1) and reduced as above; the leftover products are
//     added one by one (in float64 for F16 weights, with FMA in float32 for
//     F32).
//
// The Go functions below are the definition; the assembly ones must equal
// them bit for bit (TestFloatOrderAssembly).

// fma32 is a float32 fused multiply-add. The float64 FMA is exact for the
// product of two float32 and rounds the sum once; rounding that to float32
// differs from a true single-precision FMA only in double-rounding cases,
// which need the float64 result to sit exactly on a float32 tie.
func fma32(a, b, c float32) float32 {
	return float32(math.FMA(float64(a), float64(b), float64(c)))
}

// reduce16 sums 16 lanes as _mm512_reduce_add_ps compiles (GCC): the upper
// eight plus the lower eight, then the upper four plus the lower four, then
// lanes (0+2)+(1+3).
func reduce16(l *[16]float32) float32 {
	var t [8]float32
	for i := range t {
		t[i] = l[8+i] + l[i]
	}
	var u [4]float32
	for i := range u {
		u[i] = t[4+i] + t[i]
	}
	return (u[0] + u[2]) + (u[1] + u[3])
}

// weightAt returns element i of a float weight row.
type weightAt func(w []byte, i int) float32

func f32At(w []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:]))
}

func f16At(w []byte, i int) float32 { return f16[binary.LittleEndian.Uint16(w[2*i:])] }

// dotTinyGo is tinyBLAS's order; n must be a multiple of 16.
func dotTinyGo(at weightAt, w []byte, x []float32) float32 {
	var acc [16]float32
	for i := 0; i < len(x); i += 16 {
		for l := range acc {
			acc[l] = fma32(at(w, i+l), x[i+l], acc[l])
		}
	}
	return reduce16(&acc)
}

// dotVecHeadGo is ggml_vec_dot's vector part over the first n&^63 elements.
func dotVecHeadGo(at weightAt, w []byte, x []float32) float32 {
	np := len(x) &^ 63
	var acc [4][16]float32
	for i := 0; i < np; i += 64 {
		for j := range acc {
			for l := range acc[j] {
				k := i + 16*j + l
				acc[j][l] = fma32(at(w, k), x[k], acc[j][l])
			}
		}
	}
	for l := range 16 {
		acc[0][l] += acc[2][l]
		acc[1][l] += acc[3][l]
	}
	for l := range 16 {
		acc[0][l] += acc[1][l]
	}
	return reduce16(&acc[0])
}

// vecTailF32 adds the leftovers of ggml_vec_dot_f32.
func vecTailF32(s float32, w []byte, x []float32, from int) float32 {
	for i := from; i < len(x); i++ {
		s = fma32(f32At(w, i), x[i], s)
	}
	return s
}

// vecTailF16 adds the leftovers of ggml_vec_dot_f16, in float64.
func vecTailF16(s float32, w []byte, x []float32, from int) float32 {
	sum := float64(s)
	for i := from; i < len(x); i++ {
		sum += float64(f16At(w, i) * x[i])
	}
	return float32(sum)
}

func dotVecF32Go(w []byte, x *xrow) float32 {
	return vecTailF32(dotVecHeadGo(f32At, w, x.f), w, x.f, len(x.f)&^63)
}

func dotVecF16Go(w []byte, x *xrow) float32 {
	return vecTailF16(dotVecHeadGo(f16At, w, x.f), w, x.f, len(x.f)&^63)
}

func dotTinyF32Go(w []byte, x *xrow) float32 {
	if len(x.f)%16 != 0 {
		return dotVecF32Go(w, x)
	}
	return dotTinyGo(f32At, w, x.f)
}

func dotTinyF16Go(w []byte, x *xrow) float32 {
	if len(x.f)%16 != 0 {
		return dotVecF16Go(w, x)
	}
	return dotTinyGo(f16At, w, x.f)
}
