//go:build amd64 && !purego

package kernels

import "hybrid/quant"

// The gathering unpackers of unpack_amd64.s, for full panels; they need
// AVX-512 (hasAVX512VNNI implies it).

//go:noescape
func unpackQ4_0Asm(w *byte, stride, nb int, q *byte, sc *float32)

//go:noescape
func unpackQ8_0Asm(w *byte, stride, nb int, q *byte, sc *float32)

// gatherable reports whether an assembly unpacker can take these rows: a
// full panel whose row offsets fit the gather's int32 indices.
func gatherable(w []byte, stride, nrows int) bool {
	return nrows == panelRows && stride <= (1<<31-1)/panelRows && len(w) >= panelRows*stride
}

func init() {
	if !hasAVX512VNNI {
		return
	}
	wrap := func(t quant.Type, asm func(w []byte, stride int, p *panel)) {
		g := gemmFor[t]
		goUnpack := g.unpack
		g.unpack = func(w []byte, stride, nrows int, p *panel) {
			if !gatherable(w, stride, nrows) {
				goUnpack(w, stride, nrows, p)
				return
			}
			asm(w, stride, p)
		}
	}
	wrap(quant.Q4_0, func(w []byte, stride int, p *panel) {
		nb := stride / 18
		_, _ = p.q[nb*512-1], p.sc[nb*16-1]
		unpackQ4_0Asm(&w[0], stride, nb, &p.q[0], &p.sc[0])
	})
	wrap(quant.Q8_0, func(w []byte, stride int, p *panel) {
		nb := stride / 34
		_, _ = p.q[nb*512-1], p.sc[nb*16-1]
		unpackQ8_0Asm(&w[0], stride, nb, &p.q[0], &p.sc[0])
	})
}
