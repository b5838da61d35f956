package quant

import (
	"math"
)

// Shared pieces of the K-quants (Q2_K to Q6_K): super-blocks of QK_K = 256
// elements split into sub-blocks whose scales are themselves quantized.
//
// Every product that feeds an addition is wrapped in float32(...): Go may
// otherwise fuse it into a multiply-add, whose single rounding would differ
// from llama.cpp's portable build.

// groupMaxEps is llama.cpp's GROUP_MAX_EPS: a group whose largest magnitude is
// below it counts as all zero.
const groupMaxEps = float32(1e-15)

// nearestInt rounds to nearest, ties to even, by llama.cpp's trick of adding
// 1.5*2^23 and reading the mantissa; it is meant for |f| <= 4194303.
func nearestInt(f float32) int32 {
	v := f + 12582912
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// ScaleMinK4 unpacks the 6-bit scale and min of sub-block j (0..7) from the
// 12-byte scales field of a Q4_K or Q5_K block. Sub-blocks 0..3 keep theirs in
// the low 6 bits of bytes j and j+4; sub-blocks 4..7 keep the low 4 bits in
// byte j+4's nibbles and the top 2 bits in the spare top bits of bytes j-4 and j.
func ScaleMinK4(j int, scales []byte) (sc, m uint8) {
	if j < 4 {
		return scales[j] & 63, scales[j+4] & 63
	}
	sc = scales[j+4]&0xf | (scales[j-4]>>6)<<4
	m = scales[j+4]>>4 | (scales[j]>>6)<<4
	return sc, m
}

// packScaleMinK4 is the inverse of ScaleMinK4 for sub-block j; scales must
// start zeroed and sub-blocks be packed in order 0..7.
func packScaleMinK4(j int, scales []byte, sc, m uint8) {
	if j < 4 {
		scales[j] = sc
		scales[j+4] = m
		return
	}
	scales[j+4] = sc&0xf | (m&0xf)<<4
	scales[j-4] |= (sc >> 4) << 6
	scales[j] |= (m >> 4) << 6
}

// kScalesMins quantizes the eight sub-block scales and mins of a Q4_K or Q5_K
// super-block x with make_qkx2_quants (nmax levels, search from rmin in nstep
// steps of 0.1), and fills L with each element's level. It packs the 6-bit
// scales into scales and returns the super-block's f16 d and dmin.
func kScalesMins(x []float32, L []uint8, scales []byte, nmax int, rmin float32, nstep int) (d, dmin uint16) {
	var subScales, subMins [8]float32
	var weights [32]float32
	var maxScale, maxMin float32
	for j := range 8 {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := float32(math.Sqrt(float64(sumX2 / 32)))
		for l, v := range xs {
			weights[l] = avX + abs32(v)
		}
		subScales[j], subMins[j] = makeQKX2(nmax, xs, weights[:], L[32*j:32*j+32], rmin, 0.1, nstep, false)
		if subScales[j] > maxScale {
			maxScale = subScales[j]
		}
		if subMins[j] > maxMin {
			maxMin = subMins[j]
		}
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	clear(scales[:12])
	for j := range 8 {
		ls := min(63, uint8(nearestInt(invScale*subScales[j])))
		lm := min(63, uint8(nearestInt(invMin*subMins[j])))
		packScaleMinK4(j, scales, ls, lm)
	}
	return F32ToF16(maxScale / 63), F32ToF16(maxMin / 63)
}

// kRequantize recomputes the levels (0..nmax) of a Q4_K or Q5_K super-block
// from its rounded scales, as the decoder will see them. Sub-blocks whose
// scale rounded to zero keep the levels make_qkx2_quants chose.
func kRequantize(x []float32, L []uint8, scales []byte, d, dmin uint16, nmax int32) {
	df, mf := F16ToF32(d), F16ToF32(dmin)
	for j := range 8 {
		sc, m := ScaleMinK4(j, scales)
		ds := df * float32(sc)
		if ds == 0 {
			continue
		}
		dm := mf * float32(m)
		for i, v := range x[32*j : 32*j+32] {
			l := nearestInt((v + dm) / ds)
			L[32*j+i] = uint8(max(0, min(nmax, l)))
		}
	}
}

// makeQKX2 is llama.cpp's make_qkx2_quants: it fits x ≈ scale*L - min with
// L in 0..nmax and min >= 0, minimizing the weighted squared error (the
// weighted absolute error if mad) over a small grid of candidate scales. It
// returns the scale and the min (as a positive offset), and fills L; x is at
// most 32 long.
func makeQKX2(nmax int, x, weights []float32, L []uint8, rmin, rdelta float32, nstep int, mad bool) (scale, theMin float32) {
	// errTerm is the error measure of diff: |diff| if mad, else diff².
	errTerm := func(diff float32) float32 {
		if mad {
			return abs32(diff)
		}
		return float32(diff * diff)
	}
	n := len(x)
	lo, hi := x[0], x[0]
	sumW := weights[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		if x[i] < lo {
			lo = x[i]
		}
		if x[i] > hi {
			hi = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		clear(L[:n])
		return 0, -lo
	}
	fmax := float32(nmax)
	iscale := fmax / (hi - lo)
	scale = 1 / iscale
	var bestError float32
	for i, v := range x {
		l := nearestInt(float32(iscale * (v - lo)))
		L[i] = uint8(max(0, min(int32(nmax), l)))
		diff := float32(float32(scale*float32(L[i]))+lo) - v
		bestError += float32(weights[i] * errTerm(diff))
	}
	if nstep < 1 {
		return scale, -lo
	}
	var laux [32]uint8
	for is := 0; is <= nstep; is++ {
		iscale = (float32(rmin+float32(rdelta*float32(is))) + fmax) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i, v := range x {
			l := nearestInt(float32(iscale * (v - lo)))
			l = max(0, min(int32(nmax), l))
			laux[i] = uint8(l)
			w := weights[i]
			fl := float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(float32(w*fl) * fl)
			sumXL += float32(float32(w*fl) * v)
		}
		det := float32(sumW*sumL2) - float32(sumL*sumL)
		if det > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / det
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / det
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var curError float32
			for i, v := range x {
				diff := float32(float32(thisScale*float32(laux[i]))+thisMin) - v
				curError += float32(weights[i] * errTerm(diff))
			}
			if curError < bestError {
				copy(L[:n], laux[:n])
				bestError = curError
				scale = thisScale
				lo = thisMin
			}
		}
	}
	return scale, -lo
}

// absMax returns the largest |v| of x and the v it comes from (the first
// of equal ones), as llama.cpp's make_*_quants find them.
func absMax(x []float32) (amax, vmax float32) {
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, vmax = a, v
		}
	}
	return amax, vmax
}

// makeQX is llama.cpp's make_qx_quants with rmse_type 1 and no importance
// weights: it fits x ≈ scale*(L-nmax) with L-nmax in -nmax..nmax-1, weighting
// each element's squared error by x², and tries 18 scales around nmax/max.
// L receives levels offset by nmax (0..2*nmax-1).
func makeQX(nmax int, x []float32, L []int8) float32 {
	amax, vmax := absMax(x)
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	n32 := int32(nmax)
	level := func(iscale, v float32) int32 {
		return max(-n32, min(n32-1, nearestInt(float32(iscale*v))))
	}
	iscale := float32(-nmax) / vmax
	var sumLX, sumL2 float32
	for i, v := range x {
		l := level(iscale, v)
		L[i] = int8(l + n32)
		w := float32(v * v)
		fl := float32(l)
		sumLX += float32(float32(w*v) * fl)
		sumL2 += float32(float32(w*fl) * fl)
	}
	var scale float32
	if sumL2 != 0 {
		scale = sumLX / sumL2
	}
	best := scale * sumLX
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(float32(nmax) + float32(0.1*float32(is))) / vmax
		sumLX, sumL2 = 0, 0
		for _, v := range x {
			l := level(iscale, v)
			w := float32(v * v)
			fl := float32(l)
			sumLX += float32(float32(w*v) * fl)
			sumL2 += float32(float32(w*fl) * fl)
		}
		if sumL2 > 0 && sumLX*sumLX > best*sumL2 {
			for i, v := range x {
				L[i] = int8(level(iscale, v) + n32)
			}
			scale = sumLX / sumL2
			best = scale * sumLX
		}
	}
	return scale
}
