package quant

import "encoding/binary"

// Q3_K block (110 bytes, 256 elements): 32 bytes hmask, 64 bytes of low 2-bit
// quants laid out as Q2_K's, 12 bytes of packed 6-bit sub-block scales (see
// ScaleK3), then f16 d. Element 32k+l of half h (k = 0..3) has its third bit
// in bit 4h+k of hmask[l]; q = low bits - 4 if that bit is clear, so q is in
// -4..3. x = d*(scale-32)*q.

// ScaleK3 unpacks the signed scale (-32..31) of sub-block j (0..15, 16
// elements each) from the 12-byte scales field of a Q3_K block. The low 4
// bits are nibbles of bytes 0..7 (low nibbles for j < 8); the top 2 bits are
// bits 2*(j/4) and up of byte 8 + j%4.
func ScaleK3(j int, scales []byte) int8 {
	lo := scales[j%8] >> (4 * uint(j/8)) & 0xf
	hi := scales[8+j%4] >> (2 * uint(j/4)) & 3
	return int8(lo|hi<<4) - 32
}

func dequantizeQ3_K(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b, dst = b+110, dst[256:] {
		blk := src[b : b+110]
		d := F16ToF32(binary.LittleEndian.Uint16(blk[108:]))
		hmask, qs := blk[:32], blk[32:96]
		for s := range 16 {
			dl := d * float32(ScaleK3(s, blk[96:108]))
			y := dst[16*s : 16*s+16]
			for l := range y {
				e := 16*s + l
				q := int32(q2Quant(qs, e))
				if hmask[e%32]>>(e/32)&1 == 0 {
					q -= 4
				}
				y[l] = dl * float32(q)
			}
		}
	}
}

func quantizeQ3_K(src []float32, dst []byte) {
	var L [QK_K]int8
	var scales [16]float32
	var U [QK_K]uint8
	for b := 0; len(src) > 0; b, src = b+110, src[256:] {
		x := src[:256]
		blk := dst[b : b+110]
		clear(blk)
		var maxScale, amax float32
		for j := range 16 {
			scales[j] = makeQ3(4, x[16*j:16*j+16], L[16*j:16*j+16])
			if a := abs32(scales[j]); a > amax {
				amax, maxScale = a, scales[j]
			}
		}
		sc := blk[96:108]
		var d uint16
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := range 16 {
				l := int8(nearestInt(iscale * scales[j]))
				l = max(-32, min(31, l)) + 32
				if j < 8 {
					sc[j] = uint8(l) & 0xf
				} else {
					sc[j-8] |= (uint8(l) & 0xf) << 4
				}
				sc[8+j%4] |= uint8(l>>4) << (2 * uint(j/4))
			}
			d = F32ToF16(1 / iscale)
		}
		binary.LittleEndian.PutUint16(blk[108:], d)
		df := F16ToF32(d)
		for j := range 16 {
			dl := df * float32(ScaleK3(j, sc))
			if dl == 0 {
				continue
			}
			for i, v := range x[16*j : 16*j+16] {
				L[16*j+i] = int8(max(-4, min(3, nearestInt(v/dl))) + 4)
			}
		}
		hmask := blk[:32]
		for j, l := range L {
			if l > 3 {
				hmask[j%32] |= 1 << (j / 32)
				l -= 4
			}
			U[j] = uint8(l)
		}
		pack2Bit(blk[32:96], U[:])
	}
}

// makeQ3 is llama.cpp's make_q3_quants with do_rmse: it fits x ≈ scale*L
// with L in -nmax..nmax-1, starting from nmax/max and then moving one level
// at a time while that improves the x²-weighted fit, for at most five
// rounds. L receives the levels offset by nmax, or zeros (not offset) with a
// zero scale for an all-zero x.
func makeQ3(nmax int, x []float32, L []int8) float32 {
	amax, vmax := absMax(x)
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	n32 := int32(nmax)
	clamp := func(l int32) int8 { return int8(max(-n32, min(n32-1, l))) }
	iscale := float32(-nmax) / vmax
	var sumLX, sumL2 float32
	for i, v := range x {
		l := clamp(nearestInt(float32(iscale * v)))
		L[i] = l
		w := float32(v * v)
		fl := float32(l)
		sumLX += float32(float32(w*v) * fl)
		sumL2 += float32(float32(w*fl) * fl)
	}
	for range 5 {
		changed := false
		for i, v := range x {
			w := float32(v * v)
			fl := float32(L[i])
			slx := sumLX - float32(float32(w*v)*fl)
			if !(slx > 0) {
				continue
			}
			sl2 := sumL2 - float32(float32(w*fl)*fl)
			nl := clamp(nearestInt(float32(v*sl2) / slx))
			if nl == L[i] {
				continue
			}
			fn := float32(nl)
			slx += float32(float32(w*v) * fn)
			sl2 += float32(float32(w*fn) * fn)
			if sl2 > 0 && float32(float32(slx*slx)*sumL2) > float32(float32(sumLX*sumLX)*sl2) {
				L[i], sumLX, sumL2 = nl, slx, sl2
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	for i := range x {
		L[i] += int8(nmax)
	}
	if sumL2 > 0 {
		return sumLX / sumL2
	}
	return 0
}
