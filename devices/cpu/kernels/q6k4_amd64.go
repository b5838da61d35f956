//go:build amd64 && !purego

package kernels

import "hybrid/quant"

//go:noescape
func q6_KRows4(w *byte, stride, rows int, tile *byte, nb int, y *float32, ystride int)

func init() {
	// The kernel uses AVX512-BW/VL registers; every CPU with AVX512-VNNI
	// has them.
	if hasAVX512VNNI {
		kernelFor[quant.Q6_K].rows4 = q6Rows4
	}
}

func q6Rows4(w []byte, stride, rows int, tile []byte, nb int, y []float32, ystride int) {
	_, _ = w[(rows-1)*stride+nb*210-1], tile[nb*q6TileBlock-1]
	_ = y[3*ystride+rows-1]
	q6_KRows4(&w[0], stride, rows, &tile[0], nb, &y[0], ystride)
}
