package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"hybrid/quant"
)

// TestF16VectorOpsMatchDefinition checks the f16 primitives (assembly where
// the CPU has it) bit for bit against a scalar definition in float64, at
// lengths with and without an 8-lane tail.
func TestF16VectorOpsMatchDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 7, 8, 9, 64, 67, 128} {
		x := make([]uint16, n)
		y := make([]uint16, n)
		xf := make([]float32, n)
		for i := range x {
			x[i] = quant.F32ToF16(float32(r.NormFloat64()))
			y[i] = quant.F32ToF16(float32(r.NormFloat64()))
			xf[i] = float32(r.NormFloat64())
		}
		v := float32(r.Float64())
		want := make([]uint16, n)
		for i := range want {
			exact := float64(quant.F16ToF32(x[i]))*float64(v) + float64(quant.F16ToF32(y[i]))
			want[i] = quant.F32ToF16(float32(exact))
		}
		got := append([]uint16(nil), y...)
		MadF16(got, x, v)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("MadF16 n=%d [%d]: got %#04x want %#04x", n, i, got[i], want[i])
			}
		}
		got = append(got[:0], y...)
		ScaleF16(got, v)
		for i := range got {
			if w := quant.F32ToF16(quant.F16ToF32(y[i]) * v); got[i] != w {
				t.Fatalf("ScaleF16 n=%d [%d]: got %#04x want %#04x", n, i, got[i], w)
			}
		}
		var ref float64
		for i := range x {
			ref += float64(quant.F16ToF32(x[i])) * float64(xf[i])
		}
		if d := DotF16(x, xf); math.Abs(float64(d)-ref) > 1e-5*math.Sqrt(float64(n))*4 {
			t.Fatalf("DotF16 n=%d: got %g want %g", n, d, ref)
		}
		h := make([]uint16, n)
		ToF16(h, xf)
		for i := range h {
			if h[i] != quant.F32ToF16(xf[i]) {
				t.Fatalf("ToF16 [%d] differs", i)
			}
		}
	}
}

// TestToF16AllRanges converts float32 bit patterns spread over every
// exponent (a stride through all 2^32, plus the rounding edges: halfway
// cases, the largest finite half and what rounds past it, half subnormals)
// and requires quant.F32ToF16's result, a NaN only as some NaN.
func TestToF16AllRanges(t *testing.T) {
	var src []float32
	for b := uint64(0); b < 1<<32; b += 4093 {
		src = append(src, math.Float32frombits(uint32(b)))
	}
	for _, f := range []float32{0, 65504, 65519.99, 65520, 65536, 6.1035156e-05, 5.9604645e-08, 2.9802322e-08, 2.9802326e-08, 1 + 1.0/2048, 1 + 3.0/2048, float32(math.Inf(1))} {
		src = append(src, f, -f)
	}
	dst := make([]uint16, len(src)+3)
	ToF16(dst[:len(src)], src)
	for i, f := range src {
		want := quant.F32ToF16(f)
		if f != f {
			if dst[i]&0x7c00 != 0x7c00 || dst[i]&0x3ff == 0 {
				t.Fatalf("%#08x (NaN) -> %#04x, not a NaN", math.Float32bits(f), dst[i])
			}
			continue
		}
		if dst[i] != want {
			t.Fatalf("%g (%#08x) -> %#04x, want %#04x", f, math.Float32bits(f), dst[i], want)
		}
	}
}
