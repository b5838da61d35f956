package runtime

import (
	"math"
	"testing"

	"hybrid/devices"
	"hybrid/devices/cpu"
	"hybrid/ops"
)

// queuer is the CPU device saying that its Run only queues the work
// (devices.Info.Queues), as a GPU's does, and recording the steps it ran:
// two of them make the executor pipeline a prompt in micro-batches.
type queuer struct {
	*cpu.Device
	steps []ops.Step // one per step (its first op's)
	last  ops.Step
}

func (q *queuer) Info() devices.Info {
	i := q.Device.Info()
	i.Queues = true
	return i
}

func (q *queuer) Run(op *ops.Op, st ops.Step, in []devices.Buffer, out devices.Buffer) error {
	if len(q.steps) == 0 || st.Pos != q.last.Pos || len(st.Tokens) != len(q.last.Tokens) {
		q.steps = append(q.steps, st)
		q.last = st
	}
	return q.Device.Run(op, st, in, out)
}

// TestPipelinedPrefill checks that a prompt over two devices that queue
// their work runs in micro-batches of Options.MicroBatch tokens (the last
// one shorter), each device given every micro-batch in order, with the
// logits and the greedy continuation of the prompt run in one step; and
// that one such device, a negative MicroBatch or devices that do not queue
// run the prompt in one step.
func TestPipelinedPrefill(t *testing.T) {
	m := builtinModel(t)
	defer m.Close()
	const ctx = 64
	prompt := make([]int32, 21)
	for i := range prompt {
		prompt[i] = int32(1 + (i*37)%400)
	}
	g1, err := m.Graph(1, 0, ctx)
	if err != nil {
		t.Fatal(err)
	}
	place := split(g1)
	// run prefills the prompt and decodes 4 greedy tokens; it returns the
	// prefill's logits, the tokens and the steps the prefill made.
	run := func(devs []devices.Device, opts Options) ([]float32, []int32, int) {
		t.Helper()
		ex, err := NewPlanExecutor(m, devs, ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		l, err := ex.Prefill(prompt, 0)
		if err != nil {
			t.Fatal(err)
		}
		steps := ex.Stats.Steps
		logits := append([]float32(nil), l...)
		var toks []int32
		tok := int32(Greedy(l))
		for pos := len(prompt); pos < len(prompt)+4; pos++ {
			toks = append(toks, tok)
			if l, err = ex.Forward([]int32{tok}, pos); err != nil {
				t.Fatal(err)
			}
			tok = int32(Greedy(l))
		}
		return logits, toks, steps
	}
	want, wantToks, steps := run([]devices.Device{cpu.New("cpu", 1)}, Options{})
	if steps != 1 {
		t.Fatalf("one device: the prompt ran in %d steps, want 1", steps)
	}
	q0, q1 := &queuer{Device: cpu.New("cpu", 1)}, &queuer{Device: cpu.New("cpu:1", 1)}
	got, gotToks, steps := run([]devices.Device{q0, q1}, Options{Placement: place, MicroBatch: 8})
	if steps != 3 {
		t.Fatalf("two queueing devices, micro-batches of 8: the prompt of %d tokens ran in %d steps, want 3", len(prompt), steps)
	}
	for _, q := range []*queuer{q0, q1} {
		var at []int
		for _, st := range q.steps {
			at = append(at, st.Pos, len(st.Tokens))
		}
		if len(at) < 6 || at[0] != 0 || at[1] != 8 || at[2] != 8 || at[3] != 8 || at[4] != 16 || at[5] != 5 {
			t.Fatalf("%s ran steps (position, tokens) %v, want (0, 8) (8, 8) (16, 5) first", q.Name(), at)
		}
	}
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("logit %d: in micro-batches %g, in one step %g", i, got[i], want[i])
		}
	}
	for i := range wantToks {
		if gotToks[i] != wantToks[i] {
			t.Fatalf("greedy tokens after micro-batches %v, after one step %v", gotToks, wantToks)
		}
	}
	for _, c := range []struct {
		name string
		devs []devices.Device
		opts Options
	}{
		{"micro-batches off", []devices.Device{&queuer{Device: cpu.New("cpu", 1)}, &queuer{Device: cpu.New("cpu:1", 1)}}, Options{Placement: place, MicroBatch: -1}},
		{"one queueing device", []devices.Device{&queuer{Device: cpu.New("cpu", 1)}}, Options{MicroBatch: 8}},
		{"devices that do not queue", []devices.Device{cpu.New("cpu", 1), cpu.New("cpu:1", 1)}, Options{Placement: place, MicroBatch: 8}},
	} {
		if _, _, steps := run(c.devs, c.opts); steps != 1 {
			t.Errorf("%s: the prompt ran in %d steps, want 1", c.name, steps)
		}
	}
}

// TestPrefillStepsKept checks that an executor that pipelines prompts
// keeps the newest prompt steps of at most MaxBatch tokens together
// compiled, freeing the rest (one that does not keeps the latest alone:
// TestMemoryStableOverPromptLengths).
func TestPrefillStepsKept(t *testing.T) {
	m := builtinModel(t)
	defer m.Close()
	g1, err := m.Graph(1, 0, MaxBatch)
	if err != nil {
		t.Fatal(err)
	}
	devs := []devices.Device{&queuer{Device: cpu.New("cpu", 1)}, &queuer{Device: cpu.New("cpu:1", 1)}}
	ex, err := NewPlanExecutor(m, devs, MaxBatch, Options{Placement: split(g1)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		n    int
		want []int // the prompt steps kept, oldest first
	}{
		{128, []int{128}},
		{100, []int{128, 100}},
		{128, []int{128, 100}}, // compiled already
		{300, []int{100, 300}},
		{200, []int{300, 200}},
		{13, []int{200, 13}},
		{512, []int{512}},
	} {
		if _, err := ex.compile(stepKey{n: c.n}); err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, k := range ex.prefills {
			got = append(got, k.n)
			if ex.steps[k] == nil {
				t.Fatalf("step of %d tokens listed, not compiled", k.n)
			}
		}
		if len(got) != len(c.want) {
			t.Fatalf("after a step of %d tokens: kept %v, want %v", c.n, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("after a step of %d tokens: kept %v, want %v", c.n, got, c.want)
			}
		}
		if len(ex.steps) != len(got) {
			t.Fatalf("after a step of %d tokens: %d steps compiled, %d kept", c.n, len(ex.steps), len(got))
		}
	}
}
