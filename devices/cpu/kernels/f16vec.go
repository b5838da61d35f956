package kernels

import (
	"math"
	"unsafe"

	"hybrid/quant"
)

// The f16 vector primitives of attention over an f16 KV cache, with
// llama.cpp's rounding: every result is rounded to nearest-even binary16, as
// its flash-attention kernel rounds its f16 accumulator after each step.

// ToF16 converts src to binary16 in dst[:len(src)], rounding to nearest
// even (a NaN stays a NaN, its payload not kept).
func ToF16(dst []uint16, src []float32) { toF16(dst[:len(src)], src) }

func toF16Go(dst []uint16, src []float32) {
	_ = dst[:len(src)]
	for i, v := range src {
		dst[i] = quant.F32ToF16(v)
	}
}

// DotF16 returns the dot product of the f16 vector k and the f32 vector
// x[:len(k)], summed in ggml_vec_dot_f16's order.
func DotF16(k []uint16, x []float32) float32 { return dotF16v(k, x) }

// MadF16 sets y[i] = f16(y[i] + x[i]·v) for i < len(y), the multiply-add
// fused.
func MadF16(y, x []uint16, v float32) { madF16(y, x, v) }

// ScaleF16 sets y[i] = f16(y[i]·v).
func ScaleF16(y []uint16, v float32) { scaleF16(y, v) }

var (
	toF16    = toF16Go
	dotF16v  = dotF16vGo
	madF16   = madF16Go
	scaleF16 = scaleF16Go
)

// dotF16vGo is ggml_vec_dot_f16's order (floatorder.go), which llama.cpp's
// flash attention uses for q·k.
func dotF16vGo(k []uint16, x []float32) float32 {
	if len(k) == 0 {
		return 0
	}
	w := unsafe.Slice((*byte)(unsafe.Pointer(&k[0])), 2*len(k))
	x = x[:len(k)]
	return vecTailF16(dotVecHeadGo(f16At, w, x), w, x, len(x)&^63)
}

func madF16Go(y, x []uint16, v float32) {
	t := quant.F16Table()
	x = x[:len(y)]
	for i := range y {
		// The product of a binary16 and a float32 is exact in float64, and
		// so is the sum unless the exponents are far apart.
		y[i] = quant.F32ToF16(float32(math.FMA(float64(t[x[i]]), float64(v), float64(t[y[i]]))))
	}
}

func scaleF16Go(y []uint16, v float32) {
	t := quant.F16Table()
	for i := range y {
		y[i] = quant.F32ToF16(t[y[i]] * v)
	}
}
