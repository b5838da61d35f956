package quant

import "encoding/binary"

// Q5_K block (176 bytes, 256 elements): f16 d, f16 dmin, 12 bytes of packed
// 6-bit scales and mins (see ScaleMinK4), 32 bytes qh of fifth bits, then 128
// bytes of nibbles laid out as in Q4_K. Sub-block s takes its fifth bits from
// bit s of each qh byte. x = d*sc*q - dmin*m.

func dequantizeQ5_K(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b, dst = b+176, dst[256:] {
		blk := src[b : b+176]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		dmin := F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
		scales := blk[4:16]
		qh := blk[16:48]
		qs := blk[48:176]
		for g := range 4 {
			sc, m := ScaleMinK4(2*g, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = ScaleMinK4(2*g+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			y := dst[64*g : 64*g+64]
			for l, q := range qs[32*g : 32*g+32] {
				h := qh[l] >> (2 * g)
				q1 := q&0xf | (h&1)<<4
				q2 := q>>4 | (h&2)<<3
				y[l] = float32(d1*float32(q1)) - m1
				y[l+32] = float32(d2*float32(q2)) - m2
			}
		}
	}
}

func quantizeQ5_K(src []float32, dst []byte) {
	var L [QK_K]uint8
	for b := 0; len(src) > 0; b, src = b+176, src[256:] {
		x := src[:256]
		blk := dst[b : b+176]
		scales := blk[4:16]
		d, dmin := kScalesMins(x, L[:], scales, 31, -0.5, 15)
		binary.LittleEndian.PutUint16(blk, d)
		binary.LittleEndian.PutUint16(blk[2:], dmin)
		kRequantize(x, L[:], scales, d, dmin, 31)
		qh := blk[16:48]
		qs := blk[48:176]
		clear(qh)
		for g := range 4 {
			for l := range 32 {
				l1, l2 := L[64*g+l], L[64*g+l+32]
				qh[l] |= (l1>>4)<<(2*g) | (l2>>4)<<(2*g+1)
				qs[32*g+l] = l1&0xf | (l2&0xf)<<4
			}
		}
	}
}
