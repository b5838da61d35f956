package runtime

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"hybrid/devices"
)

func TestGreedyPicksArgmaxLowestOnTies(t *testing.T) {
	cases := []struct {
		name   string
		logits []float32
		want   int32
	}{
		{"single", []float32{1}, 0},
		{"last", []float32{-1, 0, 3}, 2},
		{"tie", []float32{2, 5, 5, 1}, 1},
		{"negative", []float32{-3, -2, -9}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Greedy(c.logits); got != c.want {
				t.Fatalf("Greedy(%v) = %d, want %d", c.logits, got, c.want)
			}
			s, _ := NewSampler(SamplerConfig{Temp: 0, TopP: 1, RepeatPenalty: 1})
			if got := s.Sample(c.logits, nil); got != c.want {
				t.Fatalf("Sample at temp 0 = %d, want %d", got, c.want)
			}
		})
	}
}

func TestSamplerRepeatPenaltyChangesGreedyChoice(t *testing.T) {
	s, _ := NewSampler(SamplerConfig{Temp: 0, TopP: 1, RepeatPenalty: 2, RepeatLastN: 4})
	logits := []float32{3, 2, -1}
	if got := s.Sample(logits, []int32{0}); got != 1 {
		t.Fatalf("penalised token 0 (3/2=1.5 < 2) should lose to 1, got %d", got)
	}
	if logits[0] != 3 {
		t.Fatal("Sample modified the caller's logits")
	}
	if got := s.Sample(logits, []int32{0, 9, 9, 9, 9}); got != 0 {
		t.Fatalf("token 0 is outside the last 4 tokens and should win, got %d", got)
	}
}

func TestSamplerSeedIsDeterministicAndTopKLimits(t *testing.T) {
	logits := make([]float32, 100)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i)))
	}
	draw := func(seed uint64, k int) []int32 {
		s, err := NewSampler(SamplerConfig{Temp: 1, TopK: k, TopP: 1, RepeatPenalty: 1, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		var out []int32
		for i := 0; i < 200; i++ {
			out = append(out, s.Sample(logits, nil))
		}
		return out
	}
	a, b, c := draw(7, 0), draw(7, 0), draw(8, 0)
	same := func(x, y []int32) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Fatal("the same seed gave different draws")
	}
	if same(a, c) {
		t.Fatal("different seeds gave identical draws")
	}
	top3 := map[int32]bool{}
	for _, id := range draw(1, 3) {
		top3[id] = true
	}
	// The three largest sin(i), i < 100, are at 33, 77 and 58 (i ≈ π/2 mod 2π).
	for id := range top3 {
		if id != 33 && id != 77 && id != 58 {
			t.Fatalf("top-k 3 drew token %d (logit %g) outside the three largest", id, logits[id])
		}
	}
}

func TestSamplerTopPKeepsNucleus(t *testing.T) {
	logits := []float32{10, 9.5, 0, 0, 0}
	s, _ := NewSampler(SamplerConfig{Temp: 1, TopP: 0.5, RepeatPenalty: 1, Seed: 3})
	for i := 0; i < 100; i++ {
		if id := s.Sample(logits, nil); id != 0 {
			t.Fatalf("top-p 0.5 should keep only token 0 (p≈0.62), drew %d", id)
		}
	}
}

func TestSamplerConfigValidation(t *testing.T) {
	bad := map[string]SamplerConfig{
		"negative temp": {Temp: -1, TopP: 1, RepeatPenalty: 1},
		"top-p zero":    {Temp: 1, TopP: 0, RepeatPenalty: 1},
		"top-p > 1":     {Temp: 1, TopP: 1.5, RepeatPenalty: 1},
		"negative k":    {Temp: 1, TopK: -1, TopP: 1, RepeatPenalty: 1},
		"zero penalty":  {Temp: 1, TopP: 1, RepeatPenalty: 0},
	}
	for name, c := range bad {
		if _, err := NewSampler(c); err == nil {
			t.Errorf("%s: NewSampler accepted %+v", name, c)
		}
	}
}

// sampleRef is Sample as it was before its top-k selection and greedy
// shortcut: every candidate sorted (stable, by descending logit), then cut.
func sampleRef(c SamplerConfig, rng *rand.Rand, logits []float32, history []int32) int32 {
	cand := make([]candidate, len(logits))
	for i, l := range logits {
		cand[i] = candidate{id: int32(i), logit: l}
	}
	if c.RepeatPenalty != 1 && c.RepeatLastN > 0 {
		seen := map[int32]bool{}
		for i := max(0, len(history)-c.RepeatLastN); i < len(history); i++ {
			t := history[i]
			if t < 0 || int(t) >= len(cand) || seen[t] {
				continue
			}
			seen[t] = true
			if l := cand[t].logit; l > 0 {
				cand[t].logit = l / c.RepeatPenalty
			} else {
				cand[t].logit = l * c.RepeatPenalty
			}
		}
	}
	if c.Temp <= 0 {
		best := 0
		for i := range cand {
			if cand[i].logit > cand[best].logit {
				best = i
			}
		}
		return cand[best].id
	}
	sort.SliceStable(cand, func(i, j int) bool { return cand[i].logit > cand[j].logit })
	if c.TopK > 0 && c.TopK < len(cand) {
		cand = cand[:c.TopK]
	}
	softmax(cand, 1)
	if c.TopP < 1 {
		var cum float32
		for i := range cand {
			cum += cand[i].p
			if cum >= c.TopP {
				cand = cand[:i+1]
				break
			}
		}
	}
	softmax(cand, c.Temp)
	r := rng.Float32()
	var cum float32
	for _, x := range cand {
		cum += x.p
		if r < cum {
			return x.id
		}
	}
	return cand[len(cand)-1].id
}

// TestSampleMatchesFullSort checks that Sample picks what sorting every
// candidate picks, token for token over the same random draws, on logits
// with many ties (few distinct values, signed zeros), with and without a
// repeat penalty, top-k, top-p and temperature, and with a NaN.
func TestSampleMatchesFullSort(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for ci, c := range []SamplerConfig{
		{Temp: 0.8, TopK: 40, TopP: 0.95, RepeatPenalty: 1, RepeatLastN: 64, Seed: 3},
		{Temp: 1.5, TopK: 5, TopP: 1, RepeatPenalty: 1.1, RepeatLastN: 64, Seed: 4},
		{Temp: 0.7, TopK: 1, TopP: 0.5, RepeatPenalty: 1, Seed: 5},
		{Temp: 1, TopK: 0, TopP: 0.9, RepeatPenalty: 1.3, RepeatLastN: 8, Seed: 6},
		{Temp: 0, TopP: 1, RepeatPenalty: 1, Seed: 7},
		{Temp: 0, TopP: 1, RepeatPenalty: 1.2, RepeatLastN: 16, Seed: 8},
		{Temp: 0.9, TopK: 999, TopP: 0.99, RepeatPenalty: 1, Seed: 9},
	} {
		s, err := NewSampler(c)
		if err != nil {
			t.Fatal(err)
		}
		ref := rand.New(rand.NewPCG(c.Seed, c.Seed^0x9e3779b97f4a7c15))
		var history []int32
		for step := range 120 {
			n := []int{1000, 32000, 7}[step%3]
			logits := make([]float32, n)
			for i := range logits {
				logits[i] = float32(r.IntN(24)-12) / 4 // many ties
			}
			logits[r.IntN(n)] = float32(math.Copysign(0, -1))
			if step == 90 {
				logits[r.IntN(n)] = float32(math.NaN())
			}
			want := sampleRef(c, ref, logits, history)
			got := s.Sample(logits, history)
			if got != want {
				t.Fatalf("config %d, step %d: Sample %d, the full sort %d", ci, step, got, want)
			}
			history = append(history, got)
		}
	}
}

// topPicks is devices.TopKer's definition: the m largest of logits,
// largest first and equal ones by lower index.
func topPicks(logits []float32, m int) []devices.Pick {
	idx := make([]int, len(logits))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return logits[idx[a]] > logits[idx[b]] })
	p := make([]devices.Pick, m)
	for i := range p {
		p[i] = devices.Pick{Index: int32(idx[i]), Value: logits[idx[i]]}
	}
	return p
}

// TestSampleTopMatchesSample checks that SampleTop, given Needs picks or
// more, picks what Sample picks from the whole row, draw for draw, over
// logits with many ties and with the repeat penalty on tokens among the
// best; and that Needs asks for the whole row where the picks cannot do.
func TestSampleTopMatchesSample(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	for ci, c := range []SamplerConfig{
		{Temp: 0.8, TopK: 40, TopP: 0.95, RepeatPenalty: 1, RepeatLastN: 64, Seed: 3},
		{Temp: 1.5, TopK: 5, TopP: 1, RepeatPenalty: 1.1, RepeatLastN: 64, Seed: 4},
		{Temp: 0.7, TopK: 1, TopP: 0.5, RepeatPenalty: 1, Seed: 5},
		{Temp: 1, TopK: 3, TopP: 0.9, RepeatPenalty: 1.3, RepeatLastN: 8, Seed: 6},
		{Temp: 0, TopP: 1, RepeatPenalty: 1, Seed: 7},
		{Temp: 0, TopP: 1, RepeatPenalty: 1.2, RepeatLastN: 16, Seed: 8},
		{Temp: 0.9, TopK: 100, TopP: 0.99, RepeatPenalty: 2, RepeatLastN: 4, Seed: 9},
		{Temp: 1, TopK: 0, TopP: 0.9, RepeatPenalty: 1, Seed: 10},
		{Temp: 1, TopK: 10, TopP: 0.9, RepeatPenalty: 0.8, RepeatLastN: 8, Seed: 11},
	} {
		full, err := NewSampler(c)
		if err != nil {
			t.Fatal(err)
		}
		top, _ := NewSampler(c)
		var history []int32
		for step := range 150 {
			n := []int{1000, 32000, 300}[step%3]
			logits := make([]float32, n)
			for i := range logits {
				logits[i] = float32(r.IntN(24)-12) / 4 // many ties
			}
			logits[r.IntN(n)] = float32(math.Copysign(0, -1))
			want := full.Sample(logits, history)
			m := top.Needs(history)
			wantAll := c.TopK == 0 && c.Temp > 0 || c.RepeatPenalty < 1 && c.RepeatLastN > 0
			if (m == 0) != wantAll {
				t.Fatalf("config %d: Needs %d", ci, m)
			}
			var got int32
			if m == 0 || m > n {
				got = top.Sample(logits, history)
			} else {
				m = min(n, m+r.IntN(3)) // a batched step's picks suit its most needing row
				got = top.SampleTop(topPicks(logits, m), history)
			}
			if got != want {
				t.Fatalf("config %d, step %d: SampleTop of %d picks %d, Sample %d", ci, step, m, got, want)
			}
			// Tokens among the best, so that the penalty moves them.
			if step%2 == 0 {
				got = topPicks(logits, 5)[r.IntN(5)].Index
			}
			history = append(history, got)
		}
	}
}

// BenchmarkSample times one pick from a vocabulary of 32000 with
// llama.cpp's default sampling (top-k 40, top-p 0.95, temperature 0.8),
// greedily, and with top-p alone (every candidate sorted), against the
// reflective stable sort of every candidate (sampleRef).
func BenchmarkSample(b *testing.B) {
	r := rand.New(rand.NewPCG(43, 44))
	logits := make([]float32, 32000)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 3)
	}
	for _, c := range []struct {
		name string
		cfg  SamplerConfig
	}{{"default", DefaultSampler()}, {"greedy", SamplerConfig{TopP: 1, RepeatPenalty: 1}},
		{"top-p-only", SamplerConfig{Temp: 0.8, TopP: 0.95, RepeatPenalty: 1}}} {
		b.Run(c.name, func(b *testing.B) {
			s, _ := NewSampler(c.cfg)
			for b.Loop() {
				s.Sample(logits, nil)
			}
		})
		b.Run(c.name+"/full-sort", func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			for b.Loop() {
				sampleRef(c.cfg, rng, logits, nil)
			}
		})
	}
}

// TestSampleExp checks the sampler's own e^x against math.Exp: within two
// ulps (each is within an ulp of e^x; on amd64 math.Exp is assembly of
// another method) over the range a softmax uses and past it both ways,
// exact where
// e^x is exact (0, where it is 1), 0 below -708 and the special values.
func TestSampleExp(t *testing.T) {
	ulps := func(a, b float64) int64 {
		d := int64(math.Float64bits(a)) - int64(math.Float64bits(b))
		if d < 0 {
			d = -d
		}
		return d
	}
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(x float64) {
		got, want := sampleExp(x), math.Exp(x)
		if x < -708 {
			want = 0
		}
		if ulps(got, want) > 2 {
			t.Fatalf("sampleExp(%v) = %v, math.Exp %v (%d ulps)", x, got, want, ulps(got, want))
		}
	}
	for i := 0; i < 200000; i++ {
		check(-rng.Float64() * 40)  // logit gaps over a temperature
		check(-rng.Float64() * 750) // down past the cut at -708
		check(rng.Float64()*1400 - 700)
		check(float64(-rng.Float32() * 1e-6))
	}
	for _, x := range []float64{0, -0.5, -1, -708, -707.9999, -709, -1e-9, 1e-9, 709, math.Ln2, -math.Ln2} {
		check(x)
	}
	if sampleExp(0) != 1 || sampleExp(math.Inf(-1)) != 0 || !math.IsInf(sampleExp(math.Inf(1)), 1) || !math.IsInf(sampleExp(710), 1) ||
		!math.IsNaN(sampleExp(math.NaN())) {
		t.Fatalf("special values: %v %v %v %v %v", sampleExp(0), sampleExp(math.Inf(-1)), sampleExp(math.Inf(1)), sampleExp(710), sampleExp(math.NaN()))
	}
}

// TestSamplerUndraw checks that draws given back are the next ones drawn,
// oldest first and ahead of any given back before them, and then the
// generator's, so that picks whose draws were handed out and not used
// take them in order.
func TestSamplerUndraw(t *testing.T) {
	a, err := NewSampler(DefaultSampler())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSampler(DefaultSampler())
	var want []float32
	for range 8 {
		want = append(want, b.draw())
	}
	d := []float32{a.draw(), a.draw(), a.draw(), a.draw(), a.draw()}
	a.undraw(d[3:])
	a.undraw(d[1:3])
	got := []float32{d[0]}
	for range 7 {
		got = append(got, a.draw())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("draws %v, want %v", got, want)
	}
}
