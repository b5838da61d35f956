package quant

import "encoding/binary"

// Q5_0 block (22 bytes, 32 elements): f16 scale d, a little-endian uint32 qh
// whose bit j is the fifth bit of element j, then 16 bytes of low nibbles laid
// out as in Q4_0; x = (q-16)*d.
//
// Q5_1 block (24 bytes, 32 elements): f16 scale d, f16 offset m, qh, nibbles;
// x = q*d + m.

func dequantizeQ5_0(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b, dst = b+22, dst[32:] {
		blk := src[b : b+22]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		qh := binary.LittleEndian.Uint32(blk[2:])
		for j, q := range blk[6:22] {
			h0 := (int32(qh>>j) << 4) & 0x10
			h1 := int32(qh>>(j+12)) & 0x10
			dst[j] = float32((int32(q&0xf)|h0)-16) * d
			dst[j+16] = float32((int32(q>>4)|h1)-16) * d
		}
	}
}

func quantizeQ5_0(src []float32, dst []byte) {
	for b := 0; len(src) > 0; b, src = b+22, src[32:] {
		x := src[:32]
		blk := dst[b : b+22]
		var amax, vmax float32
		for _, v := range x {
			if a := abs32(v); amax < a {
				amax, vmax = a, v
			}
		}
		d := vmax / -16
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(blk, F32ToF16(d))
		var qh uint32
		for j := range 16 {
			q0 := uint8(min(31, truncInt8(float32(x[j]*id)+16.5)))
			q1 := uint8(min(31, truncInt8(float32(x[j+16]*id)+16.5)))
			blk[6+j] = q0&0xf | q1&0xf<<4
			qh |= uint32(q0>>4&1) << j
			qh |= uint32(q1>>4&1) << (j + 16)
		}
		binary.LittleEndian.PutUint32(blk[2:], qh)
	}
}

func dequantizeQ5_1(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b, dst = b+24, dst[32:] {
		blk := src[b : b+24]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		m := F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
		qh := binary.LittleEndian.Uint32(blk[4:])
		for j, q := range blk[8:24] {
			h0 := (uint8(qh>>j) << 4) & 0x10
			h1 := uint8(qh>>(j+12)) & 0x10
			dst[j] = float32(float32(q&0xf|h0)*d) + m
			dst[j+16] = float32(float32(q>>4|h1)*d) + m
		}
	}
}

func quantizeQ5_1(src []float32, dst []byte) {
	for b := 0; len(src) > 0; b, src = b+24, src[32:] {
		x := src[:32]
		blk := dst[b : b+24]
		lo, hi := minMax(x)
		d := (hi - lo) / 31
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(blk, F32ToF16(d))
		binary.LittleEndian.PutUint16(blk[2:], F32ToF16(lo))
		var qh uint32
		for j := range 16 {
			// No clamp to 31 here, as in llama.cpp: (max-lo)*id rounds to 31.
			q0 := truncUint8(float32((x[j]-lo)*id) + 0.5)
			q1 := truncUint8(float32((x[j+16]-lo)*id) + 0.5)
			blk[8+j] = q0&0xf | q1&0xf<<4
			qh |= uint32(q0>>4&1) << j
			qh |= uint32(q1>>4&1) << (j + 16)
		}
		binary.LittleEndian.PutUint32(blk[4:], qh)
	}
}
