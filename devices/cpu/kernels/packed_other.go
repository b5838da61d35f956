//go:build !amd64 || purego

package kernels

// packedKernels: without the assembly kernels nothing is packed.
const packedKernels = false

func gemvPacked(w []byte, nb int, x *xrow, off []int32, y []float32) {
	gemvPackedGo(w, nb, x, off, y)
}

func unpackPacked(w []byte, nb int, p *panel) {
	panic("kernels: no packed weights without the assembly kernels")
}

func packQ4_0(w []byte, stride, nb int, dst []byte) { packQ4_0Go(w, stride, nb, dst) }

func gemvPackedK(w []byte, nb int, x *xrow, bsum []int32, y []float32, pairs bool) {
	gemvPackedKGo(w, nb, x, bsum, y, pairs)
}

func packQ4_K(w []byte, stride, nb int, dst []byte) { packQ4_KGo(w, stride, nb, dst) }

func gemmPackedK4(w []byte, nb int, a *kTile, y *[4 * panelRows]float32) {
	panic("kernels: no packed weights without the assembly kernels")
}

func gemvPackedStreams(w []byte, np, nb int, x *xrow, off []int32, y []float32) {
	pb := nb * packedBlock
	for p := range np {
		gemvPacked(w[p*pb:], nb, x, off, y[p*panelRows:])
	}
}
