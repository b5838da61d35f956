//go:build amd64 && !purego

package kernels

// gemmTileVNNI is gemmTileGo in AVX512-VNNI (gemm_amd64.s).
//
//go:noescape
func gemmTileVNNI(pq *byte, psc *float32, nb int, aq *byte, ad *float32, aoff *int32, out *float32)

func gemmTileAsm(p *panel, a *inTile, nb int, out *[tileIn * panelRows]float32) {
	_, _ = p.q[nb*512-1], p.sc[nb*panelRows-1]
	_, _, _ = a.q[nb*256-1], a.d[nb*tileIn-1], a.off[nb*tileIn-1]
	gemmTileVNNI(&p.q[0], &p.sc[0], nb, &a.q[0], &a.d[0], &a.off[0], &out[0])
}

func init() {
	if !hasAVX512VNNI {
		return
	}
	gemmTile = gemmTileAsm
	gemmLanes = gemmLanesAsm
	for t, g := range gemmFor {
		kernelFor[t].gemm = g
	}
}

//go:noescape
func gemmQ8_0Lanes2(pq *byte, psc *float32, nb int, aq *byte, ad *float32, corr *int32, out *float32)

// gemmLanesAsm runs gemmQ8_0Lanes2 over the tile's four pairs of inputs.
func gemmLanesAsm(p *panel, a *inTile, nsb int, out *[tileIn * panelRows]float32) {
	_, _ = p.q[nsb*512-1], p.sc[nsb*panelRows-1]
	_, _, _ = a.q[nsb*256-1], a.d[nsb*tileIn-1], a.corr[nsb*8*tileIn-1]
	for t := 0; t < tileIn; t += 2 {
		gemmQ8_0Lanes2(&p.q[0], &p.sc[0], nsb, &a.q[4*t], &a.d[t], &a.corr[t], &out[t*panelRows])
	}
}
