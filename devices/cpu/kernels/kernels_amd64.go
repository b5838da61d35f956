//go:build amd64 && !purego

package kernels

import (
	"unsafe"

	"hybrid/quant"
)

// The assembly row kernels. Each computes y[r] for rows consecutive weight
// rows stride bytes apart, each of nb blocks, against one prepared input.

//go:noescape
func q4_0Rows(w *byte, stride, rows int, xq *int8, xd *float32, xs *float32, nb int, y *float32)

//go:noescape
func q8_0Rows(w *byte, stride, rows int, xq *int8, xd *float32, nb int, y *float32)

//go:noescape
func q8_0Rows4(w *byte, stride, gap, quads int, xq *int8, xd *float32, nb int, y *float32, ygap int)

//go:noescape
func q8_0Rows4NP(w *byte, stride, gap, quads int, xq *int8, xd *float32, nb int, y *float32, ygap int)

// q8_0Streams is q8_0Rows reading four places of w at once: the rows in
// four quarters, row i of each quarter with the others (q8_0Rows4), and the
// rows left over one by one. Each row's sum is q8_0Rows's to the bit.
func q8_0Streams(w []byte, stride int, x *xrow, y []float32) {
	q := len(y) / 4
	if q > 0 {
		f := q8_0Rows4NP
		if streamPrefetch {
			f = q8_0Rows4
		}
		f(&w[0], stride, q*stride, q, &x.q[0], &x.d[0], len(x.d), &y[0], 4*q)
	}
	if r := 4 * q; r < len(y) {
		q8_0Rows(&w[r*stride], stride, len(y)-r, &x.q[0], &x.d[0], len(x.d), &y[r])
	}
}

func init() {
	if !hasAVX2 {
		return
	}
	kernelFor[quant.Q4_0].rows = block32Offset(q4_0Rows)
	if hasAVX512VNNI {
		kernelFor[quant.Q4_0].rows = block32Offset(q4_0RowsVNNI)
	}
	kernelFor[quant.Q8_0].rows = q8_0Streams
	kernelFor[quant.Q5_0].rows = block32(q5_0Rows)
	kernelFor[quant.Q4_1].rows = block32Offset(q4_1Rows)
	kernelFor[quant.Q5_1].rows = block32Offset(q5_1Rows)
	kernelFor[quant.Q4_K].rows = block256(q4_KRows)
	if hasAVX512VNNI {
		kernelFor[quant.Q4_K].rows = block256(q4_KRowsVNNI)
	}
	kernelFor[quant.Q5_K].rows = block256(q5_KRows)
	kernelFor[quant.Q6_K].rows = block256(q6_KRows)
	kernelFor[quant.F32].rows = orderedRows(vecF32)
	kernelFor[quant.F32].rowsN = orderedRows(tinyF32)
	kernelFor[quant.F16].rows = orderedRows(vecF16)
	kernelFor[quant.F16].rowsN = orderedRows(tinyF16)
	kernelFor[quant.BF16].rows = floatRows(dotBF16)
	if hasAVX512BF16 {
		kernelFor[quant.BF16].rows = rowLoop(dotBF16VecDP)
		kernelFor[quant.BF16].rowsN = rowLoop(dotBF16TinyDP)
	}
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

//go:noescape
func toF16AVX2(dst *uint16, src *float32, n int)

func init() {
	if !hasAVX2 {
		return
	}
	toF16 = func(dst []uint16, src []float32) {
		n := len(src) &^ 7
		if n > 0 {
			toF16AVX2(&dst[0], &src[0], n)
		}
		toF16Go(dst[n:], src[n:])
	}
	dotF16v = func(k []uint16, x []float32) float32 {
		if len(k) == 0 {
			return 0
		}
		return vecF16(unsafe.Slice((*byte)(unsafe.Pointer(&k[0])), 2*len(k)), x[:len(k)])
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

//go:noescape
func dotTinyF32(w *byte, x *float32, n int) float32

//go:noescape
func dotTinyF16(w *byte, x *float32, n int) float32

//go:noescape
func dotVecF32(w *byte, x *float32, n int) float32

//go:noescape
func dotVecF16(w *byte, x *float32, n int) float32

// The llama.cpp-ordered float dots of floatorder.go: assembly for the vector
// part, Go for the leftovers and for rows that are not a multiple of 16.

func vecF32(w []byte, x []float32) float32 {
	np := len(x) &^ 63
	var s float32
	if np > 0 {
		s = dotVecF32(&w[0], &x[0], np)
	}
	return vecTailF32(s, w, x, np)
}

func vecF16(w []byte, x []float32) float32 {
	np := len(x) &^ 63
	var s float32
	if np > 0 {
		s = dotVecF16(&w[0], &x[0], np)
	}
	return vecTailF16(s, w, x, np)
}

func tinyF32(w []byte, x []float32) float32 {
	if len(x)%16 != 0 {
		return vecF32(w, x)
	}
	return dotTinyF32(&w[0], &x[0], len(x))
}

func tinyF16(w []byte, x []float32) float32 {
	if len(x)%16 != 0 {
		return vecF16(w, x)
	}
	return dotTinyF16(&w[0], &x[0], len(x))
}

// orderedRows adapts one of them to a row kernel.
func orderedRows(f func(w []byte, x []float32) float32) func([]byte, int, *xrow, []float32) {
	return func(w []byte, stride int, x *xrow, y []float32) {
		for r := range y {
			y[r] = f(w[r*stride:(r+1)*stride], x.f)
		}
	}
}
