package runtime

import (
	"fmt"
	"math"
	"testing"
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
	prompt := make([]int32, n)
	for i := range prompt {
		prompt[i] = int32(1 + (i*37)%(m.Config.Vocab-1))
	}
	run := func(s *Session) [][]float32 {
		l, err := s.Exec.Prefill(prompt, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := [][]float32{append([]float32(nil), l...)}
		for pos := n; pos < n+gen; pos++ {
			if l, err = s.Exec.Forward([]int32{int32(Greedy(l))}, pos); err != nil {
				t.Fatal(err)
			}
			out = append(out, append([]float32(nil), l...))
		}
		return out
	}
	ref, err := NewSession(m, SessionOptions{Policy: "cpu-only", Threads: 1, Context: ctx})
	if err != nil {
		t.Fatal(err)
	}
	want := run(ref)
	ref.Close()

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
	defer s.Close()
	if pl := s.Plan.Placement(); pl["sim:cuda"] == 0 || pl["sim:cpu"] == 0 {
		t.Fatalf("the decode plan does not split: %v", pl)
	}
	step, err := s.PlanFor(n)
	if err != nil {
		t.Fatal(err)
	}
	planned, bytes := step.StreamedWeights()
	if planned == 0 {
		t.Fatalf("the %d-token prefill streams no weight: %v", n, step.Placement())
	}
	got := run(s)
	if st := s.Exec.Stats.Streams; st.Count != planned || st.Bytes != bytes {
		t.Errorf("streamed %d weights, %d bytes; the plan %d, %d bytes", st.Count, st.Bytes, planned, bytes)
	}
	for k := range want {
		for i := range want[k] {
			if math.Float32bits(got[k][i]) != math.Float32bits(want[k][i]) {
				t.Fatalf("step %d logit %d: %g, cpu-only %g", k, i, got[k][i], want[k][i])
			}
		}
	}
	s.Exec.ResetStats()
	if _, err := s.Exec.Forward([]int32{1}, n+gen); err != nil {
		t.Fatal(err)
	}
	if c := s.Exec.Stats.Streams.Count; c != 0 {
		t.Errorf("a decode step streamed %d weights", c)
	}
	t.Logf("decode %v; the %d-token prefill %v with %d weights (%d bytes) streamed, predicted %v", s.Plan.Placement(), n, step.Placement(), planned, bytes, step.Predicted)
}
