package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"hybrid/devices"
	"hybrid/devices/cpu"
	"hybrid/ops"
)

// chainer is the CPU device taking runs of ops in one call and keeping its
// greedy picks as a GPU keeps them in its memory (devices.Chainer):
// PickNext picks from the logits and keeps the pick, which its next
// chained step's Embed reads in place of the step's stand-in token;
// NextPick returns the picks oldest first.
type chainer struct {
	batcher
	queue          []int32
	kept           int32
	chained, picks int
	early          int // steps not chained run while a pick was queued
	most           int // the most picks queued at once
}

// timedChainer is a chainer that times its picks (devices.PickTimer): a
// pick's time is when PickNext made it, its step having run before.
type timedChainer struct {
	chainer
	made []time.Time // the queued picks' times, oldest first
	last time.Time   // the pick NextPick read last's (zero: none)
	gap  time.Duration
	ok   bool
}

func (c *timedChainer) PickNext(src devices.Buffer, n int) error {
	if err := c.chainer.PickNext(src, n); err != nil {
		return err
	}
	c.made = append(c.made, time.Now())
	return nil
}

func (c *timedChainer) NextPick() (int32, error) {
	id, err := c.chainer.NextPick()
	if err != nil {
		return 0, err
	}
	at := c.made[0]
	c.made = c.made[1:]
	c.gap, c.ok = at.Sub(c.last), !c.last.IsZero()
	c.last = at
	return id, nil
}

func (c *timedChainer) PickGap() (time.Duration, bool) { return c.gap, c.ok }

func (c *chainer) Chains() bool { return true }

func (c *chainer) ReadArgmax(src devices.Buffer, n int, ids []int32) error {
	return (&argmaxer{Device: c.Device}).ReadArgmax(src, n, ids)
}

func (c *chainer) PickNext(src devices.Buffer, n int) error {
	if len(c.queue) >= devices.MaxChained {
		return fmt.Errorf("a pick queued past the %d the device holds", devices.MaxChained)
	}
	var id [1]int32
	if err := c.ReadArgmax(src, n, id[:]); err != nil {
		return err
	}
	c.queue = append(c.queue, id[0])
	c.most = max(c.most, len(c.queue))
	c.kept = id[0]
	c.picks++
	return nil
}

func (c *chainer) NextPick() (int32, error) {
	if len(c.queue) == 0 {
		return 0, errors.New("no pick queued")
	}
	id := c.queue[0]
	c.queue = c.queue[1:]
	return id, nil
}

func (c *chainer) RunAll(st ops.Step, calls []devices.Call) error {
	if !st.Chained && len(c.queue) > 0 {
		c.early++
	}
	if st.Chained {
		if len(st.Tokens) != 1 || st.Rows != nil {
			return fmt.Errorf("a chained step of %d tokens", len(st.Tokens))
		}
		st.Tokens = []int32{c.kept}
		c.chained++
	}
	return c.batcher.RunAll(st, calls)
}

func (c *chainer) Run(op *ops.Op, st ops.Step, in []devices.Buffer, out devices.Buffer) error {
	if st.Chained {
		return fmt.Errorf("op %s of a chained step run alone", op)
	}
	return c.batcher.Run(op, st, in, out)
}

// generateBoth runs o on plain and on e, fails (naming what) unless both
// give the same tokens, stop reason and number of decoded tokens, and
// returns plain's result.
func generateBoth(t *testing.T, plain, e *Executor, o GenerateOptions, what string) *Result {
	t.Helper()
	want, err := plain.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Tokens, want.Tokens) || got.StopReason != want.StopReason || got.Timings.DecodedTokens != want.Timings.DecodedTokens {
		t.Fatalf("%s: chained %v (%s, %d decoded), plain %v (%s, %d)", what, got.Tokens, got.StopReason, got.Timings.DecodedTokens,
			want.Tokens, want.StopReason, want.Timings.DecodedTokens)
	}
	return want
}

// TestGreedyChain checks the greedy decode that queues each step before the
// pick it takes as its token is read back (stepChain), on a device that
// keeps its picks: Generate, stopped by its token limit and by the
// context, and bench's decode give the tokens of a device that does not
// chain, every queued pick is read, and a caller that takes another token
// than the pick gets that token's step.
func TestGreedyChain(t *testing.T) {
	m := builtinModel(t)
	const ctx = 64
	newChainer := func() (*chainer, *Executor) {
		c := &chainer{batcher: batcher{Device: cpu.New("cpu", 1), seen: map[*devices.Call]int{}}}
		e, err := NewExecutor(m, c, ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c, e
	}
	plain, err := NewExecutor(m, cpu.New("cpu", 1), ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func(d int, g bool) { chainDepth, chainGrow = d, g }(chainDepth, chainGrow)
	chainGrow = false // the depths set, not grown (TestChainGrows)
	for _, depth := range []int{2, 4, defaultChain, devices.MaxChained} {
		chainDepth = depth
		greedy := SamplerConfig{TopP: 1, RepeatPenalty: 1}
		for _, max := range []int{1, 2, 12, 200} { // 200: stopped by the context
			c, e := newChainer()
			o := GenerateOptions{Prompt: "Once upon a time", MaxTokens: max, Sampler: greedy}
			want := generateBoth(t, plain, e, o, fmt.Sprintf("max %d", max))
			if len(c.queue) != 0 {
				t.Fatalf("max %d: %d picks left unread", max, len(c.queue))
			}
			// Up to depth steps queued at once, none past the caller's
			// token limit.
			if most := min(depth, max-1); c.most != most {
				t.Fatalf("depth %d, max %d: at most %d picks queued at once, want %d", depth, max, c.most, most)
			}
			// Every step after the first decode step is chained, but for a
			// last one the caller did not take (none: no EOS here).
			if d := want.Timings.DecodedTokens; d > 0 && c.chained != d-1 {
				t.Fatalf("max %d: %d chained steps for %d decoded tokens", max, c.chained, d)
			}
			if max == 200 && want.StopReason != "context" {
				t.Fatalf("max 200: stopped by %q, want the context", want.StopReason)
			}
		}

		// bench's decode: n steps, n-1 chained, nothing left queued.
		c, e := newChainer()
		if _, err := e.Prefill([]int32{1, 400}, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := e.greedyDecode(22, 2, 10); err != nil {
			t.Fatal(err)
		}
		if c.chained != 9 || len(c.queue) != 0 || c.picks != 10 || c.most != min(depth, 10) {
			t.Fatalf("depth %d: bench's 10 steps: %d chained, %d picks, %d left, at most %d queued at once", depth, c.chained, c.picks, len(c.queue), c.most)
		}

		// A caller that takes another token than the pick at the next
		// position: the queued step is dropped and that token's step runs.
		c, e = newChainer()
		prompt := []int32{1, 400, 22, 17}
		for _, x := range []*Executor{plain, e} {
			if _, err := x.Prefill(prompt, 0); err != nil {
				t.Fatal(err)
			}
		}
		g, err := e.newStepChain()
		if err != nil {
			t.Fatal(err)
		}
		if g.ch == nil {
			t.Fatal("a device that keeps its picks, with every op in one run: not chained")
		}
		pos := len(prompt)
		first, err := g.step(300, pos, ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		other := (first + 1) % int32(m.Config.Vocab)
		second, err := g.step(other, pos+1, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.close(); err != nil {
			t.Fatal(err)
		}
		w1, err := plain.ForwardGreedy([]int32{300}, pos)
		if err != nil {
			t.Fatal(err)
		}
		w2, err := plain.ForwardGreedy([]int32{other}, pos+1)
		if err != nil {
			t.Fatal(err)
		}
		if first != w1 || second != w2 || len(c.queue) != 0 {
			t.Fatalf("picks %d, %d (%d left queued), want %d, %d", first, second, len(c.queue), w1, w2)
		}
	}

	// A device that does not chain: ForwardGreedy's steps.
	x, err := NewExecutor(m, cpu.New("cpu", 1), ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := x.newStepChain(); err != nil || g.ch != nil {
		t.Fatalf("the CPU device chained (%v)", err)
	}
}

// sampleChainer is chainer making sampled picks too
// (devices.SampleChainer): SampleNext picks from the row as the host's
// sampler does with the pick's draw. Its nanAt-th sampled pick (from 1; 0
// none) is -1, as a device's from a row holding a NaN, and the steps
// chained after it read token 0.
type sampleChainer struct {
	chainer
	samples, nanAt int
}

func (c *sampleChainer) SampleNext(src devices.Buffer, n int, p devices.SampleSpec) error {
	if len(c.queue) >= devices.MaxChained {
		return fmt.Errorf("a pick queued past the %d the device holds", devices.MaxChained)
	}
	row := make([]float32, n)
	if err := c.Read(row, src); err != nil {
		return err
	}
	s, err := NewSampler(SamplerConfig{Temp: p.Temp, TopK: p.K, TopP: p.TopP, RepeatPenalty: 1})
	if err != nil {
		return err
	}
	s.back = []float32{p.Draw}
	id := s.Sample(row, nil)
	if c.samples++; c.samples == c.nanAt {
		id = -1
	}
	c.queue = append(c.queue, id)
	c.most = max(c.most, len(c.queue))
	c.kept = max(id, 0)
	c.picks++
	return nil
}

// TestSampledChain checks sampled decoding chained (stepChain with a
// sampler) on a device that makes sampled picks: Generate gives the tokens
// of a device that does not, over the same draws (each pick the draw the
// host would have taken for it), stopped by its token limit and by the
// context, at every depth; a pick from a row holding a NaN drops the steps
// queued after it and is made by the host from the row, still with the
// same draws; and a sampler the device does not make (a repeat penalty)
// is not chained.
func TestSampledChain(t *testing.T) {
	m := builtinModel(t)
	const ctx = 64
	plain, err := NewExecutor(m, cpu.New("cpu", 1), ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func(d int, g bool) { chainDepth, chainGrow = d, g }(chainDepth, chainGrow)
	chainGrow = false // the depths set, not grown (TestChainGrows)
	sampled := DefaultSampler()
	sampled.Seed = 7
	for _, depth := range []int{2, 4, devices.MaxChained} {
		chainDepth = depth
		for _, max := range []int{1, 2, 12, 200} {
			for _, nanAt := range []int{0, 1, 3} {
				c := &sampleChainer{chainer: chainer{batcher: batcher{Device: cpu.New("cpu", 1), seen: map[*devices.Call]int{}}}, nanAt: nanAt}
				e, err := NewExecutor(m, c, ctx)
				if err != nil {
					t.Fatal(err)
				}
				o := GenerateOptions{Prompt: "Once upon a time", MaxTokens: max, Sampler: sampled}
				want := generateBoth(t, plain, e, o, fmt.Sprintf("depth %d, max %d, NaN at %d", depth, max, nanAt))
				if len(c.queue) != 0 {
					t.Fatalf("max %d: %d picks left unread", max, len(c.queue))
				}
				if d := want.Timings.DecodedTokens; d > 1 && (c.chained == 0 || c.samples < d) {
					t.Fatalf("max %d: %d chained steps and %d sampled picks for %d decoded tokens", max, c.chained, c.samples, d)
				}
			}
		}
	}

	// A repeat penalty reads the history, which the device does not keep.
	pen := sampled
	pen.RepeatPenalty = 1.1
	c := &sampleChainer{chainer: chainer{batcher: batcher{Device: cpu.New("cpu", 1), seen: map[*devices.Call]int{}}}}
	e, err := NewExecutor(m, c, ctx)
	if err != nil {
		t.Fatal(err)
	}
	generateBoth(t, plain, e, GenerateOptions{Prompt: "Once upon a time", MaxTokens: 12, Sampler: pen}, "repeat penalty")
	if c.samples != 0 || c.chained != 0 {
		t.Fatalf("repeat penalty: %d picks sampled on the device, %d steps chained", c.samples, c.chained)
	}
}

// TestEngineGreedyChain checks the engine's lone greedy sequence chained
// (each step queued before the pick before it is read) on a device that
// keeps its picks: a request gives Generate's tokens, its steps after the
// first chained and none left queued; requests that join a chained one
// (the queued step dropped for their prompt and the batched steps) and
// requests on several slots give the tokens of their prompts run alone.
func TestEngineGreedyChain(t *testing.T) {
	defer func(g bool) { chainGrow = g }(chainGrow)
	chainGrow = false // chainDepth's steps at most, not grown (TestChainGrows)
	m := builtinModel(t)
	greedy := SamplerConfig{TopP: 1, RepeatPenalty: 1}
	ref, err := NewExecutor(m, cpu.New("cpu", 1), 256)
	if err != nil {
		t.Fatal(err)
	}
	alone := func(p string, max int) []int32 {
		r, err := ref.Generate(GenerateOptions{Prompt: p, MaxTokens: max, Sampler: greedy})
		if err != nil {
			t.Fatal(err)
		}
		return r.Tokens
	}
	newEngine := func(slots int) (*chainer, *Engine) {
		c := &chainer{batcher: batcher{Device: cpu.New("cpu", 1), seen: map[*devices.Call]int{}}}
		x, err := NewExecutor(m, c, 256*slots)
		if err != nil {
			t.Fatal(err)
		}
		e, err := NewEngine(x, EngineOptions{Slots: slots, Queue: 8})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close(context.Background()) })
		return c, e
	}
	gen := func(e *Engine, p string, max int, emit func(n int)) ([]int32, error) {
		var got []int32
		_, err := e.Generate(context.Background(), Request{Prompt: m.Tokenizer.Encode(p, true), MaxTokens: max, Sampler: greedy},
			func(id int32) bool {
				got = append(got, id)
				if emit != nil {
					emit(len(got))
				}
				return true
			})
		return got, err
	}

	// One request: 24 tokens, the first from the prompt, 23 steps, all
	// but the first chained, the last queuing nothing.
	c, e := newEngine(1)
	got, err := gen(e, "Once upon a time", 24, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := alone("Once upon a time", 24); !slices.Equal(got, want) {
		t.Fatalf("chained engine %v, Generate %v", got, want)
	}
	if c.chained != 22 || len(c.queue) != 0 || c.early != 0 || c.most != chainDepth {
		t.Fatalf("24 tokens: %d chained steps (want 22), %d picks left queued, %d steps run while one was, at most %d queued at once (want %d)",
			c.chained, len(c.queue), c.early, c.most, chainDepth)
	}

	// A second request joins at the first's tenth token, a third at the
	// second's fifth: each prompt's prefill drops the steps queued ahead.
	c, e = newEngine(4)
	prompts := []string{"Once upon a time", "The cat", "Lily and Tom went to the park. They"}
	maxes := []int{40, 20, 12}
	outs := make([][]int32, len(prompts))
	errs := make(chan error, len(prompts))
	var start func(i int)
	start = func(i int) {
		go func() {
			var err error
			outs[i], err = gen(e, prompts[i], maxes[i], func(n int) {
				if n == 10/(i+1) && i+1 < len(prompts) {
					start(i + 1)
				}
			})
			errs <- err
		}()
	}
	start(0)
	for range prompts {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range prompts {
		if want := alone(p, maxes[i]); !slices.Equal(outs[i], want) {
			t.Errorf("prompt %q joined: %v, alone %v", p, outs[i], want)
		}
	}
	if c.chained == 0 || c.early != 0 {
		t.Errorf("%d steps of a lone sequence chained; %d other steps run while a pick was queued (the steps queued ahead not dropped first)", c.chained, c.early)
	}
	// A request on the second slot (its cells from 256) that outlives the
	// one on the first: its lone steps chained at another first cell.
	c, e = newEngine(2)
	var second []int32
	done := make(chan error, 1)
	first, err := gen(e, "The cat", 4, func(n int) {
		if n == 1 {
			go func() {
				var err error
				second, err = gen(e, "Once upon a time", 30, nil)
				done <- err
			}()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := alone("The cat", 4); !slices.Equal(first, want) {
		t.Errorf("first slot: %v, alone %v", first, want)
	}
	if want := alone("Once upon a time", 30); !slices.Equal(second, want) {
		t.Errorf("second slot: %v, alone %v", second, want)
	}
	if c.chained == 0 || len(c.queue) != 0 {
		t.Errorf("second slot: %d chained steps, %d picks left queued", c.chained, len(c.queue))
	}
}

// TestEngineSampledChain checks the engine's lone sampled sequence chained
// on a device that makes sampled picks: a request gives Generate's tokens
// (the same seed, so the same draws), its steps after the first chained,
// its picks made on the device, none left queued.
func TestEngineSampledChain(t *testing.T) {
	m := builtinModel(t)
	sampled := DefaultSampler()
	sampled.Seed = 11
	ref, err := NewExecutor(m, cpu.New("cpu", 1), 256)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Generate(GenerateOptions{Prompt: "Once upon a time", MaxTokens: 24, Sampler: sampled})
	if err != nil {
		t.Fatal(err)
	}
	c := &sampleChainer{chainer: chainer{batcher: batcher{Device: cpu.New("cpu", 1), seen: map[*devices.Call]int{}}}}
	x, err := NewExecutor(m, c, 256)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine(x, EngineOptions{Slots: 1, Queue: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	var got []int32
	if _, err := e.Generate(context.Background(), Request{Prompt: m.Tokenizer.Encode("Once upon a time", true), MaxTokens: 24, Sampler: sampled},
		func(id int32) bool { got = append(got, id); return true }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want.Tokens) {
		t.Fatalf("chained engine %v, Generate %v", got, want.Tokens)
	}
	if n := len(want.Tokens) - 2; c.chained != n || c.samples != n+1 || len(c.queue) != 0 {
		t.Fatalf("%d tokens: %d chained steps (want %d), %d picks on the device (want %d), %d left queued", len(want.Tokens), c.chained, n, c.samples, n+1,
			len(c.queue))
	}
}

// TestChainGrows checks how a chain's depth grows: to the steps that take
// chainAhead of the device's step time, from the depth it has up to
// devices.MaxChained (grownDepth), with the step time the shortest time
// between two reads of picks that each waited for their step (observe).
func TestChainGrows(t *testing.T) {
	us := time.Microsecond
	for _, c := range []struct {
		depth int
		step  time.Duration
		want  int
	}{
		{8, 0, 8},
		{8, 527 * us, 16}, // TinyLlama Q4_0 on an H200: 8 ms is 15.2 steps
		{8, 1770 * us, 8}, // the 7B: eight steps are 14 ms already
		{8, 100 * us, devices.MaxChained},
		{2, 2 * time.Millisecond, 4},
		{20, time.Millisecond, 20}, // never shrinks
	} {
		if got := grownDepth(c.depth, c.step); got != c.want {
			t.Errorf("grownDepth(%d, %v) = %d, want %d", c.depth, c.step, got, c.want)
		}
	}
	g := &stepChain{depth: 8, grow: true}
	for i, r := range []struct {
		gap   time.Duration // the device's, since the pick before
		ok    bool
		depth int
		stepT time.Duration
	}{
		{0, false, 8, 0},                           // the first pick: no gap
		{300 * us, false, 8, 0},                    // not the pick before's: not taken
		{1770 * us, true, 8, 1770 * us},            // eight such steps take 14 ms already
		{527 * us, true, 16, 527 * us},             // shorter: 8 ms is 15.2 steps
		{2 * time.Millisecond, true, 16, 527 * us}, // longer (the device ran dry): not taken
		{0, true, 16, 527 * us},                    // no time: not taken
		{300 * us, true, 27, 300 * us},             // shorter: 8 ms is 26.7 such steps
	} {
		g.observe(r.gap, r.ok)
		if g.depth != r.depth || g.stepT != r.stepT {
			t.Fatalf("pick %d (gap %v, %v): depth %d, step %v; want %d, %v", i, r.gap, r.ok, g.depth, g.stepT, r.depth, r.stepT)
		}
	}
}

// TestGreedyChainGrows runs Generate on a device that times its picks
// (devices.PickTimer, the time between its PickNext calls): the chain grows
// past defaultChain, since its steps are far shorter than chainAhead (set
// to 100 ms), never past what the device holds (PickNext fails there), and
// gives the tokens of a device that does not chain. A device that does not
// time its picks keeps the depth it started with.
func TestGreedyChainGrows(t *testing.T) {
	defer func(d int, g bool, a time.Duration) { chainDepth, chainGrow, chainAhead = d, g, a }(chainDepth, chainGrow, chainAhead)
	// 100 ms ahead: a CPU step on a loaded machine is still far shorter
	// than a twelfth of it, so that the chain grows past eight for sure.
	chainDepth, chainGrow, chainAhead = defaultChain, true, 100*time.Millisecond
	m := builtinModel(t)
	const ctx = 128
	plain, err := NewExecutor(m, cpu.New("cpu", 1), ctx)
	if err != nil {
		t.Fatal(err)
	}
	o := GenerateOptions{Prompt: "Once upon a time", MaxTokens: 100, Sampler: SamplerConfig{TopP: 1, RepeatPenalty: 1}}
	// Not timed: eight at most.
	u := &chainer{batcher: batcher{Device: cpu.New("cpu", 1), seen: map[*devices.Call]int{}}}
	e, err := NewExecutor(m, u, ctx)
	if err != nil {
		t.Fatal(err)
	}
	generateBoth(t, plain, e, o, "a chain on a device that does not time its picks")
	if u.most != defaultChain {
		t.Fatalf("at most %d picks queued at once on a device that does not time them, want %d", u.most, defaultChain)
	}
	c := &timedChainer{chainer: chainer{batcher: batcher{Device: cpu.New("cpu", 1), seen: map[*devices.Call]int{}}}}
	if e, err = NewExecutor(m, c, ctx); err != nil {
		t.Fatal(err)
	}
	want := generateBoth(t, plain, e, o, "a growing chain")
	if len(c.queue) != 0 {
		t.Fatalf("%d picks left unread", len(c.queue))
	}
	if c.most <= defaultChain {
		t.Fatalf("at most %d picks queued at once over %d steps: the chain did not grow past %d", c.most, want.Timings.DecodedTokens, defaultChain)
	}
	if e.Stats.ChainDepth != c.most {
		t.Fatalf("Stats.ChainDepth %d, but the device held up to %d picks at once", e.Stats.ChainDepth, c.most)
	}
	t.Logf("%d steps, at most %d picks queued at once", want.Timings.DecodedTokens, c.most)
}
