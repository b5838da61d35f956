package cpu

import "math"

// sincosf is glibc's sincosf (Arm optimized-routines' algorithm, MIT
// licensed, which glibc uses since 2.28), which llama.cpp's rope calls for
// every rotation angle. It is not correctly rounded (0.56 ulp), so Go's
// math.Sin and math.Cos rounded to float32 differ from it for about one
// argument in a hundred: each difference moves a rotated key by an ulp and
// can flip its rounding to the f16 cache. TestSincosfMatchesLibm checks it bit
// for bit against the C library where a C compiler is at hand.
//
// Angles below π/4 go straight to the polynomials; below 120 one
// multiply-subtract by π/2 reduces them; larger ones are reduced exactly with
// 192 bits of 4/π.
func sincosf(y float32) (sin, cos float32) {
	x := float64(y)
	p := &sincosPoly[0]
	switch top := sincosTop12(y); {
	case top < sincosTop12(0x1.921fb6p-1): // |y| < π/4
		if top < sincosTop12(0x1p-12) {
			return y, 1
		}
		return p.eval(x, x*x, 0)
	case top < sincosTop12(120):
		r := x * 0x1.45f306dc9c883p+23 // 2/π · 2^24
		n := (int32(r) + 0x800000) >> 24
		x = math.FMA(-float64(n), 0x1.921fb54442d18p0, x)
		if n&2 != 0 {
			p = &sincosPoly[1]
		}
		return p.eval(x*sincosSign[n&3], x*x, int(n))
	case top < sincosTop12(float32(math.Inf(1))):
		xi := math.Float32bits(y)
		sign := int(xi >> 31)
		x, n := sincosReduceLarge(xi)
		if (n+sign)&2 != 0 {
			p = &sincosPoly[1]
		}
		return p.eval(x*sincosSign[(n+sign)&3], x*x, n)
	}
	return y - y, y - y
}

func sincosTop12(f float32) uint32 { return math.Float32bits(f) >> 20 & 0x7ff }

var sincosSign = [4]float64{1, -1, -1, 1}

// sincosCoeffs are minimax polynomials on [-π/4, π/4]: cos ≈ c0 + c1x² + …
// + c4x⁸, sin ≈ x + s1x³ + s2x⁵ + s3x⁷. The second set has the cosine's signs
// flipped, for the quadrants where it enters negated.
type sincosCoeffs struct{ c0, c1, c2, c3, c4, s1, s2, s3 float64 }

var sincosPoly = [2]sincosCoeffs{
	{1, -0x1.ffffffd0c621cp-2, 0x1.55553e1068f19p-5, -0x1.6c087e89a359dp-10, 0x1.99343027bf8c3p-16,
		-0x1.555545995a603p-3, 0x1.1107605230bc4p-7, -0x1.994eb3774cf24p-13},
	{-1, 0x1.ffffffd0c621cp-2, -0x1.55553e1068f19p-5, 0x1.6c087e89a359dp-10, -0x1.99343027bf8c3p-16,
		-0x1.555545995a603p-3, 0x1.1107605230bc4p-7, -0x1.994eb3774cf24p-13},
}

// eval returns (sin, cos) of the reduced x; an odd quadrant n swaps them.
func (p *sincosCoeffs) eval(x, x2 float64, n int) (float32, float32) {
	x4 := x2 * x2
	x3 := x2 * x
	c2 := math.FMA(x2, p.c4, p.c3)
	s1 := math.FMA(x2, p.s3, p.s2)
	c1 := math.FMA(x2, p.c1, p.c0)
	x5 := x3 * x2
	x6 := x4 * x2
	s := math.FMA(x3, p.s1, x)
	c := math.FMA(x4, p.c2, c1)
	sv := float32(math.FMA(x5, s1, s))
	cv := float32(math.FMA(x6, c2, c))
	if n&1 != 0 {
		return cv, sv
	}
	return sv, cv
}

// sincosInvPio4 holds 4/π to 192 bits, 8 new bits per entry so that any
// three entries four apart are a 96-bit window.
var sincosInvPio4 = [24]uint32{
	0xa2, 0xa2f9, 0xa2f983, 0xa2f9836e,
	0xf9836e4e, 0x836e4e44, 0x6e4e4415, 0x4e441529,
	0x441529fc, 0x1529fc27, 0x29fc2757, 0xfc2757d1,
	0x2757d1f5, 0x57d1f534, 0xd1f534dd, 0xf534ddc0,
	0x34ddc0db, 0xddc0db62, 0xc0db6295, 0xdb629599,
	0x6295993c, 0x95993c43, 0x993c4390, 0x3c439041,
}

// sincosReduceLarge reduces |y| ≥ 120 (bits xi) modulo π/2 with a 32×96-bit
// product: the remainder in [-π/4, π/4] and the quadrant.
func sincosReduceLarge(xi uint32) (float64, int) {
	arr := sincosInvPio4[(xi>>26)&15:]
	shift := (xi >> 23) & 7
	xi = (xi&0xffffff | 0x800000) << shift
	res0 := uint64(xi * arr[0])
	res1 := uint64(xi) * uint64(arr[4])
	res2 := uint64(xi) * uint64(arr[8])
	res0 = res2>>32 | res0<<32
	res0 += res1
	n := (res0 + 1<<61) >> 62
	res0 -= n << 62
	return float64(int64(res0)) * 0x1.921fb54442d18p-62, int(n)
}
