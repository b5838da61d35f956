//go:build cuda

package runtime

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"hybrid/devices"
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
	prompt := m.Tokenizer.Encode("Once upon a time", true)
	run := func(chained bool) []int32 {
		e, err := NewPlanExecutor(m, devs[:1], ctx, Options{})
		if err != nil {
			t.Fatal(err)
		}
		logits, err := e.Prefill(prompt, 0)
		if err != nil {
			t.Fatal(err)
		}
		g, err := e.newStepChain()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := devs[0].(devices.Chainer); !ok || g.ch == nil {
			t.Fatalf("the GPU step is not chained (%T)", devs[0])
		}
		toks := []int32{Greedy(logits)}
		for s := range steps {
			pos := len(prompt) + s
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
			pos := len(prompt) + steps
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
	defer func(d int) { chainDepth = d }(chainDepth)
	for _, depth := range []int{2, 4, devices.MaxChained} {
		chainDepth = depth
		if got := run(true); !slices.Equal(got, want) {
			t.Fatalf("depth %d: chained greedy tokens %v, waiting steps' %v", depth, got, want)
		}
	}
	t.Logf("%d greedy tokens chained as waited for, %d, %d and %d steps queued at most", len(want), 2, 4, devices.MaxChained)
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
