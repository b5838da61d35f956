package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// siluMulRef is devices/cpu's siluMul on whole vectors: the reference.
func siluMulRef(g, u, out []float32, vexp func(float32) float32) {
	for i, x := range g {
		out[i] = x / (1 + vexp(-x)) * u[i]
	}
}

// siluInputs returns gates probing ggml_v_expf: Gaussians of several
// scales, uniform values up to ±100, dense sweeps and neighbours of the
// points where n = round(-x·log2 e) crosses 126 and 192 (both signs), x
// whose e(-x) is subnormal, zeros, subnormal and huge x. Its length is a
// multiple of 16.
func siluInputs(rng *rand.Rand) []float32 {
	var g []float32
	for _, sc := range []float64{0.1, 1, 3, 10, 40} {
		for range 4096 {
			g = append(g, float32(rng.NormFloat64()*sc))
		}
	}
	for range 8192 {
		g = append(g, float32(rng.Float64()*200-100))
	}
	for x := float32(-140); x <= 140; x += 1.0 / 64 {
		g = append(g, x)
	}
	for _, k := range []float64{125, 126, 127, 128, 191, 192, 193, 194} {
		for _, s := range []float64{1, -1} {
			c := float32(s * (k + 0.5) * math.Ln2)
			v := c
			for range 64 {
				v = math.Nextafter32(v, float32(math.Inf(1)))
				g = append(g, v)
			}
			v = c
			for range 64 {
				g = append(g, v)
				v = math.Nextafter32(v, float32(math.Inf(-1)))
			}
		}
	}
	for range 4096 { // e(-x) subnormal or near it
		g = append(g, float32(80+rng.Float64()*30))
	}
	g = append(g, 0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 1e-40, -1e-40, 1e-30, -1e-30,
		1e3, -1e3, 1e10, -1e10, 1e30, -1e30, math.MaxFloat32, -math.MaxFloat32)
	for range 256 { // random finite bit patterns
		for {
			v := math.Float32frombits(rng.Uint32())
			if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) {
				g = append(g, v)
				break
			}
		}
	}
	return g[:len(g)&^15]
}

func testSiluMul(t *testing.T, f func(g, u, out []float32), vexp func(float32) float32) {
	if f == nil {
		t.Skip("no assembly for this CPU")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	g := siluInputs(rng)
	u := make([]float32, len(g))
	for i := range u {
		u[i] = float32(rng.NormFloat64())
	}
	u[0], u[1] = 0, 1
	got, want := make([]float32, len(g)), make([]float32, len(g))
	f(g, u, got)
	siluMulRef(g, u, want, vexp)
	bad := 0
	for i := range g {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if bad++; bad <= 10 {
				t.Errorf("x=%g (%#08x) u=%g: got %g (%#08x), want %g (%#08x)", g[i], math.Float32bits(g[i]), u[i],
					got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d differ", bad, len(g))
	}
}

// TestSiluMul512BitIdentical checks the AVX-512 build's silu·u against the
// per-lane Go emulation.
func TestSiluMul512BitIdentical(t *testing.T) { testSiluMul(t, siluMul512Impl, VExpF512) }

// TestSiluMul256BitIdentical checks the AVX2 build's silu·u likewise.
func TestSiluMul256BitIdentical(t *testing.T) { testSiluMul(t, siluMul256Impl, VExpF256) }

// TestSiluMulCount checks that SiluMul does the whole vectors of the build
// HasAVX512 picks, and those right.
func TestSiluMulCount(t *testing.T) {
	lanes, vexp, f := 8, VExpF256, siluMul256Impl
	if HasAVX512() {
		lanes, vexp, f = 16, VExpF512, siluMul512Impl
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{0, 1, 7, 8, 15, 16, 17, 31, 100, 5632} {
		g, u := make([]float32, n), make([]float32, n)
		for i := range g {
			g[i], u[i] = float32(rng.NormFloat64()*4), float32(rng.NormFloat64())
		}
		got, want := make([]float32, n), make([]float32, n)
		done := SiluMul(g, u, got)
		wantDone := n - n%lanes
		if f == nil {
			wantDone = 0
		}
		if done != wantDone {
			t.Fatalf("n=%d: SiluMul did %d, want %d", n, done, wantDone)
		}
		siluMulRef(g[:done], u, want, vexp)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("n=%d: out[%d] = %g, want %g", n, i, got[i], want[i])
			}
		}
	}
}

// BenchmarkSiluMul times silu(g)·u over 5632 elements (an FFN's width):
// the Go emulations against the assembly.
func BenchmarkSiluMul(b *testing.B) {
	rng := rand.New(rand.NewPCG(11, 12))
	const n = 5632
	g, u, out := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range g {
		g[i], u[i] = float32(rng.NormFloat64()*2), float32(rng.NormFloat64())
	}
	for _, c := range []struct {
		name string
		f    func(g, u, out []float32)
	}{
		{"Go512", func(g, u, out []float32) { siluMulRef(g, u, out, VExpF512) }},
		{"Go256", func(g, u, out []float32) { siluMulRef(g, u, out, VExpF256) }},
		{"Asm512", siluMul512Impl},
		{"Asm256", siluMul256Impl},
	} {
		b.Run(c.name, func(b *testing.B) {
			if c.f == nil {
				b.Skip("no assembly for this CPU")
			}
			b.SetBytes(4 * n)
			for b.Loop() {
				c.f(g, u, out)
			}
		})
	}
}
