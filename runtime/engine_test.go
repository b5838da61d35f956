package runtime

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"hybrid/devices/cpu"
)

func testEngine(t *testing.T, o EngineOptions) (*Engine, *Executor) {
	t.Helper()
	m := builtinModel(t)
	x, err := NewExecutor(m, cpu.New("cpu", 1), 256)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine(x, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e, x
}

// TestEngineGreedyMatchesGenerate checks that a request through the engine
// gives the tokens Executor.Generate gives, twice in a row (the second
// reuses the slot).
func TestEngineGreedyMatchesGenerate(t *testing.T) {
	m := builtinModel(t)
	ref, err := NewExecutor(m, cpu.New("cpu", 1), 256)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Generate(GenerateOptions{Prompt: "Once upon a time", MaxTokens: 24, Sampler: SamplerConfig{TopP: 1, RepeatPenalty: 1}})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := testEngine(t, EngineOptions{Slots: 1, Queue: 4})
	for round := range 2 {
		var got []int32
		fin, err := e.Generate(context.Background(), Request{Prompt: want.PromptTokens, MaxTokens: 24, Sampler: SamplerConfig{TopP: 1, RepeatPenalty: 1}},
			func(id int32) bool { got = append(got, id); return true })
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want.Tokens) {
			t.Fatalf("round %d: engine gave %v, Generate %v", round, got, want.Tokens)
		}
		wantReason := map[string]string{"length": FinishLength, "eos": FinishStop, "context": FinishContext}[want.StopReason]
		if fin.Reason != wantReason || fin.Tokens != len(got) || fin.PromptTokens != len(want.PromptTokens) {
			t.Fatalf("round %d: finish %+v, want reason %s, %d tokens", round, fin, wantReason, len(got))
		}
	}
}

// TestEngineCancelAndBusy checks that emit returning false ends a
// generation at once, that a full queue refuses at once, and that a closed
// engine refuses.
func TestEngineCancelAndBusy(t *testing.T) {
	e, x := testEngine(t, EngineOptions{Slots: 1, Queue: 0})
	prompt := x.m.Tokenizer.Encode("Once upon a time", true)
	fin, err := e.Generate(context.Background(), Request{Prompt: prompt, Sampler: SamplerConfig{TopP: 1, RepeatPenalty: 1}},
		func(id int32) bool { return false })
	if err != nil || fin.Reason != FinishCancelled || fin.Tokens != 0 {
		t.Fatalf("cancelled at the first token: %+v, %v", fin, err)
	}
	// Hold the only slot with a request whose emit blocks.
	hold, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := e.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 4, Sampler: SamplerConfig{TopP: 1, RepeatPenalty: 1}},
			func(id int32) bool { close(hold); <-release; return false })
		done <- err
	}()
	<-hold
	// The request holds its place until its Generate returns, though its
	// four tokens may all be made by now: the next is refused.
	if _, err := e.Generate(context.Background(), Request{Prompt: prompt, Sampler: SamplerConfig{TopP: 1, RepeatPenalty: 1}}, func(int32) bool { return true }); !errors.Is(err, ErrBusy) {
		t.Fatalf("full queue: %v, want ErrBusy", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A caller whose context ends while it runs gets FinishCancelled.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	fin, err = e.Generate(ctx, Request{Prompt: prompt, Sampler: SamplerConfig{TopP: 1, RepeatPenalty: 1}}, func(int32) bool { time.Sleep(5 * time.Millisecond); return true })
	if err != nil || (fin.Reason != FinishCancelled && fin.Reason != FinishStop && fin.Reason != FinishContext) {
		t.Fatalf("context ended: %+v, %v", fin, err)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Generate(context.Background(), Request{Prompt: prompt}, func(int32) bool { return true }); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}

// TestEngineSlotsMatchSingleRuns runs eight requests at once on four and on
// eight slots (batched decode steps, requests joining as others leave) and
// checks each one's greedy tokens against a run of its prompt alone; then
// that a request that continues an earlier one reuses its cached prompt.
func TestEngineSlotsMatchSingleRuns(t *testing.T) {
	m := builtinModel(t)
	prompts := []string{"Once upon a time", "The cat", "Lily and Tom went to the park. They", "One day", "Tim had a big red ball", "The sun was", "A little girl", "Mom said"}
	greedy := SamplerConfig{TopP: 1, RepeatPenalty: 1}
	ref, err := NewExecutor(m, cpu.New("cpu", 1), 256)
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]int32, len(prompts))
	for i, p := range prompts {
		r, err := ref.Generate(GenerateOptions{Prompt: p, MaxTokens: 12 + 5*i, Sampler: greedy})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = r.Tokens
	}
	for _, slots := range []int{4, 8} {
		x, err := NewExecutor(m, cpu.New("cpu", 2), 256*slots)
		if err != nil {
			t.Fatal(err)
		}
		e, err := NewEngine(x, EngineOptions{Slots: slots, Queue: 8})
		if err != nil {
			t.Fatal(err)
		}
		if e.Context() != 256 {
			t.Fatalf("slot context %d, want 256", e.Context())
		}
		got := make([][]int32, len(prompts))
		errs := make(chan error, len(prompts))
		for i, p := range prompts {
			go func() {
				_, err := e.Generate(context.Background(), Request{Prompt: m.Tokenizer.Encode(p, true), MaxTokens: 12 + 5*i, Sampler: greedy},
					func(id int32) bool { got[i] = append(got[i], id); return true })
				errs <- err
			}()
		}
		for range prompts {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		for i := range prompts {
			if !slices.Equal(got[i], want[i]) {
				t.Errorf("%d slots, prompt %q: %v, alone %v", slots, prompts[i], got[i], want[i])
			}
		}
		if x.Stats.Steps >= len(prompts)*(12+5*len(prompts)) {
			t.Errorf("%d slots: %d steps for %d requests: decode steps were not shared", slots, x.Stats.Steps, len(prompts))
		}
		// The same conversation one turn on: its prompt starts with what a
		// slot's cache holds.
		first := m.Tokenizer.Encode("Once upon a time", true)
		var out []int32
		if _, err := e.Generate(context.Background(), Request{Prompt: first, MaxTokens: 8, Sampler: greedy}, func(id int32) bool { out = append(out, id); return true }); err != nil {
			t.Fatal(err)
		}
		next := append(append(slices.Clone(first), out[:7]...), m.Tokenizer.Encode(" The end", false)...)
		fin, err := e.Generate(context.Background(), Request{Prompt: next, MaxTokens: 4, Sampler: greedy}, func(int32) bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		if fin.Cached != len(first)+7 {
			t.Errorf("%d slots: %d prompt tokens reused, want %d", slots, fin.Cached, len(first)+7)
		}
		// Another prompt whose start is the same for a few tokens, less
		// than half of it: prefilled whole, as in a fresh slot.
		other := append(slices.Clone(next[:3]), m.Tokenizer.Encode(" a dragon flew over the hills and the sea", false)...)
		if fin, err = e.Generate(context.Background(), Request{Prompt: other, MaxTokens: 2, Sampler: greedy}, func(int32) bool { return true }); err != nil {
			t.Fatal(err)
		}
		if fin.Cached != 0 {
			t.Errorf("%d slots: %d of %d prompt tokens reused from a slot sharing its first 3", slots, fin.Cached, len(other))
		}
		e.Close(context.Background())
	}
}

// TestSessionBatchPlansBatchedStep checks that a session for several slots
// is planned on the batched decode step (every op over the batch's rows,
// every row's logits), and that devices without steps of several sequences
// are left out with the reason.
func TestSessionBatchPlansBatchedStep(t *testing.T) {
	m := builtinModel(t)
	s, err := NewSession(m, SessionOptions{Policy: "auto", Hardware: "h100-sxm", Threads: 1, Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g := s.Plan.Graph
	if g.Tokens != 4 {
		t.Fatalf("planned a step of %d tokens, want the batch of 4", g.Tokens)
	}
	if got := g.Values[g.Output].Elems(); got != 4*m.Config.Vocab {
		t.Fatalf("the planned step's logits have %d elements, want 4 rows of %d", got, m.Config.Vocab)
	}
	for _, d := range s.Devices {
		if !d.Info().Sequences {
			t.Fatalf("%s takes part in a batched plan but does not run such steps", d.Name())
		}
	}
	found := false
	for _, mi := range s.Missing {
		if mi.Kind == "cuda" && strings.Contains(mi.Why, "several sequences") {
			found = true
		}
	}
	if !found {
		t.Fatalf("the simulated GPU is not listed as missing with its reason: %+v", s.Missing)
	}
}
