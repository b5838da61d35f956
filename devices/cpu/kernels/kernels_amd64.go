//go:build amd64 && !purego

package kernels

import (
	"unsafe"

	"hybrid/models/quant"
)

// The assembly row kernels. Each computes y[r] for rows consecutive weight
// rows stride bytes apart, each of nb blocks, against one prepared input.

//go:noescape
func q4_0Rows(w *byte, stride, rows int, xq *int8, xd *float32, xs *float32, nb int, y *float32)

//go:noescape
func q8_0Rows(w *byte, stride, rows int, xq *int8, xd *float32, nb int, y *float32)

func init() {
	if !hasAVX2 {
		return
	}
	kernelFor[quant.Q4_0].rows = block32Offset(q4_0Rows)
	kernelFor[quant.Q8_0].rows = block32(q8_0Rows)
	kernelFor[quant.Q5_0].rows = block32(q5_0Rows)
	kernelFor[quant.Q4_1].rows = block32Offset(q4_1Rows)
	kernelFor[quant.Q5_1].rows = block32Offset(q5_1Rows)
	kernelFor[quant.Q4_K].rows = block256(q4_KRows)
	kernelFor[quant.Q5_K].rows = block256(q5_KRows)
	kernelFor[quant.Q6_K].rows = block256(q6_KRows)
	kernelFor[quant.F32].rows = floatRows(dotF32)
	kernelFor[quant.F16].rows = floatRows(dotF16)
	kernelFor[quant.BF16].rows = floatRows(dotBF16)
	dot, axpy = dotAVX2, axpyAVX2
}

// block32 adapts an assembly kernel for a 32-element block type.
func block32(f func(w *byte, stride, rows int, xq *int8, xd *float32, nb int, y *float32)) func([]byte, int, *xrow, []float32) {
	return func(w []byte, stride int, x *xrow, y []float32) {
		f(&w[0], stride, len(y), &x.q[0], &x.d[0], len(x.d), &y[0])
	}
}

//go:noescape
func q5_0Rows(w *byte, stride, rows int, xq *int8, xd *float32, nb int, y *float32)

//go:noescape
func q4_1Rows(w *byte, stride, rows int, xq *int8, xd *float32, xs *float32, nb int, y *float32)

//go:noescape
func q5_1Rows(w *byte, stride, rows int, xq *int8, xd *float32, xs *float32, nb int, y *float32)

// block32Offset adapts an assembly kernel for a 32-element block type with
// per-block offsets.
func block32Offset(f func(w *byte, stride, rows int, xq *int8, xd *float32, xs *float32, nb int, y *float32)) func([]byte, int, *xrow, []float32) {
	return func(w []byte, stride int, x *xrow, y []float32) {
		f(&w[0], stride, len(y), &x.q[0], &x.d[0], &x.s[0], len(x.d), &y[0])
	}
}

//go:noescape
func q4_KRows(w *byte, stride, rows int, xq *int8, xd *float32, bs *int16, nb int, y *float32)

// block256 adapts an assembly kernel for a K-quant type.
func block256(f func(w *byte, stride, rows int, xq *int8, xd *float32, bs *int16, nb int, y *float32)) func([]byte, int, *xrow, []float32) {
	return func(w []byte, stride int, x *xrow, y []float32) {
		f(&w[0], stride, len(y), &x.q[0], &x.d[0], &x.bs[0], len(x.d), &y[0])
	}
}

//go:noescape
func q5_KRows(w *byte, stride, rows int, xq *int8, xd *float32, bs *int16, nb int, y *float32)

//go:noescape
func q6_KRows(w *byte, stride, rows int, xq *int8, xd *float32, bs *int16, nb int, y *float32)

//go:noescape
func dotF32(w *byte, x *float32, n int) float32

//go:noescape
func dotF16(w *byte, x *float32, n int) float32

//go:noescape
func dotBF16(w *byte, x *float32, n int) float32

//go:noescape
func axpyF32(a float32, x, y *float32, n int)

// floatRows adapts an assembly float dot to a row kernel.
func floatRows(f func(w *byte, x *float32, n int) float32) func([]byte, int, *xrow, []float32) {
	return func(w []byte, stride int, x *xrow, y []float32) {
		for r := range y {
			y[r] = f(&w[r*stride], &x.f[0], len(x.f))
		}
	}
}

func dotAVX2(a, b []float32) float32 {
	if len(a) == 0 {
		return 0
	}
	_ = b[len(a)-1]
	return dotF32((*byte)(unsafe.Pointer(&b[0])), &a[0], len(a))
}

func axpyAVX2(a float32, x, y []float32) {
	if len(x) == 0 {
		return
	}
	_ = y[len(x)-1]
	axpyF32(a, &x[0], &y[0], len(x))
}

//go:noescape
func madF16AVX2(y, x *uint16, v float32, n int)

//go:noescape
func scaleF16AVX2(y *uint16, v float32, n int)

func init() {
	if !hasAVX2 {
		return
	}
	dotF16v = func(k []uint16, x []float32) float32 {
		if len(k) == 0 {
			return 0
		}
		_ = x[len(k)-1]
		return dotF16((*byte)(unsafe.Pointer(&k[0])), &x[0], len(k))
	}
	madF16 = func(y, x []uint16, v float32) {
		n := len(y) &^ 7
		if n > 0 {
			_ = x[len(y)-1]
			madF16AVX2(&y[0], &x[0], v, n)
		}
		madF16Go(y[n:], x[n:len(y)], v)
	}
	scaleF16 = func(y []uint16, v float32) {
		n := len(y) &^ 7
		if n > 0 {
			scaleF16AVX2(&y[0], v, n)
		}
		scaleF16Go(y[n:], v)
	}
}
