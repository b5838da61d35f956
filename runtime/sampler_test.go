package runtime

import (
	"math"
	"testing"
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
