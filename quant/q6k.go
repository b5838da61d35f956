package quant

import "encoding/binary"

// Q6_K block (210 bytes, 256 elements): 128 bytes ql of low nibbles, 64 bytes
// qh of 2-bit high parts, 16 int8 scales (one per 16 elements), then f16 d.
// Each half of 128 elements uses 64 bytes of ql and 32 of qh: element l+32k
// (k = 0..3) takes the low or high nibble of ql[l] or ql[l+32] and bits 2k..2k+1
// of qh[l]. x = d*scale*(q-32).

func dequantizeQ6_K(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b, dst = b+210, dst[256:] {
		blk := src[b : b+210]
		d := F16ToF32(binary.LittleEndian.Uint16(blk[208:]))
		for h := range 2 {
			ql := blk[64*h : 64*h+64]
			qh := blk[128+32*h : 128+32*h+32]
			sc := blk[192+8*h : 192+8*h+8]
			y := dst[128*h : 128*h+128]
			for l := range 32 {
				is := l / 16
				q1 := int32(ql[l]&0xf|(qh[l]&3)<<4) - 32
				q2 := int32(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
				q3 := int32(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int32(ql[l+32]>>4|(qh[l]>>6)<<4) - 32
				y[l] = d * float32(int8(sc[is])) * float32(q1)
				y[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
				y[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
				y[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
			}
		}
	}
}

func quantizeQ6_K(src []float32, dst []byte) {
	var L [QK_K]int8
	var scales [QK_K / 16]float32
	for b := 0; len(src) > 0; b, src = b+210, src[256:] {
		x := src[:256]
		blk := dst[b : b+210]
		var maxScale, maxAbsScale float32
		for ib := range 16 {
			s := makeQX(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
			scales[ib] = s
			if a := abs32(s); a > maxAbsScale {
				maxAbsScale, maxScale = a, s
			}
		}
		clear(blk)
		if maxAbsScale < groupMaxEps {
			continue // all zero, d included
		}
		iscale := -128 / maxScale
		binary.LittleEndian.PutUint16(blk[208:], F32ToF16(1/iscale))
		sc := blk[192:208]
		for ib := range 16 {
			sc[ib] = uint8(int8(min(127, nearestInt(iscale*scales[ib]))))
		}
		df := F16ToF32(binary.LittleEndian.Uint16(blk[208:]))
		for j := range 16 {
			d := df * float32(int8(sc[j]))
			if d == 0 {
				continue
			}
			for i, v := range x[16*j : 16*j+16] {
				l := max(-32, min(31, nearestInt(v/d)))
				L[16*j+i] = int8(l + 32)
			}
		}
		for h := range 2 {
			ql := blk[64*h : 64*h+64]
			qh := blk[128+32*h : 128+32*h+32]
			Lh := L[128*h : 128*h+128]
			for l := range 32 {
				q1, q2, q3, q4 := uint8(Lh[l]), uint8(Lh[l+32]), uint8(Lh[l+64]), uint8(Lh[l+96])
				ql[l] = q1&0xf | (q3&0xf)<<4
				ql[l+32] = q2&0xf | (q4&0xf)<<4
				qh[l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
			}
		}
	}
}
