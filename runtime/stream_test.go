package runtime

import (
	"fmt"
	"math"
	"testing"

	"hybrid/models/llama"
)

// TestPrefillStreamsWeights runs stories15m on a simulated H100 capped below
// the model, so that the decode plan leaves layers on the CPU, with a
// 64-token prompt: the prefill's own plan multiplies on the GPU with some
// CPU-resident weights streamed in (planner.MakeStep), and the executor
// streams exactly those. The prefill's logits and the greedy decode steps
// after it are bit for bit cpu-only's (the simulated GPU computes what the
// CPU computes), and a decode step streams nothing.
func TestPrefillStreamsWeights(t *testing.T) {
	m := synthStories(t)
	const ctx, n, gen = 128, 64, 4
	prompt := testPrompt(m, n)
	want := runSteps(t, cpuSession(t, m, ctx), prompt, n, gen)
	s := cappedSim(t, m, ctx)
	step, err := s.PlanFor(n)
	if err != nil {
		t.Fatal(err)
	}
	planned, bytes := step.StreamedWeights()
	if planned == 0 {
		t.Fatalf("the %d-token prefill streams no weight: %v", n, step.Placement())
	}
	caches, _ := step.StreamedCaches()
	got := runSteps(t, s, prompt, n, gen)
	if st := s.Exec.Stats.Streams; st.Count != planned || st.Bytes != bytes {
		t.Errorf("streamed %d weights, %d bytes; the plan %d, %d bytes", st.Count, st.Bytes, planned, bytes)
	}
	if st := s.Exec.Stats.KVStreams; st.Count != caches {
		t.Errorf("streamed %d KV caches; the plan %d", st.Count, caches)
	}
	sameLogits(t, got, want)
	s.Exec.ResetStats()
	if _, err := s.Exec.Forward([]int32{1}, n+gen); err != nil {
		t.Fatal(err)
	}
	if st := s.Exec.Stats; st.Streams.Count != 0 || st.KVStreams.Count != 0 {
		t.Errorf("a decode step streamed %d weights and %d caches", st.Streams.Count, st.KVStreams.Count)
	}
	t.Logf("decode %v; the %d-token prefill %v with %d weights (%d bytes) and %d caches streamed, predicted %v", s.Plan.Placement(), n, step.Placement(), planned, bytes, caches, step.Predicted)
}

// TestPromptStreamsKVCache runs a prompt in two steps on the capped
// simulated H100: the host's layers attend on the GPU over caches streamed
// for each step, the second step's after the cells of the first were
// copied in (planned at its depth), and every logit of both steps and the
// greedy decode after them is cpu-only's bit for bit: the cells copied back
// are those the host would have written.
func TestPromptStreamsKVCache(t *testing.T) {
	m := synthStories(t)
	const ctx, n, gen, first = 256, 192, 4, 64
	prompt := testPrompt(m, n)
	want := runSteps(t, cpuSession(t, m, ctx), prompt, first, gen)
	s := cappedSim(t, m, ctx)
	got := runSteps(t, s, prompt, first, gen)
	sameLogits(t, got, want)
	st := s.Exec.Stats.KVStreams
	if st.Count == 0 {
		t.Fatal("no KV cache was streamed")
	}
	// Each streamed layer: its first step's cells back; its second step's
	// cells before it in, and its own back.
	layers := s.Exec.steps[stepKey{n: n - first, past: pastBucket(first, n-first, ctx)}].streamedCaches()
	if layers == 0 {
		t.Fatalf("the second step streams no cache")
	}
	c := m.Config
	cell := int64(2 * 2 * c.KVHeads * c.HeadDim)
	if want := int64(layers) * cell * int64(first+first+n-first); st.Bytes < want {
		t.Errorf("streamed %d bytes of KV cells over %d copies; the second step's %d layers alone take %d", st.Bytes, st.Count, layers, want)
	}
	t.Logf("%d KV copies, %d bytes", st.Count, st.Bytes)
}

// testPrompt is n token ids spread over the vocabulary.
func testPrompt(m *llama.Model, n int) []int32 {
	prompt := make([]int32, n)
	for i := range prompt {
		prompt[i] = int32(1 + (i*37)%(m.Config.Vocab-1))
	}
	return prompt
}

// cpuSession is m on the CPU alone, closed with the test.
func cpuSession(t *testing.T, m *llama.Model, ctx int) *Session {
	t.Helper()
	s, err := NewSession(m, SessionOptions{Policy: "cpu-only", Threads: 1, Context: ctx})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// cappedSim is m on a simulated H100 capped at half of what m needs there,
// so that the decode plan leaves layers on the CPU; closed with the test.
func cappedSim(t *testing.T, m *llama.Model, ctx int) *Session {
	t.Helper()
	one, err := NewSession(m, SessionOptions{Policy: writeFile(t, t.TempDir(), "one.yaml", "devices: [cuda]\n"), Hardware: "h100-sxm", Threads: 1, Context: ctx})
	if err != nil {
		t.Fatal(err)
	}
	need := one.Plan.Memory["sim:cuda"]
	one.Close()
	pol := writeFile(t, t.TempDir(), "capped.yaml", fmt.Sprintf("memory:\n  cuda: %d\n", need/2))
	s, err := NewSession(m, SessionOptions{Policy: pol, Hardware: "h100-sxm", Threads: 1, Context: ctx})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if pl := s.Plan.Placement(); pl["sim:cuda"] == 0 || pl["sim:cpu"] == 0 {
		t.Fatalf("the decode plan does not split: %v", pl)
	}
	return s
}

// runSteps runs prompt as a step of its first tokens and one of the rest
// (one step when first is len(prompt)), then gen greedy decode steps, and
// returns each step's logits.
func runSteps(t *testing.T, s *Session, prompt []int32, first, gen int) [][]float32 {
	t.Helper()
	var out [][]float32
	var l []float32
	var err error
	for _, part := range [][2]int{{0, first}, {first, len(prompt)}} {
		if part[0] == part[1] {
			continue
		}
		if l, err = s.Exec.Forward(prompt[part[0]:part[1]], part[0]); err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]float32(nil), l...))
	}
	for pos := len(prompt); pos < len(prompt)+gen; pos++ {
		if l, err = s.Exec.Forward([]int32{int32(Greedy(l))}, pos); err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]float32(nil), l...))
	}
	return out
}

// sameLogits fails unless got is want bit for bit.
func sameLogits(t *testing.T, got, want [][]float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d steps, want %d", len(got), len(want))
	}
	for k := range want {
		for i := range want[k] {
			if math.Float32bits(got[k][i]) != math.Float32bits(want[k][i]) {
				t.Fatalf("step %d logit %d: %g, cpu-only %g", k, i, got[k][i], want[k][i])
			}
		}
	}
}
