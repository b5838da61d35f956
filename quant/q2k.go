package quant

import "encoding/binary"

// Q2_K block (84 bytes, 256 elements): 16 bytes of sub-block scales (low
// nibble) and mins (high nibble), one per 16 elements; 64 bytes of 2-bit
// quants; then f16 d and dmin. Each half of 128 elements uses 32 bytes of
// quants: sub-block s (16 elements) takes bits 2k..2k+1, k = (s%8)/2, of
// bytes 32*(s/8) + 16*(s%2) onward. x = d*sc*q - dmin*m.

// q2Quant returns the 2-bit quant of element e (0..255) from a Q2_K block's
// 64 quant bytes.
func q2Quant(qs []byte, e int) uint8 {
	s, l := e/16, e%16
	return qs[32*(s/8)+16*(s%2)+l] >> (2 * ((s % 8) / 2)) & 3
}

func dequantizeQ2_K(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b, dst = b+84, dst[256:] {
		blk := src[b : b+84]
		d := F16ToF32(binary.LittleEndian.Uint16(blk[80:]))
		dmin := F16ToF32(binary.LittleEndian.Uint16(blk[82:]))
		qs := blk[16:80]
		for s, sc := range blk[:16] {
			dl, ml := d*float32(sc&0xf), dmin*float32(sc>>4)
			y := dst[16*s : 16*s+16]
			for l := range y {
				y[l] = float32(dl*float32(q2Quant(qs, 16*s+l))) - ml
			}
		}
	}
}

func quantizeQ2_K(src []float32, dst []byte) {
	var L [QK_K]uint8
	var weights [16]float32
	var scales, mins [16]float32
	for b := 0; len(src) > 0; b, src = b+84, src[256:] {
		x := src[:256]
		blk := dst[b : b+84]
		var maxScale, maxMin float32
		for j := range 16 {
			xs := x[16*j : 16*j+16]
			for l, v := range xs {
				weights[l] = abs32(v)
			}
			scales[j], mins[j] = makeQKX2(3, xs, weights[:], L[16*j:16*j+16], -0.5, 0.1, 15, true)
			maxScale = max32(maxScale, scales[j])
			maxMin = max32(maxMin, mins[j])
		}
		sc := blk[:16]
		var d, dmin uint16
		clear(sc)
		if maxScale > 0 {
			iscale := 15 / maxScale
			for j := range sc {
				sc[j] = uint8(nearestInt(iscale * scales[j]))
			}
			d = F32ToF16(maxScale / 15)
		}
		if maxMin > 0 {
			iscale := 15 / maxMin
			for j := range sc {
				sc[j] |= uint8(nearestInt(iscale*mins[j]) << 4)
			}
			dmin = F32ToF16(maxMin / 15)
		}
		binary.LittleEndian.PutUint16(blk[80:], d)
		binary.LittleEndian.PutUint16(blk[82:], dmin)
		df, mf := F16ToF32(d), F16ToF32(dmin)
		for j := range 16 {
			dl := df * float32(sc[j]&0xf)
			if dl == 0 {
				continue
			}
			dm := mf * float32(sc[j]>>4)
			for i, v := range x[16*j : 16*j+16] {
				L[16*j+i] = uint8(max(0, min(3, nearestInt((v+dm)/dl))))
			}
		}
		pack2Bit(blk[16:80], L[:])
	}
}

// pack2Bit stores 256 2-bit levels as Q2_K and Q3_K lay out their low bits:
// byte l of half h holds elements 128h+l, +32, +64 and +96 from its low bits up.
func pack2Bit(qs []byte, L []uint8) {
	for h := range 2 {
		Lh := L[128*h : 128*h+128]
		for l := range 32 {
			qs[32*h+l] = Lh[l] | Lh[l+32]<<2 | Lh[l+64]<<4 | Lh[l+96]<<6
		}
	}
}

// max32 is C's "if (v > m) m = v": unlike the builtin max, it keeps m when v
// is NaN.
func max32(m, v float32) float32 {
	if v > m {
		return v
	}
	return m
}
