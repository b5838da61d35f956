//go:build amd64 && !purego

package kernels

//go:noescape
func gemvQ4_0Packed(w *byte, nb int, xq *int8, xoff *int32, xd *float32, y *float32)

//go:noescape
func unpackQ4_0Packed(w *byte, nb int, q *byte, sc *float32)

// packedKernels: the packed layout's kernels need AVX512-VNNI.
var packedKernels = hasAVX512VNNI

func gemvPacked(w []byte, nb int, x *xrow, off []int32, y []float32) {
	_, _, _ = w[nb*packedBlock-1], x.q[nb*32-1], x.d[nb-1]
	_, _ = off[nb-1], y[panelRows-1]
	gemvQ4_0Packed(&w[0], nb, &x.q[0], &off[0], &x.d[0], &y[0])
}

func unpackPacked(w []byte, nb int, p *panel) {
	_, _, _ = w[nb*packedBlock-1], p.q[nb*512-1], p.sc[nb*panelRows-1]
	unpackQ4_0Packed(&w[0], nb, &p.q[0], &p.sc[0])
}

//go:noescape
func packQ4_0Asm(w *byte, stride, nb int, dst *byte)

// packQ4_0 repacks one panel, by gathers where the row offsets fit them.
func packQ4_0(w []byte, stride, nb int, dst []byte) {
	if !gatherable(w, stride, panelRows) {
		packQ4_0Go(w, stride, nb, dst)
		return
	}
	_ = dst[nb*packedBlock-1]
	packQ4_0Asm(&w[0], stride, nb, &dst[0])
}

//go:noescape
func gemvQ4_KPacked(w *byte, nb int, xq *int8, bsum *int32, xd *float32, y *float32)

//go:noescape
func gemvQ4_KPackedPairs(w *byte, nb int, xq *int8, bsum *int32, xd *float32, y *float32)

func gemvPackedK(w []byte, nb int, x *xrow, bsum []int32, y []float32, pairs bool) {
	_, _, _ = w[nb*packedBlockK-1], x.q[nb*256-1], x.d[nb-1]
	_, _ = bsum[nb*8-1], y[panelRows-1]
	if pairs {
		gemvQ4_KPackedPairs(&w[0], nb, &x.q[0], &bsum[0], &x.d[0], &y[0])
		return
	}
	gemvQ4_KPacked(&w[0], nb, &x.q[0], &bsum[0], &x.d[0], &y[0])
}

//go:noescape
func packQ4_KAsm(w *byte, stride, nb int, dst *byte)

// packQ4_K repacks one Q4_K panel: d, dmin and nibbles by gathers where the
// row offsets fit them, the 6-bit scales and mins in Go.
func packQ4_K(w []byte, stride, nb int, dst []byte) {
	if !gatherable(w, stride, panelRows) {
		packQ4_KGo(w, stride, nb, dst)
		return
	}
	_ = dst[nb*packedBlockK-1]
	packQ4_KAsm(&w[0], stride, nb, &dst[0])
	packScalesQ4_K(w, stride, nb, dst)
}

//go:noescape
func gemmQ4_KPacked4(w *byte, nb int, aq *byte, bsum *int32, xd *float32, y *float32)

// gemmPackedK4 multiplies a packed Q4_K panel by the 4 inputs of tile a.
func gemmPackedK4(w []byte, nb int, a *kTile, y *[4 * panelRows]float32) {
	_, _, _, _ = w[nb*packedBlockK-1], a.q[nb*1024-1], a.bsum[nb*32-1], a.d[nb*4-1]
	gemmQ4_KPacked4(&w[0], nb, &a.q[0], &a.bsum[0], &a.d[0], &y[0])
}

//go:noescape
func gemvQ4_0Packed4(w *byte, gap, nb, quads int, xq *int8, xoff *int32, xd *float32, y *float32, ygap int)

//go:noescape
func gemvQ4_0Packed4NP(w *byte, gap, nb, quads int, xq *int8, xoff *int32, xd *float32, y *float32, ygap int)

// gemvPackedStreams is gemvPacked over the np Q4_0 panels at w for one
// input, y their np·16 outputs: the panels in four quarters, panel i of each
// quarter with the others (gemvQ4_0Packed4), so that the thread reads four
// places at once, then the panels left over one by one. Each panel's
// outputs are gemvPacked's to the bit.
func gemvPackedStreams(w []byte, np, nb int, x *xrow, off []int32, y []float32) {
	pb := nb * packedBlock
	q := np / 4
	if q > 0 {
		_, _, _ = w[np*pb-1], x.q[nb*32-1], x.d[nb-1]
		_, _ = off[nb-1], y[np*panelRows-1]
		f := gemvQ4_0Packed4NP
		if streamPrefetch {
			f = gemvQ4_0Packed4
		}
		f(&w[0], q*pb, nb, q, &x.q[0], &off[0], &x.d[0], &y[0], q*panelRows*4)
	}
	for p := 4 * q; p < np; p++ {
		gemvPacked(w[p*pb:], nb, x, off, y[p*panelRows:])
	}
}
