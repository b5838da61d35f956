package kernels

import "hybrid/quant"

// Portable dot products of the K-quant super-blocks (256 elements) with
// activations quantized by quantize256. Sub-block sums are exact integers; the
// super-block's offset term comes from the activation's per-16 sums.

// Q4_K: {f16 d, dmin; u8 scales[12]; u8 qs[128]}. Sub-block s (32 elements)
// has a 6-bit scale sc and min m (quant.ScaleMinK4); its elements are
// d*sc*q - dmin*m, q the low nibbles of qs[32*(s/2):] for even s and the high
// nibbles for odd s.
func dotQ4_KGo(w []byte, x *xrow) float32 {
	var sum float32
	for b, xd := range x.d {
		blk, q, bs := w[144*b:144*b+144], x.q[256*b:256*b+256], x.bs[16*b:16*b+16]
		var dot, off int32
		for s := range 8 {
			sc, m := quant.ScaleMinK4(s, blk[4:16])
			qs := blk[16+32*(s/2) : 16+32*(s/2)+32]
			shift := 4 * uint(s&1)
			var p int32
			for j, v := range qs {
				p += int32(v>>shift&15) * int32(q[32*s+j])
			}
			dot += int32(sc) * p
			off += int32(m) * (int32(bs[2*s]) + int32(bs[2*s+1]))
		}
		sum += xd * (half(blk)*float32(dot) - half(blk[2:])*float32(off))
	}
	return sum
}

// Q5_K: {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}, as Q4_K with a
// fifth bit for sub-block s's element j in bit s of qh[j].
func dotQ5_KGo(w []byte, x *xrow) float32 {
	var sum float32
	for b, xd := range x.d {
		blk, q, bs := w[176*b:176*b+176], x.q[256*b:256*b+256], x.bs[16*b:16*b+16]
		qh := blk[16:48]
		var dot, off int32
		for s := range 8 {
			sc, m := quant.ScaleMinK4(s, blk[4:16])
			qs := blk[48+32*(s/2) : 48+32*(s/2)+32]
			shift := 4 * uint(s&1)
			var p int32
			for j, v := range qs {
				p += (int32(v>>shift&15) | int32(qh[j]>>s&1)<<4) * int32(q[32*s+j])
			}
			dot += int32(sc) * p
			off += int32(m) * (int32(bs[2*s]) + int32(bs[2*s+1]))
		}
		sum += xd * (half(blk)*float32(dot) - half(blk[2:])*float32(off))
	}
	return sum
}

// Q6_K: {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}. In each half of 128
// elements (ql[64h:], qh[32h:]), element 32k+l takes the low (k even) or high
// nibble of ql[l+32*(k&1)] and bits 2k, 2k+1 of qh[l]; its value is
// d*scales[e/16]*(q-32). The -32 is folded in through the per-16 sums.
func dotQ6_KGo(w []byte, x *xrow) float32 {
	var sum float32
	for b, xd := range x.d {
		blk, q, bs := w[210*b:210*b+210], x.q[256*b:256*b+256], x.bs[16*b:16*b+16]
		sc := blk[192:208]
		var dot int32
		for h := range 2 {
			ql, qh := blk[64*h:64*h+64], blk[128+32*h:128+32*h+32]
			for k := range 4 {
				for g := range 2 {
					var p int32
					for l := 16 * g; l < 16*g+16; l++ {
						v := int32(ql[l+32*(k&1)]>>(4*uint(k>>1))&15) | int32(qh[l]>>(2*k)&3)<<4
						p += v * int32(q[128*h+32*k+l])
					}
					e := 8*h + 2*k + g
					dot += int32(int8(sc[e])) * (p - 32*int32(bs[e]))
				}
			}
		}
		sum += xd * half(blk[208:]) * float32(dot)
	}
	return sum
}
