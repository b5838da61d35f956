package runtime

import (
	"math"
	"slices"
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

// halves places the first half of g's blocks and the embedding on first,
// the rest and the output head on second: a chain of two devices. With
// embedLast, the embedding goes on second too, which visits it twice.
func halves(g *ops.Graph, first, second string, embedLast bool) map[string]string {
	layers := 0
	for _, op := range g.Ops {
		layers = max(layers, op.Layer+1)
	}
	m := map[string]string{}
	for _, op := range g.Ops {
		m[op.Name] = second
		if (op.Layer >= 0 && op.Layer < layers/2) || (op.Kind == ops.Embed && !embedLast) {
			m[op.Name] = first
		}
	}
	return m
}

// TestPipelinedPrefill checks that a prompt over a chain of two devices
// that queue their work runs in micro-batches (DefaultMicroBatch, or
// Options.MicroBatch; the last one shorter), each device given every
// micro-batch in order, with the logits of one device running the same
// micro-batches bit for bit, and within rounding of the prompt run in one
// step, with its greedy continuation; and that by default one device,
// devices that do not queue, or a device visited twice in a step (layers
// alternating, the embedding on the last device) run the prompt in one
// step, as a negative MicroBatch does.
func TestPipelinedPrefill(t *testing.T) {
	m := builtinModel(t)
	defer m.Close()
	const ctx = 320
	prompt := make([]int32, DefaultMicroBatch+44)
	for i := range prompt {
		prompt[i] = int32(1 + (i*37)%400)
	}
	g1, err := m.Graph(1, 0, ctx)
	if err != nil {
		t.Fatal(err)
	}
	place := halves(g1, "cpu", "cpu:1", false)
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
	pair := func() []devices.Device {
		return []devices.Device{&queuer{Device: cpu.New("cpu", 1)}, &queuer{Device: cpu.New("cpu:1", 1)}}
	}
	// ranAt lists a device's steps as (position, tokens) pairs.
	ranAt := func(d devices.Device) []int {
		var at []int
		for _, st := range d.(*queuer).steps {
			at = append(at, st.Pos, len(st.Tokens))
		}
		return at
	}
	want, wantToks, steps := run([]devices.Device{cpu.New("cpu", 1)}, Options{})
	if steps != 1 {
		t.Fatalf("one device: the prompt ran in %d steps, want 1", steps)
	}
	for _, c := range []struct {
		ub    int
		steps []int // (position, tokens) of the prompt's steps
	}{
		{0, []int{0, DefaultMicroBatch, DefaultMicroBatch, 44}},
		{128, []int{0, 128, 128, 128, 256, 44}},
	} {
		devs := pair()
		got, gotToks, steps := run(devs, Options{Placement: place, MicroBatch: c.ub})
		if steps != len(c.steps)/2 {
			t.Fatalf("a chain of two queueing devices, MicroBatch %d: the prompt of %d tokens ran in %d steps, want %d", c.ub, len(prompt), steps, len(c.steps)/2)
		}
		for _, d := range devs {
			if at := ranAt(d); len(at) < len(c.steps) || !slices.Equal(at[:len(c.steps)], c.steps) {
				t.Fatalf("MicroBatch %d: %s ran steps (position, tokens) %v, want %v first", c.ub, d.Name(), at, c.steps)
			}
		}
		for i := range want {
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("MicroBatch %d: logit %d: in micro-batches %g, in one step %g", c.ub, i, got[i], want[i])
			}
		}
		if !slices.Equal(gotToks, wantToks) {
			t.Fatalf("MicroBatch %d: greedy tokens after micro-batches %v, after one step %v", c.ub, gotToks, wantToks)
		}
		// One device told to run the same micro-batches computes the same.
		one := &queuer{Device: cpu.New("cpu", 1)}
		same, _, steps := run([]devices.Device{one}, Options{MicroBatch: c.ub})
		if c.ub > 0 && (steps != len(c.steps)/2 || !slices.Equal(ranAt(one)[:len(c.steps)], c.steps)) {
			t.Fatalf("one device, MicroBatch %d: the prompt ran in steps %v, want %v first", c.ub, ranAt(one), c.steps)
		}
		for i := range got {
			if c.ub > 0 && math.Float32bits(got[i]) != math.Float32bits(same[i]) {
				t.Fatalf("MicroBatch %d: logit %d: on two devices %g, on one %g", c.ub, i, got[i], same[i])
			}
		}
	}
	for _, c := range []struct {
		name string
		devs []devices.Device
		opts Options
	}{
		{"micro-batches off", pair(), Options{Placement: place, MicroBatch: -1}},
		{"one queueing device", []devices.Device{&queuer{Device: cpu.New("cpu", 1)}}, Options{}},
		{"devices that do not queue", []devices.Device{cpu.New("cpu", 1), cpu.New("cpu:1", 1)}, Options{Placement: place}},
		{"layers alternating", pair(), Options{Placement: split(g1)}},
		{"the embedding on the last device", pair(), Options{Placement: halves(g1, "cpu", "cpu:1", true)}},
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
	ex, err := NewPlanExecutor(m, devs, MaxBatch, Options{Placement: halves(g1, "cpu", "cpu:1", false)})
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
