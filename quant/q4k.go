package quant

import "encoding/binary"

// Q4_K block (144 bytes, 256 elements): f16 d, f16 dmin, 12 bytes of packed
// 6-bit sub-block scales and mins (see ScaleMinK4), then 128 bytes of nibbles.
// Each 32-byte run of nibbles holds two sub-blocks of 32: low nibbles the
// first, high nibbles the second. x = d*sc*q - dmin*m.

func dequantizeQ4_K(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b, dst = b+144, dst[256:] {
		blk := src[b : b+144]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		dmin := F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
		scales := blk[4:16]
		qs := blk[16:144]
		for g := range 4 {
			sc, m := ScaleMinK4(2*g, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = ScaleMinK4(2*g+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			y := dst[64*g : 64*g+64]
			for l, q := range qs[32*g : 32*g+32] {
				y[l] = float32(d1*float32(q&0xf)) - m1
				y[l+32] = float32(d2*float32(q>>4)) - m2
			}
		}
	}
}

func quantizeQ4_K(src []float32, dst []byte) {
	var L [QK_K]uint8
	for b := 0; len(src) > 0; b, src = b+144, src[256:] {
		x := src[:256]
		blk := dst[b : b+144]
		scales := blk[4:16]
		d, dmin := kScalesMins(x, L[:], scales, 15, -1, 20)
		binary.LittleEndian.PutUint16(blk, d)
		binary.LittleEndian.PutUint16(blk[2:], dmin)
		kRequantize(x, L[:], scales, d, dmin, 15)
		qs := blk[16:144]
		for g := range 4 {
			for l := range 32 {
				qs[32*g+l] = L[64*g+l] | L[64*g+l+32]<<4
			}
		}
	}
}
