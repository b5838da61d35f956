package cpu

import (
	"math"
	"math/big"
)

// expf is glibc's expf (the algorithm of Arm's optimized-routines, which
// glibc uses since 2.27; its FMA variant), which llama.cpp's CPU flash
// attention calls for every softmax weight. It is not correctly rounded
// (0.502 ulp), so Go's float32(math.Exp(x)) differs from it in about 6 of
// 10,000 arguments; each such difference can flip a later rounding to f16.
// Tested bit for bit against the C library in TestExpfMatchesLibm where a C
// compiler is at hand.
//
// exp(x) = 2^(k/32) · 2^(r/32) with k = round(x·32/ln 2) and |r| ≤ 1/2: the
// first factor from a table of the 32 values 2^(i/32), the second from a
// cubic.
func expf(x float32) float32 {
	xd := float64(x)
	if a := abs32(x); !(a < 88) {
		switch {
		case math.IsNaN(xd):
			return x
		case x > 0x1.62e42ep6: // above log(2^128)
			return float32(math.Inf(1))
		case x < -0x1.9fe368p6: // below log(2^-150)
			return 0
		}
	}
	z := expInvLn2N * xd
	kd := z + expShift
	ki := math.Float64bits(kd)
	kd -= expShift
	r := z - kd
	s := math.Float64frombits(expTab[ki%32] + ki<<47)
	p := math.FMA(expC0, r, expC1)
	y := math.FMA(expC2, r, 1)
	y = math.FMA(p, r*r, y)
	return float32(y * s)
}

const (
	expInvLn2N = 0x1.71547652b82fep0 * 32 // 32/ln 2
	expShift   = 0x1.8p+52                // rounds z to an integer in kd's low bits
	// The cubic's coefficients for 2^(r/32): ln2³/6, ln2²/2 and ln2 (with
	// the minimax adjustments of the reference), divided by 32 per power.
	expC0 = 0x1.c6af84b912394p-5 / (32 * 32 * 32)
	expC1 = 0x1.ebfce50fac4f3p-3 / (32 * 32)
	expC2 = 0x1.62e42ff0c52d6p-1 / 32
)

// expTab[i] is the bits of 2^(i/32), correctly rounded, minus i<<47, so that
// adding k<<47 puts k/32's integer part into the exponent.
var expTab = func() (t [32]uint64) {
	root := new(big.Float).SetPrec(256).SetFloat64(2)
	for range 5 {
		root.Sqrt(root)
	}
	p := new(big.Float).SetPrec(256).SetFloat64(1)
	for i := range t {
		f, _ := p.Float64()
		t[i] = math.Float64bits(f) - uint64(i)<<47
		p.Mul(p, root)
	}
	return t
}()
