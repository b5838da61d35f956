//go:build cuda

package runtime

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"hybrid/devices"
	"hybrid/models/llama"
)

// TestCUDAGreedyChain checks the chained greedy decode on the GPU (each
// step queued before the pick it takes as its token is read back, the pick
// and the next position written by argmax_next) against steps that each
// wait for the pick before (ForwardGreedy): the same tokens, with 2, 4 and 8
// steps queued at most, then a step the caller takes another token for.
// The model is stories260K, or HYBRID_BENCH_MODEL.
func TestCUDAGreedyChain(t *testing.T) {
	devs := openGPUs(t)
	m, err := LoadModel(os.Getenv("HYBRID_BENCH_MODEL"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const ctx, steps = 256, 100
	run := func(chained bool) []int32 {
		e, g, n, first := chainedOnGPU(t, m, devs[0], ctx)
		toks := []int32{first}
		for s := range steps {
			pos := n + s
			var id int32
			if chained {
				id, err = g.step(toks[s], pos, steps-1-s, nil)
			} else {
				id, err = e.ForwardGreedy(toks[s:s+1], pos)
			}
			if err != nil {
				t.Fatal(err)
			}
			toks = append(toks, id)
		}
		if err := g.close(); err != nil {
			t.Fatal(err)
		}
		if chained {
			// A caller that takes another token: its own step.
			pos := n + steps
			other := (toks[steps] + 1) % int32(m.Config.Vocab)
			a, err := g.step(toks[steps], pos, ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := g.step(other, pos+1, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.close(); err != nil {
				t.Fatal(err)
			}
			wa, err := e.ForwardGreedy([]int32{toks[steps]}, pos)
			if err != nil {
				t.Fatal(err)
			}
			wb, err := e.ForwardGreedy([]int32{other}, pos+1)
			if err != nil {
				t.Fatal(err)
			}
			if a != wa || b != wb {
				t.Fatalf("chained picks %d, %d after another token; waiting steps pick %d, %d", a, b, wa, wb)
			}
		}
		return toks
	}
	want := run(false)
	defer func(d int, g bool) { chainDepth, chainGrow = d, g }(chainDepth, chainGrow)
	chainGrow = false // the depths set, not grown (TestChainGrows)
	for _, depth := range []int{2, 4, devices.MaxChained} {
		chainDepth = depth
		if got := run(true); !slices.Equal(got, want) {
			t.Fatalf("depth %d: chained greedy tokens %v, waiting steps' %v", depth, got, want)
		}
	}
	t.Logf("%d greedy tokens chained as waited for, %d, %d and %d steps queued at most", len(want), 2, 4, devices.MaxChained)
}

// chainedOnGPU returns an executor of m on dev with a context of ctx that
// has taken the prompt "Once upon a time", its step chain, the prompt's
// length and its logits' greedy pick; it fails unless the step is chained.
func chainedOnGPU(t *testing.T, m *llama.Model, dev devices.Device, ctx int) (*Executor, *stepChain, int, int32) {
	t.Helper()
	e, err := NewPlanExecutor(m, []devices.Device{dev}, ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	prompt := m.Tokenizer.Encode("Once upon a time", true)
	logits, err := e.Prefill(prompt, 0)
	if err != nil {
		t.Fatal(err)
	}
	g, err := e.newStepChain()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := dev.(devices.Chainer); !ok || g.ch == nil {
		t.Fatalf("the GPU step is not chained (%T)", dev)
	}
	return e, g, len(prompt), Greedy(logits)
}

// TestCUDAChainTimesSteps checks the GPU's times of its picks
// (devices.PickTimer), from which a chain grows: over 100 chained greedy
// steps, the shortest gap between two picks is positive, at least 5 µs (a
// step is dozens of launches), and no longer than the host's wall time a
// step (the gaps lie inside it); the depth is the one grownDepth gives it.
// The model is stories260K, or HYBRID_BENCH_MODEL.
func TestCUDAChainTimesSteps(t *testing.T) {
	devs := openGPUs(t)
	m, err := LoadModel(os.Getenv("HYBRID_BENCH_MODEL"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	defer func(d int, g bool) { chainDepth, chainGrow = d, g }(chainDepth, chainGrow)
	chainDepth, chainGrow = defaultChain, true
	const ctx, steps = 256, 100
	_, g, n, tok := chainedOnGPU(t, m, devs[0], ctx)
	if g.pt == nil {
		t.Fatalf("the GPU (%T) does not time its picks", devs[0])
	}
	t0 := time.Now()
	for s := range steps {
		var err error
		if tok, err = g.step(tok, n+s, steps-1-s, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.close(); err != nil {
		t.Fatal(err)
	}
	wall := time.Since(t0) / steps
	if g.stepT < 5*time.Microsecond || g.stepT > wall {
		t.Fatalf("shortest gap between two picks %v; the host's time a step %v", g.stepT, wall)
	}
	if want := grownDepth(defaultChain, g.stepT); g.depth != want {
		t.Fatalf("depth %d after steps of %v, grownDepth gives %d", g.depth, g.stepT, want)
	}
	t.Logf("steps of %v on the device (%v a step on the host), depth %d", g.stepT, wall, g.depth)
}

// BenchmarkCUDAChainHostWork measures how a greedy decode's speed depends
// on the host: each step the caller first spends work µs of host time (a
// busy loop, standing in for a slower host's share of the step: queueing
// the ops, reading the pick, the caller's own work), then takes the step
// chained (queued before the pick before it is read) or waiting
// (ForwardGreedy). It reports tokens a second. The model is stories260K, or
// HYBRID_BENCH_MODEL.
func BenchmarkCUDAChainHostWork(b *testing.B) {
	devs := openGPUs(b)
	m, err := LoadModel(os.Getenv("HYBRID_BENCH_MODEL"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	const ctx, steps = 512, 128
	prompt := m.Tokenizer.Encode("Once upon a time", true)
	for _, work := range []time.Duration{0, 100 * time.Microsecond, 200 * time.Microsecond, 400 * time.Microsecond} {
		for _, chained := range []bool{false, true} {
			mode := map[bool]string{false: "waiting", true: "chained"}[chained]
			b.Run(fmt.Sprintf("work=%dus/%s", work.Microseconds(), mode), func(b *testing.B) {
				e, err := NewPlanExecutor(m, devs[:1], ctx, Options{})
				if err != nil {
					b.Fatal(err)
				}
				logits, err := e.Prefill(prompt, 0)
				if err != nil {
					b.Fatal(err)
				}
				first := Greedy(logits)
				var took time.Duration
				for range b.N {
					g, err := e.newStepChain()
					if err != nil {
						b.Fatal(err)
					}
					tok := first
					t0 := time.Now()
					for s := range steps {
						for w0 := time.Now(); time.Since(w0) < work; {
						}
						pos := len(prompt) + s
						if chained {
							tok, err = g.step(tok, pos, steps-1-s, nil)
						} else {
							tok, err = e.ForwardGreedy([]int32{tok}, pos)
						}
						if err != nil {
							b.Fatal(err)
						}
					}
					took += time.Since(t0)
					if err := g.close(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(steps*b.N)/took.Seconds(), "tok/s")
			})
		}
	}
}

// TestCUDASampleNext checks the GPU's sampled pick (sample_next through
// SampleNext) against the host sampler's over the whole row with the same
// draw (Sampler.Sample), pick for pick: rows of random logits, of a few
// distinct values (ties, signed zeros), of one far above the rest, with
// -Inf in place of most or all, shorter than top-k, over temperatures,
// top-k and top-p from their extremes to llama.cpp's defaults, and draws
// at 0 and just under 1; a row holding a NaN gets -1. Then Generate with
// sampled picks chained gives the tokens of steps that each wait for their
// picks (chainDepth 0) on the model, stories260K or HYBRID_BENCH_MODEL.
func TestCUDASampleNext(t *testing.T) {
	devs := openGPUs(t)
	sc, ok := devs[0].(devices.SampleChainer)
	if !ok {
		t.Fatalf("%T makes no sampled picks", devs[0])
	}
	const n = 32000
	buf, err := devs[0].Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer devs[0].Free(buf)
	rng := rand.New(rand.NewPCG(5, 6))
	kinds := map[string]func() []float32{
		"normal": func() []float32 {
			r := make([]float32, n)
			for i := range r {
				r[i] = float32(rng.NormFloat64() * 3)
			}
			return r
		},
		"ties": func() []float32 {
			r := make([]float32, n)
			for i := range r {
				r[i] = []float32{2, 1, 0, float32(math.Copysign(0, -1)), -3}[rng.IntN(5)]
			}
			return r
		},
		"peaked": func() []float32 {
			r := make([]float32, n)
			for i := range r {
				r[i] = float32(rng.NormFloat64())
			}
			r[rng.IntN(n)] = 25
			return r
		},
		"mostly -Inf": func() []float32 {
			r := make([]float32, n)
			for i := range r {
				r[i] = float32(math.Inf(-1))
			}
			for range 5 {
				r[rng.IntN(n)] = float32(rng.NormFloat64())
			}
			return r
		},
		"all -Inf": func() []float32 {
			r := make([]float32, n)
			for i := range r {
				r[i] = float32(math.Inf(-1))
			}
			return r
		},
		"short": func() []float32 {
			r := make([]float32, 10)
			for i := range r {
				r[i] = float32(rng.NormFloat64() * 2)
			}
			return r
		},
	}
	cfgs := []SamplerConfig{
		DefaultSampler(),
		{Temp: 0.05, TopK: devices.MaxPicks, TopP: 1},
		{Temp: 2.5, TopK: 1, TopP: 0.5},
		{Temp: 1, TopK: devices.MaxPicks, TopP: 0.999},
		{Temp: 0.3, TopK: 7, TopP: 0.2},
		{Temp: 100, TopK: 100, TopP: 1},
	}
	picks := 0
	for name, kind := range kinds {
		for range 3 {
			row := kind()
			if err := devs[0].Write(buf, row); err != nil {
				t.Fatal(err)
			}
			for _, c := range cfgs {
				c.RepeatPenalty = 1
				draws := []float32{0, math.Nextafter32(1, 0)}
				for range 10 {
					draws = append(draws, rng.Float32())
				}
				for _, r := range draws {
					s, err := NewSampler(c)
					if err != nil {
						t.Fatal(err)
					}
					s.back = []float32{r}
					want := s.Sample(row, nil)
					if err := sc.SampleNext(buf, len(row), devices.SampleSpec{K: c.TopK, TopP: c.TopP, Temp: c.Temp, Draw: r}); err != nil {
						t.Fatal(err)
					}
					got, err := sc.NextPick()
					if err != nil {
						t.Fatal(err)
					}
					if got != want {
						t.Fatalf("%s row, %+v, draw %v: the GPU picks %d, the host %d", name, c, r, got, want)
					}
					picks++
				}
			}
		}
	}
	row := kinds["normal"]()
	row[1234] = float32(math.NaN())
	if err := devs[0].Write(buf, row); err != nil {
		t.Fatal(err)
	}
	if err := sc.SampleNext(buf, n, devices.SampleSpec{K: 40, TopP: 0.95, Temp: 0.8, Draw: 0.5}); err != nil {
		t.Fatal(err)
	}
	if got, err := sc.NextPick(); err != nil || got != -1 {
		t.Fatalf("a row holding a NaN: pick %d (%v), want -1", got, err)
	}
	t.Logf("%d picks equal", picks)

	m, err := LoadModel(os.Getenv("HYBRID_BENCH_MODEL"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	defer func(d int, g bool) { chainDepth, chainGrow = d, g }(chainDepth, chainGrow)
	chainGrow = false // the depths set, not grown (TestChainGrows)
	var want []int32
	for _, depth := range []int{0, 2, devices.MaxChained} {
		chainDepth = depth
		e, err := NewPlanExecutor(m, devs[:1], 512, Options{})
		if err != nil {
			t.Fatal(err)
		}
		c := DefaultSampler()
		c.Seed = 3
		r, err := e.Generate(GenerateOptions{Prompt: "Once upon a time", MaxTokens: 300, Sampler: c})
		if err != nil {
			t.Fatal(err)
		}
		if depth == 0 {
			want = r.Tokens
		} else if !slices.Equal(r.Tokens, want) {
			t.Fatalf("sampled picks chained %d deep: %v, each waited for: %v", depth, r.Tokens, want)
		}
		t.Logf("depth %d: %d tokens, %.1f tok/s", depth, len(r.Tokens), r.Timings.DecodeTokS)
	}
}
