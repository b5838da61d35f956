package quant

import "encoding/binary"

// The 4-bit non-linear types map each nibble through a fixed table of 16
// levels spaced more finely near zero, as weights are distributed.
//
// IQ4_NL block (18 bytes, 32 elements): f16 d, then 16 bytes of nibbles laid
// out as Q4_0's (low nibbles elements 0..15, high nibbles 16..31).
// x = d*IQ4Levels[q].
//
// IQ4_XS block (136 bytes, 256 elements): f16 d, u16 scales_h, 4 bytes
// scales_l, 128 bytes of nibbles, each 16-byte run one sub-block of 32 laid
// out as IQ4_NL's. Sub-block j's 6-bit scale ls has its low 4 bits in nibble
// j%2 of scales_l[j/2] and its top 2 bits at bit 2j of scales_h;
// x = d*(ls-32)*IQ4Levels[q].

// IQ4Levels is llama.cpp's kvalues_iq4nl.
var IQ4Levels = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// ScaleIQ4XS returns the signed scale (-32..31) of sub-block j (0..7) of an
// IQ4_XS block.
func ScaleIQ4XS(j int, blk []byte) int8 {
	lo := blk[4+j/2] >> (4 * uint(j%2)) & 0xf
	hi := uint8(binary.LittleEndian.Uint16(blk[2:])>>(2*uint(j))) & 3
	return int8(lo|hi<<4) - 32
}

func dequantizeIQ4_NL(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b, dst = b+18, dst[32:] {
		blk := src[b : b+18]
		dequantIQ4(F16ToF32(binary.LittleEndian.Uint16(blk)), blk[2:18], dst[:32])
	}
}

func dequantizeIQ4_XS(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b, dst = b+136, dst[256:] {
		blk := src[b : b+136]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		for j := range 8 {
			dl := d * float32(ScaleIQ4XS(j, blk))
			dequantIQ4(dl, blk[8+16*j:24+16*j], dst[32*j:32*j+32])
		}
	}
}

// dequantIQ4 decodes 16 bytes of nibbles, scaled by d, into 32 elements.
func dequantIQ4(d float32, qs []byte, y []float32) {
	for j, q := range qs[:16] {
		y[j] = d * float32(IQ4Levels[q&0xf])
		y[j+16] = d * float32(IQ4Levels[q>>4])
	}
}

// iq4Tries is the ntry ggml_quantize_chunk passes to the IQ4 quantizers:
// the scales tried are (i - 127)/max for i in -7..7.
const iq4Tries = 7

func quantizeIQ4_NL(src []float32, dst []byte) {
	var L [32]uint8
	for b := 0; len(src) > 0; b, src = b+18, src[32:] {
		x := src[:32]
		blk := dst[b : b+18]
		scale := iq4Scale(x)
		binary.LittleEndian.PutUint16(blk, F32ToF16(scale))
		var id float32
		if scale != 0 {
			id = 1 / scale
		}
		for j, v := range x {
			L[j] = iq4Index(id * v)
		}
		packIQ4(blk[2:18], L[:])
	}
}

func quantizeIQ4_XS(src []float32, dst []byte) {
	var L [32]uint8
	var scales [8]float32
	for b := 0; len(src) > 0; b, src = b+136, src[256:] {
		x := src[:256]
		blk := dst[b : b+136]
		var maxScale, amaxScale float32
		for j := range 8 {
			scales[j] = iq4Scale(x[32*j : 32*j+32])
			if a := abs32(scales[j]); a > amaxScale {
				amaxScale, maxScale = a, scales[j]
			}
		}
		d := -maxScale / 32
		binary.LittleEndian.PutUint16(blk, F32ToF16(d))
		var id float32
		if d != 0 {
			id = 1 / d
		}
		var scalesH uint16
		clear(blk[4:8])
		for j := range 8 {
			l := max(-32, min(31, nearestInt(id*scales[j])))
			dl := d * float32(l)
			var idl float32
			if dl != 0 {
				idl = 1 / dl
			}
			for i, v := range x[32*j : 32*j+32] {
				L[i] = iq4Index(idl * v)
			}
			packIQ4(blk[8+16*j:24+16*j], L[:])
			l += 32
			blk[4+j/2] |= uint8(l&0xf) << (4 * uint(j%2))
			scalesH |= uint16(l>>4) << (2 * uint(j))
		}
		binary.LittleEndian.PutUint16(blk[2:], scalesH)
	}
}

// iq4Scale is the per-32 search of llama.cpp's quantize_row_iq4_nl_impl with
// no importance weights: x²-weighted least squares of x ≈ d*IQ4Levels[L],
// starting from d = max/127 (max the signed value of largest magnitude) and
// then trying the 2*iq4Tries+1 inverse scales (i-127)/max. It returns 0 for
// an all-zero x.
func iq4Scale(x []float32) float32 {
	var amax, vmax float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, vmax = a, v
		}
	}
	if amax < groupMaxEps {
		return 0
	}
	fit := func(id float32) (sumQX, sumQ2 float32) {
		for _, v := range x {
			q := float32(IQ4Levels[iq4Index(id*v)])
			w := float32(v * v)
			sumQX += float32(float32(w*q) * v)
			sumQ2 += float32(float32(w*q) * q)
		}
		return sumQX, sumQ2
	}
	d := -vmax / float32(IQ4Levels[0])
	sumQX, sumQ2 := fit(1 / d)
	d = 0
	if sumQ2 > 0 {
		d = sumQX / sumQ2
	}
	best := float32(d * sumQX)
	for itry := -iq4Tries; itry <= iq4Tries; itry++ {
		sumQX, sumQ2 = fit(float32(itry+int(IQ4Levels[0])) / vmax)
		if sumQ2 > 0 && float32(sumQX*sumQX) > float32(best*sumQ2) {
			d = sumQX / sumQ2
			best = float32(d * sumQX)
		}
	}
	return d
}

// iq4Index is llama.cpp's best_index_int8 over IQ4Levels: the level nearest
// x, the lower one on a tie, by bisection.
func iq4Index(x float32) uint8 {
	if x <= float32(IQ4Levels[0]) {
		return 0
	}
	if x >= float32(IQ4Levels[15]) {
		return 15
	}
	lo, hi := 0, 15
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if x < float32(IQ4Levels[mid]) {
			hi = mid
		} else {
			lo = mid
		}
	}
	if x-float32(IQ4Levels[hi-1]) < float32(IQ4Levels[hi])-x {
		return uint8(hi - 1)
	}
	return uint8(hi)
}

// packIQ4 stores 32 levels as 16 bytes: element j in the low nibble of byte
// j, element j+16 in its high nibble.
func packIQ4(qs []byte, L []uint8) {
	for j := range 16 {
		qs[j] = L[j] | L[j+16]<<4
	}
}
