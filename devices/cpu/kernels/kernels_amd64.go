//go:build amd64 && !purego

package kernels

import "hybrid/models/quant"

// The assembly row kernels. Each computes y[r] for rows consecutive weight
// rows stride bytes apart, each of nb blocks, against one prepared input.

//go:noescape
func q4_0Rows(w *byte, stride, rows int, xq *int8, xd *float32, nb int, y *float32)

//go:noescape
func q8_0Rows(w *byte, stride, rows int, xq *int8, xd *float32, nb int, y *float32)

func init() {
	if !hasAVX2 {
		return
	}
	kernelFor[quant.Q4_0].rows = block32(q4_0Rows)
	kernelFor[quant.Q8_0].rows = block32(q8_0Rows)
	kernelFor[quant.Q4_K].rows = block256(q4_KRows)
	kernelFor[quant.Q6_K].rows = block256(q6_KRows)
}

// block32 adapts an assembly kernel for a 32-element block type.
func block32(f func(w *byte, stride, rows int, xq *int8, xd *float32, nb int, y *float32)) func([]byte, int, *xrow, []float32) {
	return func(w []byte, stride int, x *xrow, y []float32) {
		f(&w[0], stride, len(y), &x.q[0], &x.d[0], len(x.d), &y[0])
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
func q6_KRows(w *byte, stride, rows int, xq *int8, xd *float32, bs *int16, nb int, y *float32)
