package runtime

import (
	"context"
	"errors"
	"slices"
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
	// The slot is taken and the queue holds no one: the next is refused.
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
