//go:build cuda

package runtime

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"hybrid/devices"
)

// TestCUDAPipelinedPrefill checks a prompt pipelined across two GPUs (the
// embedding and the first half of the blocks on cuda:0, the rest on
// cuda:1, each GPU computing one micro-batch while the other computes the
// one before): its logits, and those of the greedy decode steps after it,
// equal bit for bit those of the same micro-batches run on one GPU, twice
// (the second time from captured graphs), so that the overlap reads
// nothing early or late. The model is stories260K, or HYBRID_BENCH_MODEL
// (TinyLlama: steps long enough for the GPUs to overlap); the prefill
// times are logged.
func TestCUDAPipelinedPrefill(t *testing.T) {
	devs := openGPUs(t)
	if len(devs) < 2 {
		t.Skipf("skipping: %d GPU", len(devs))
	}
	// One model a run: a device keeps the weights it loaded by name.
	m, err := LoadModel(os.Getenv("HYBRID_BENCH_MODEL"), nil) // "": stories260K
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const ub, gen = 128, 8
	ctx := min(m.Config.Context, 600)
	r := rand.New(rand.NewPCG(7, 1))
	prompt := make([]int32, ctx-gen-8)
	for i := range prompt {
		prompt[i] = int32(1 + r.IntN(m.Config.Vocab-1))
	}
	g1, err := m.Graph(1, 0, ctx)
	if err != nil {
		t.Fatal(err)
	}
	// run prefills the prompt twice and decodes after each; it returns
	// every step's logits and the prefills' times.
	run := func(devs []devices.Device, opts Options) ([][]float32, []time.Duration) {
		t.Helper()
		ex, err := NewPlanExecutor(m, devs, ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if want := len(devs) > 1; ex.pipeline != want {
			t.Fatalf("%d GPUs: pipeline %v, want %v", len(devs), ex.pipeline, want)
		}
		var out [][]float32
		var took []time.Duration
		for range 2 {
			t0 := time.Now()
			l, err := ex.Prefill(prompt, 0)
			if err != nil {
				t.Fatal(err)
			}
			took = append(took, time.Since(t0))
			out = append(out, append([]float32(nil), l...))
			for pos := len(prompt); pos < len(prompt)+gen; pos++ {
				if l, err = ex.Forward([]int32{int32(Greedy(l))}, pos); err != nil {
					t.Fatal(err)
				}
				out = append(out, append([]float32(nil), l...))
			}
		}
		return out, took
	}
	one, oneT := run(devs[:1], Options{MicroBatch: ub})
	two, twoT := run(devs[:2], Options{Placement: halves(g1, devs[0].Name(), devs[1].Name(), false), MicroBatch: ub})
	for s := range one {
		for i := range one[s] {
			if math.Float32bits(one[s][i]) != math.Float32bits(two[s][i]) {
				t.Fatalf("%s, step %d (of 2 × a prompt of %d tokens then %d decode steps): logit %d on one GPU %g, pipelined on two %g",
					m.Path, s, len(prompt), gen, i, one[s][i], two[s][i])
			}
		}
	}
	t.Logf("%s: a prompt of %d tokens in micro-batches of %d: one GPU %v then %v, two GPUs pipelined %v then %v", m.Path, len(prompt), ub, oneT[0], oneT[1], twoT[0], twoT[1])
}
