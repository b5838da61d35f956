package runtime

import (
	"context"
	"slices"
	"sync"
	"testing"

	"hybrid/devices"
	"hybrid/devices/cpu"
	"hybrid/models/llama"
	"hybrid/ops"
)

// batcher is the CPU device taking runs of ops in one call
// (devices.Batcher), counting the calls, and checking that each run of a
// step's shape comes as the same slice, as Batcher promises.
type batcher struct {
	*cpu.Device
	runs, ops int
	seen      map[*devices.Call]int // first call -> run length
}

func (b *batcher) RunAll(st ops.Step, calls []devices.Call) error {
	b.runs++
	b.ops += len(calls)
	b.seen[&calls[0]] = len(calls)
	for _, c := range calls {
		if err := b.Run(c.Op, st, c.In, c.Out); err != nil {
			return err
		}
	}
	return nil
}

// TestBatchedRunsMatchRun checks that an executor gives a Batcher each
// step's ops in one call (the same slice for every step of a shape) with
// the logits of running them one by one, and runs them one by one when each
// op is timed (SyncEachOp).
func TestBatchedRunsMatchRun(t *testing.T) {
	m := builtinModel(t)
	plain, err := NewExecutor(m, cpu.New("cpu", 1), 64)
	if err != nil {
		t.Fatal(err)
	}
	b := &batcher{Device: cpu.New("cpu", 1), seen: map[*devices.Call]int{}}
	batched, err := NewExecutor(m, b, 64)
	if err != nil {
		t.Fatal(err)
	}
	prompt := []int32{1, 400, 22, 17}
	want, err := plain.Prefill(prompt, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := batched.Prefill(prompt, 0)
	if err != nil {
		t.Fatal(err)
	}
	const steps = 6
	for s := range steps + 1 {
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: batched logits differ from one op at a time", s)
		}
		if s == steps {
			break
		}
		tok := []int32{Greedy(want)}
		if want, err = plain.Forward(tok, len(prompt)+s); err != nil {
			t.Fatal(err)
		}
		if got, err = batched.Forward(tok, len(prompt)+s); err != nil {
			t.Fatal(err)
		}
	}
	pc, err := batched.compile(stepKey{n: len(prompt)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := batched.compile(stepKey{n: 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := len(pc.g.Ops) + steps*len(c.g.Ops); b.runs != steps+1 || b.ops != want {
		t.Fatalf("%d runs of %d ops over %d steps of %d ops: want one run a step", b.runs, b.ops, steps+1, want)
	}
	if len(b.seen) != 2 {
		t.Fatalf("runs came as %d slices, want 2 (the prompt's and the decode step's)", len(b.seen))
	}
	if n := batched.Stats.Devices["cpu"].Ops; n != b.ops {
		t.Fatalf("stats count %d ops on the device, want %d", n, b.ops)
	}
	// Timed op by op: no runs.
	batched.opts.SyncEachOp = true
	if _, err := batched.Forward([]int32{Greedy(got)}, len(prompt)+steps); err != nil {
		t.Fatal(err)
	}
	if b.runs != steps+1 {
		t.Fatalf("a step timed op by op was given as a run")
	}
}

// argmaxer is the CPU device picking a buffer's largest element itself
// (devices.Argmaxer), counting the picks.
type argmaxer struct {
	*cpu.Device
	picks int
}

func (a *argmaxer) ReadArgmax(src devices.Buffer, n int, ids []int32) error {
	a.picks += len(ids)
	x := make([]float32, n*len(ids))
	if err := a.Read(x, src); err != nil {
		return err
	}
	for r := range ids {
		row, best := x[r*n:(r+1)*n], 0
		for i := range row {
			if row[i] > row[best] {
				best = i
			}
		}
		ids[r] = int32(best)
	}
	return nil
}

// TestForwardGreedy checks that ForwardGreedy picks what Greedy picks from
// Forward's logits, on a device that picks it itself (devices.Argmaxer) and
// on one that does not, and that Generate's greedy decode and bench use it.
func TestForwardGreedy(t *testing.T) {
	m := builtinModel(t)
	plain, err := NewExecutor(m, cpu.New("cpu", 1), 64)
	if err != nil {
		t.Fatal(err)
	}
	a := &argmaxer{Device: cpu.New("cpu", 1)}
	picking, err := NewExecutor(m, a, 64)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewExecutor(m, cpu.New("cpu", 1), 64)
	if err != nil {
		t.Fatal(err)
	}
	prompt := []int32{1, 400, 22, 17}
	logits, err := plain.Prefill(prompt, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []*Executor{picking, other} {
		if _, err := e.Prefill(prompt, 0); err != nil {
			t.Fatal(err)
		}
	}
	tok := Greedy(logits)
	for s := range 8 {
		pos := len(prompt) + s
		if logits, err = plain.Forward([]int32{tok}, pos); err != nil {
			t.Fatal(err)
		}
		want := Greedy(logits)
		for i, e := range []*Executor{picking, other} {
			got, err := e.ForwardGreedy([]int32{tok}, pos)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("step %d, executor %d: ForwardGreedy %d, Greedy of Forward %d", s, i, got, want)
			}
		}
		tok = want
	}
	if a.picks != 8 {
		t.Fatalf("%d picks on the device over 8 steps", a.picks)
	}
	if _, err := picking.ForwardGreedy([]int32{tok}, 64); err == nil {
		t.Fatal("a step past the context was taken")
	}
	// Generate's greedy decode picks on the device, and gives Forward's tokens.
	want, err := plain.Generate(GenerateOptions{Prompt: "Once upon a time", MaxTokens: 12, Sampler: SamplerConfig{TopP: 1, RepeatPenalty: 1}})
	if err != nil {
		t.Fatal(err)
	}
	before := a.picks
	got, err := picking.Generate(GenerateOptions{Prompt: "Once upon a time", MaxTokens: 12, Sampler: SamplerConfig{TopP: 1, RepeatPenalty: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Tokens, want.Tokens) || a.picks-before != got.Timings.DecodedTokens || got.Timings.DecodedTokens == 0 {
		t.Fatalf("Generate: %v with %d device picks for %d decoded tokens, want %v", got.Tokens, a.picks-before, got.Timings.DecodedTokens, want.Tokens)
	}
}

// TestEngineGreedyPicksOnDevice checks that an engine's greedy decode of one
// sequence picks each token on the device that holds the logits
// (ForwardSeqGreedy), with the tokens Generate gives.
func TestEngineGreedyPicksOnDevice(t *testing.T) {
	m := builtinModel(t)
	ref, err := NewExecutor(m, cpu.New("cpu", 1), 256)
	if err != nil {
		t.Fatal(err)
	}
	sc := SamplerConfig{TopP: 1, RepeatPenalty: 1}
	want, err := ref.Generate(GenerateOptions{Prompt: "Once upon a time", MaxTokens: 16, Sampler: sc})
	if err != nil {
		t.Fatal(err)
	}
	a := &argmaxer{Device: cpu.New("cpu", 1)}
	x, err := NewExecutor(m, a, 256)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine(x, EngineOptions{Slots: 1, Queue: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	var got []int32
	if _, err := e.Generate(context.Background(), Request{Prompt: want.PromptTokens, MaxTokens: 16, Sampler: sc},
		func(id int32) bool { got = append(got, id); return true }); err != nil {
		t.Fatal(err)
	}
	// The first token comes from the prompt's logits, each later one from
	// a decode step's pick on the device.
	if !slices.Equal(got, want.Tokens) || len(got) < 2 || a.picks != len(got)-1 {
		t.Fatalf("engine gave %v with %d picks on the device, Generate %v", got, a.picks, want.Tokens)
	}
}

// prefilledRows returns an executor on each device with three short prompts
// prefilled into slots of cells cells, and the rows and tokens of their next
// batched step.
func prefilledRows(t *testing.T, m *llama.Model, cells int, devs ...devices.Device) ([]*Executor, []ops.Row, []int32) {
	prompts := [][]int32{{1, 400, 22}, {1, 17}, {1, 300, 301, 302, 5}}
	n := len(prompts)
	rows := make([]ops.Row, n)
	toks := make([]int32, n)
	var xs []*Executor
	for _, d := range devs {
		e, err := NewExecutor(m, d, n*cells)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range prompts {
			if _, err := e.PrefillSeq(p, 0, i*cells); err != nil {
				t.Fatal(err)
			}
			rows[i], toks[i] = ops.Row{Pos: len(p), Base: i * cells}, int32(5+i)
		}
		xs = append(xs, e)
	}
	return xs, rows, toks
}

// TestForwardRowsGreedy checks that a batched step's greedy picks are Greedy
// of each row of ForwardRows' logits, on a device that picks them itself
// (devices.Argmaxer) and on one that does not, and that an engine's greedy
// requests, batched or not, pick every token after the first on the device
// and give Generate's tokens.
func TestForwardRowsGreedy(t *testing.T) {
	m := builtinModel(t)
	const cells = 64
	a := &argmaxer{Device: cpu.New("cpu", 1)}
	xs, rows, toks := prefilledRows(t, m, cells, cpu.New("cpu", 1), a, cpu.New("cpu", 1))
	plain, picking, other := xs[0], xs[1], xs[2]
	n := len(rows)
	var ids []int32
	for s := range 4 {
		logits, err := plain.ForwardRows(toks, rows)
		if err != nil {
			t.Fatal(err)
		}
		v := len(logits) / n
		want := make([]int32, n)
		for i := range want {
			want[i] = Greedy(logits[i*v : (i+1)*v])
		}
		for k, e := range []*Executor{picking, other} {
			if ids, err = e.ForwardRowsGreedy(toks, rows, ids); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids, want) {
				t.Fatalf("step %d, executor %d: ForwardRowsGreedy %v, Greedy of ForwardRows' rows %v", s, k, ids, want)
			}
		}
		copy(toks, want)
		for i := range rows {
			rows[i].Pos++
		}
	}
	if a.picks != 4*n {
		t.Fatalf("%d picks on the device over 4 steps of %d rows", a.picks, n)
	}
	if _, err := picking.ForwardRowsGreedy(toks, rows[:1], nil); err == nil {
		t.Fatal("a batched step with fewer rows than tokens was taken")
	}

	// An engine of three slots, three greedy requests at once.
	sc := SamplerConfig{TopP: 1, RepeatPenalty: 1}
	x, err := NewExecutor(m, a, n*cells)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := NewEngine(x, EngineOptions{Slots: n, Queue: n})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(context.Background())
	texts := []string{"Once upon a time", "The cat", "Lily and Tom went to the park. They"}
	want := make([]*Result, len(texts))
	for i, p := range texts {
		ref, err := NewExecutor(m, cpu.New("cpu", 1), cells)
		if err != nil {
			t.Fatal(err)
		}
		if want[i], err = ref.Generate(GenerateOptions{Prompt: p, MaxTokens: 10, Sampler: sc}); err != nil {
			t.Fatal(err)
		}
	}
	got := make([][]int32, len(texts))
	errs := make([]error, len(texts))
	a.picks = 0
	var wg sync.WaitGroup
	for i := range texts {
		wg.Go(func() {
			_, errs[i] = eng.Generate(context.Background(), Request{Prompt: want[i].PromptTokens, MaxTokens: 10, Sampler: sc},
				func(id int32) bool { got[i] = append(got[i], id); return true })
		})
	}
	wg.Wait()
	picks := 0
	for i := range texts {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !slices.Equal(got[i], want[i].Tokens) {
			t.Fatalf("request %d: engine gave %v, Generate %v", i, got[i], want[i].Tokens)
		}
		picks += len(got[i]) - 1
	}
	if a.picks != picks {
		t.Fatalf("%d picks on the device for %d tokens after the first", a.picks, picks)
	}
}

// topker is the CPU device picking the largest elements of a buffer's rows
// itself (devices.TopKer, by topPicks), counting the rows picked.
type topker struct {
	*cpu.Device
	rows int
}

func (k *topker) ReadTopK(src devices.Buffer, n, m int, picks []devices.Pick) error {
	rows := len(picks) / m
	k.rows += rows
	x := make([]float32, n*rows)
	if err := k.Read(x, src); err != nil {
		return err
	}
	for r := range rows {
		copy(picks[r*m:(r+1)*m], topPicks(x[r*n:(r+1)*n], m))
	}
	return nil
}

// TestForwardTop checks that a sampled step's picks are the largest logits
// of ForwardRows' (Forward's) rows on a device that picks them itself
// (devices.TopKer), that the logits come back where it cannot or m is out
// of range, and that Generate and an engine's sampled requests, batched
// with greedy ones or not, pick every token after the first from the
// device's picks and give the tokens they give from whole rows.
func TestForwardTop(t *testing.T) {
	m := builtinModel(t)
	const cells = 64
	k := &topker{Device: cpu.New("cpu", 1)}
	xs, rows, toks := prefilledRows(t, m, cells, cpu.New("cpu", 1), k)
	plain, picking := xs[0], xs[1]
	n := len(rows)
	var picks []devices.Pick
	for s, mm := range []int{1, 40, devices.MaxPicks, 0, devices.MaxPicks + 1} {
		logits, err := plain.ForwardRows(toks, rows)
		if err != nil {
			t.Fatal(err)
		}
		v := len(logits) / n
		var got []float32
		if picks, got, err = picking.ForwardRowsTop(toks, rows, mm, picks); err != nil {
			t.Fatal(err)
		}
		if mm < 1 || mm > devices.MaxPicks {
			if picks != nil || !slices.Equal(got, logits) {
				t.Fatalf("step %d, m %d: picks %v and %d logits, want ForwardRows' logits", s, mm, picks, len(got))
			}
		} else {
			if got != nil || len(picks) != n*mm {
				t.Fatalf("step %d, m %d: %d picks and %d logits", s, mm, len(picks), len(got))
			}
			for i := range n {
				if want := topPicks(logits[i*v:(i+1)*v], mm); !slices.Equal(picks[i*mm:(i+1)*mm], want) {
					t.Fatalf("step %d, row %d: picks %v, want %v", s, i, picks[i*mm:(i+1)*mm], want)
				}
			}
		}
		for i := range rows {
			toks[i] = Greedy(logits[i*v : (i+1)*v])
			rows[i].Pos++
		}
	}
	if k.rows != 3*n {
		t.Fatalf("%d rows picked on the device over 3 steps of %d rows", k.rows, n)
	}
	if _, _, err := picking.ForwardRowsTop(toks, rows[:1], 1, nil); err == nil {
		t.Fatal("a batched step with fewer rows than tokens was taken")
	}

	// Generate's sampled decode takes the device's picks.
	sampled := []SamplerConfig{
		{Temp: 0.8, TopK: 40, TopP: 0.95, RepeatPenalty: 1.1, RepeatLastN: 64, Seed: 7},
		{Temp: 1.2, TopK: 5, TopP: 1, RepeatPenalty: 1, Seed: 8},
		{Temp: 0, TopP: 1, RepeatPenalty: 1.3, RepeatLastN: 8, Seed: 9},
		{TopP: 1, RepeatPenalty: 1},                                 // greedy
		{Temp: 0.9, TopK: 0, TopP: 0.9, Seed: 10, RepeatPenalty: 1}, // needs whole rows
	}
	texts := []string{"Once upon a time", "The cat", "Lily and Tom went to the park. They", "One day", "The dog"}
	want := make([]*Result, len(texts))
	for i, p := range texts {
		ref, err := NewExecutor(m, cpu.New("cpu", 1), cells)
		if err != nil {
			t.Fatal(err)
		}
		if want[i], err = ref.Generate(GenerateOptions{Prompt: p, MaxTokens: 12, Sampler: sampled[i]}); err != nil {
			t.Fatal(err)
		}
	}
	g, err := NewExecutor(m, k, cells)
	if err != nil {
		t.Fatal(err)
	}
	k.rows = 0
	got, err := g.Generate(GenerateOptions{Prompt: texts[0], MaxTokens: 12, Sampler: sampled[0]})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Tokens, want[0].Tokens) || k.rows != got.Timings.DecodedTokens || k.rows == 0 {
		t.Fatalf("Generate: %v with %d device picks for %d decoded tokens, want %v", got.Tokens, k.rows, got.Timings.DecodedTokens, want[0].Tokens)
	}

	// An engine of five slots: the first three sampled requests at once
	// (every step picked on the device), then all five (a greedy one
	// among them, and one that needs whole rows).
	for _, reqs := range []int{3, 5} {
		x, err := NewExecutor(m, k, len(texts)*cells)
		if err != nil {
			t.Fatal(err)
		}
		eng, err := NewEngine(x, EngineOptions{Slots: len(texts), Queue: len(texts)})
		if err != nil {
			t.Fatal(err)
		}
		out := make([][]int32, reqs)
		errs := make([]error, reqs)
		k.rows = 0
		var wg sync.WaitGroup
		for i := range reqs {
			wg.Go(func() {
				_, errs[i] = eng.Generate(context.Background(), Request{Prompt: want[i].PromptTokens, MaxTokens: 12, Sampler: sampled[i]},
					func(id int32) bool { out[i] = append(out[i], id); return true })
			})
		}
		wg.Wait()
		eng.Close(context.Background())
		later := 0
		for i := range reqs {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if !slices.Equal(out[i], want[i].Tokens) {
				t.Fatalf("%d requests, request %d: engine gave %v, Generate %v", reqs, i, out[i], want[i].Tokens)
			}
			later += len(out[i]) - 1
		}
		if reqs == 3 && k.rows != later {
			t.Fatalf("%d rows picked on the device for %d tokens after the first", k.rows, later)
		}
	}
}
