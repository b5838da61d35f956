package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"hybrid/quant"
)

func randF32(r *rand.Rand, n int, s float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * s)
	}
	return v
}

func randF16(r *rand.Rand, n int) []uint16 {
	v := make([]uint16, n)
	for i := range v {
		v[i] = quant.F32ToF16(float32(r.NormFloat64()))
	}
	return v
}

func attnSameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %g, want %g", what, i, got[i], want[i])
		}
	}
}

// TestAttnKernelsMatchGo checks the kernels in use (assembly where the CPU
// has it) against their Go definitions bit for bit, over the row counts and
// head sizes that exercise every blocking and tail.
func TestAttnKernelsMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, hd := range []int{16, 32, 48, 64, 80, 128, 144} {
		for _, rows := range []int{1, 3, 4, 5, 8, 9} {
			q := randF32(r, rows*hd, 2)
			k := randF16(r, AttnTile*(hd+8))
			kt := make([]float32, hd*AttnTile)
			ktGo := make([]float32, hd*AttnTile)
			AttnPackK(kt, k, hd+8, AttnTile, hd)
			attnPackKGo(ktGo, k, hd+8, AttnTile, hd)
			attnSameBits(t, "kt", kt, ktGo)
			s := make([]float32, rows*AttnTile)
			sGo := make([]float32, rows*AttnTile)
			AttnScores(s, q, kt, rows, hd, 0.125)
			attnScoresGo(sGo, q, kt, rows, hd, 0.125)
			attnSameBits(t, "scores", s, sGo)

			for _, n := range []int{1, 7, 64} {
				p := randF32(r, rows*AttnTile, 1)
				v := randF16(r, n*(hd+24))
				o := randF32(r, rows*hd, 1)
				oGo := append([]float32(nil), o...)
				AttnAccum(o, p, v, hd+24, rows, n, hd)
				attnAccumGo(oGo, p, v, hd+24, rows, n, hd)
				attnSameBits(t, "accumulator", o, oGo)
			}
		}
	}
}

// TestAttnSoftMaxMatchesGo checks the softmax weights and sum in use against
// the Go ggml_v_expf of the build being matched, over ordinary scores and the
// edges: -Inf (masked), flushes to zero and to +Inf, zeros, subnormal results.
func TestAttnSoftMaxMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	edges := []float32{
		float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), -87, -88, -103, -103.9, -104, -110, -150, -1e30,
		88, 88.3, 88.4, 89, 100, 1e-40, -1e-40, 1, -1, 0.5, -0x1p-30, 0x1.62e42ep6, -0x1.9fe368p6,
	}
	for trial := range 2000 {
		p := make([]float32, AttnTile)
		m := float32(0)
		switch trial % 4 {
		case 0:
			p = randF32(r, AttnTile, 4)
			m = p[r.IntN(AttnTile)]
		case 1:
			p = randF32(r, AttnTile, 40)
			m = 10
		case 2:
			for i := range p {
				p[i] = edges[r.IntN(len(edges))]
			}
		default:
			for i := range p {
				p[i] = math.Float32frombits(r.Uint32())
				if p[i] != p[i] {
					p[i] = -1 // NaN scores do not occur; their lanes need not agree
				}
			}
			m = float32(r.NormFloat64())
		}
		pGo := append([]float32(nil), p...)
		sum := AttnSoftMax(p, m)
		sumGo := attnSoftMaxGo(pGo, m, HasAVX512())
		attnSameBits(t, "weights", p, pGo)
		if math.Float64bits(sum) != math.Float64bits(sumGo) && !(math.IsNaN(sum) && math.IsNaN(sumGo)) {
			t.Fatalf("trial %d: sum %g, want %g", trial, sum, sumGo)
		}
	}
}

func BenchmarkAttnTile(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const rows, hd = 128, 64
	q := randF32(r, rows*hd, 1)
	k := randF16(r, AttnTile*hd*4)
	v := randF16(r, AttnTile*hd*4)
	kt := make([]float32, hd*AttnTile)
	s := make([]float32, rows*AttnTile)
	o := make([]float32, rows*hd)
	b.SetBytes(int64(rows * AttnTile * hd * 2 * 2)) // flops, as bytes
	for range b.N {
		AttnPackK(kt, k, hd*4, AttnTile, hd)
		AttnScores(s, q, kt, rows, hd, 0.125)
		for r := range rows {
			AttnSoftMax(s[r*AttnTile:(r+1)*AttnTile], 1)
		}
		AttnAccum(o, s, v, hd*4, rows, AttnTile, hd)
	}
}

// TestAttnRowMax checks the row maximum in use against the Go one, on
// random rows, rows masked from every column on (the rest -Inf, as
// attendTiled leaves them), and the maximum at each position.
func TestAttnRowMax(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for lim := 0; lim <= AttnTile; lim++ {
		p := randF32(r, AttnTile, 3)
		for j := lim; j < AttnTile; j++ {
			p[j] = float32(math.Inf(-1))
		}
		if got, want := AttnRowMax(p), attnRowMaxGo(p); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("lim %d: max %g, Go %g", lim, got, want)
		}
		want := float32(math.Inf(-1))
		for _, x := range p[:lim] {
			want = max(want, x)
		}
		if got := AttnRowMax(p); got != want {
			t.Fatalf("lim %d: max %g, want %g", lim, got, want)
		}
	}
	for i := range AttnTile {
		p := make([]float32, AttnTile)
		for j := range p {
			p[j] = -1
		}
		p[i] = 5
		if got := AttnRowMax(p); got != 5 {
			t.Fatalf("maximum at %d: got %g", i, got)
		}
	}
}
