//go:build amd64 && !purego

package kernels

// gemmTileAMX is gemmAMXGo in AMX and AVX-512 (amx_amd64.s).
//
//go:noescape
func gemmTileAMX(pq *byte, psc *float32, nb int, aq *byte, ad *float32, aoff *int32, tiles int, out *float32, cbuf *int32, cfg *byte)

// gemmTileAMXK is gemmAMXKGo in AMX and AVX-512 (amx_amd64.s).
//
//go:noescape
func gemmTileAMXK(pq *byte, pk *float32, pairs int, aq *byte, axd *float32, abs *float32, tiles int, out *float32, cbuf *int32, cfg *byte)

// gemmTileAMX6 is gemmAMX6Go in AMX and AVX-512 (amx_amd64.s).
//
//go:noescape
func gemmTileAMX6(pq *byte, pki *int32, pd *float32, nsb int, aq *byte, axd *float32, tiles int, out *float32, cbuf *int32, cfg *byte)

// amxConfig is the tile configuration gemmTileAMX loads (palette 1): C
// tiles tmm0, tmm1 of 16 rows × 64 bytes, A tiles tmm2, tmm3 of 16 × 32, B
// tiles tmm4, tmm5 of 8 × 64.
var amxConfig = func() (c [64]byte) {
	c[0] = 1
	shape := [6][2]int{{16, 64}, {16, 64}, {16, 32}, {16, 32}, {8, 64}, {8, 64}} // rows, bytes a row
	for i, s := range shape {
		c[16+2*i] = byte(s[1])
		c[48+i] = byte(s[0])
	}
	return c
}()

// amxConfig6 is gemmTileAMX6's: C tiles tmm0, tmm1 of 16 rows × 64 bytes,
// A tiles tmm2, tmm3 of 16 × 16, B tiles tmm4, tmm5 of 4 × 64.
var amxConfig6 = func() (c [64]byte) {
	c[0] = 1
	shape := [6][2]int{{16, 64}, {16, 64}, {16, 16}, {16, 16}, {4, 64}, {4, 64}}
	for i, s := range shape {
		c[16+2*i] = byte(s[1])
		c[48+i] = byte(s[0])
	}
	return c
}()

func gemmAMX6Asm(p *panel, a *amx6Inputs, nsb int, out []float32) {
	_, _, _ = p.q[nsb*4096-1], p.ki[nsb*256-1], p.k[nsb*panelRows-1]
	_, _ = a.q[a.tiles*nsb*4096-1], a.xd[a.tiles*nsb*amxIn-1]
	_ = out[a.tiles*amxIn*panelRows-1]
	c := p.amxScratch()
	gemmTileAMX6(&p.q[0], &p.ki[0], &p.k[0], nsb, &a.q[0], &a.xd[0], a.tiles, &out[0], &c[0], &amxConfig6[0])
}

func gemmAMXAsm(p *panel, a *amxInputs, nb int, out []float32) {
	_, _ = p.q[nb*512-1], p.sc[nb*panelRows-1]
	_, _, _ = a.q[a.tiles*nb*512-1], a.d[a.tiles*nb*amxIn-1], a.off[a.tiles*nb*amxIn-1]
	_ = out[a.tiles*amxIn*panelRows-1]
	c := p.amxScratch()
	gemmTileAMX(&p.q[0], &p.sc[0], nb, &a.q[0], &a.d[0], &a.off[0], a.tiles, &out[0], &c[0], &amxConfig[0])
}

func gemmAMXKAsm(p *panel, a *amxKInputs, pairs int, out []float32) {
	_, _ = p.q[pairs*1024-1], p.k[pairs/4*amxSuper-1]
	_, _, _ = a.q[a.tiles*pairs*1024-1], a.xd[a.tiles*pairs/4*amxIn-1], a.bs[a.tiles*pairs*2*amxIn-1]
	_ = out[a.tiles*amxIn*panelRows-1]
	c := p.amxScratch()
	gemmTileAMXK(&p.q[0], &p.k[0], pairs, &a.q[0], &a.xd[0], &a.bs[0], a.tiles, &out[0], &c[0], &amxConfig[0])
}

// hasAMX reports AMX-TILE and AMX-INT8 with the OS saving tile state and
// letting this process use it, and AVX512-VNNI, which the GEMM's other
// kernels (and so its panels) need.
var hasAMX = func() bool {
	if !hasAVX512VNNI {
		return false
	}
	_, _, _, edx7 := cpuid(7, 0)
	const tile, int8 = 1 << 24, 1 << 25
	if edx7&(tile|int8) != tile|int8 {
		return false
	}
	const xtilecfg, xtiledata = 1 << 17, 1 << 18
	if xgetbv()&(xtilecfg|xtiledata) != xtilecfg|xtiledata {
		return false
	}
	return requestAMX()
}()

func init() {
	if hasAMX {
		gemmAMX = gemmAMXAsm
		gemmAMXK = gemmAMXKAsm
		gemmAMX6 = gemmAMX6Asm
	}
}
