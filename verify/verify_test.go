package verify

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"hybrid/devices"
	"hybrid/devices/cpu"
	"hybrid/ops"
	"hybrid/runtime"
)

// faulty is a CPU device with one deliberate fault, to show that the checks
// catch what they claim to.
type faulty struct {
	*cpu.Device
	kind      ops.Kind // the op kind it gets wrong
	fault     bool     // adds half the output's largest magnitude to one element
	refuse    ops.Kind // an op kind it says it does not run
	precision string   // its Info's precision
}

func (f *faulty) Info() devices.Info {
	in := f.Device.Info()
	in.Name, in.Precision = "faulty", f.precision
	return in
}

func (f *faulty) Supports(op *ops.Op) error {
	if op.Kind == f.refuse {
		return fmt.Errorf("faulty: %s: %w", op, devices.ErrUnsupported)
	}
	return f.Device.Supports(op)
}

func (f *faulty) Run(op *ops.Op, st ops.Step, in []devices.Buffer, out devices.Buffer) error {
	if err := f.Device.Run(op, st, in, out); err != nil {
		return err
	}
	if f.fault && op.Kind == f.kind {
		b := out.(*cpu.Buffer)
		b.F[len(b.F)/2] += float32(0.5 * MaxAbs(b.F))
	}
	return nil
}

func results(rs []Result, prefix string) []Result {
	var out []Result
	for _, r := range rs {
		if strings.HasPrefix(r.Name, prefix) {
			out = append(out, r)
		}
	}
	return out
}

// TestOpsAgreeOnCPU: a second CPU device passes every check exactly, and
// every op kind and weight type is covered.
func TestOpsAgreeOnCPU(t *testing.T) {
	rs := Ops(cpu.New("cpu:1", 1), cpu.New("cpu", 1), 1)
	kinds := map[string]bool{}
	for _, r := range rs {
		if r.Status != Pass || r.Err != 0 {
			t.Errorf("%s: %s, error %g: %s", r.Name, r.Status, r.Err, r.Note)
		}
		kinds[strings.Fields(r.Name)[0]] = true
	}
	for _, k := range ops.Kinds() {
		if !kinds[k.String()] {
			t.Errorf("no check of %s", k)
		}
	}
	if n := len(results(rs, "mat_mul ")); n != 3*len(weightTypes()) {
		t.Errorf("%d mat_mul checks, want 3 per type for %d types", n, len(weightTypes()))
	}
}

// TestOpsCatchFaults: one wrong element (off by half the output's largest
// magnitude) of one op kind fails exactly that kind's checks at every
// shape; a refused kind is skipped with the device's reason.
func TestOpsCatchFaults(t *testing.T) {
	cases := []struct {
		kind ops.Kind
		name string
	}{
		{ops.MatMul, "mat_mul "},
		{ops.Attention, "attention "},
		{ops.RoPE, "rope "},
		{ops.Embed, "embed "},
		{ops.LastRow, "last_row "},
		{ops.RMSNorm, "rms_norm "},
		{ops.Add, "add "},
	}
	for _, c := range cases {
		t.Run(c.kind.String(), func(t *testing.T) {
			dev := &faulty{Device: cpu.New("cpu:1", 1), kind: c.kind, fault: true, refuse: ops.SiLUMul}
			rs := Ops(dev, cpu.New("cpu", 1), 2)
			for _, r := range rs {
				wantFail := strings.HasPrefix(r.Name, c.name)
				switch {
				case strings.HasPrefix(r.Name, "silu_mul "):
					if r.Status != Skip || !strings.Contains(r.Note, "faulty") {
						t.Errorf("%s: %s %q, want skipped with the device's reason", r.Name, r.Status, r.Note)
					}
				case wantFail && r.Status != Fail:
					t.Errorf("%s: %s (error %g, tolerance %g), want a failure", r.Name, r.Status, r.Err, r.Tol)
				case !wantFail && r.Status != Pass:
					t.Errorf("%s: %s: %s", r.Name, r.Status, r.Note)
				case wantFail && !strings.Contains(r.Note, "out["):
					t.Errorf("%s: the note %q does not say where", r.Name, r.Note)
				}
			}
		})
	}
}

// TestF16Tolerances: a device of f16 precision is held to fp16 tolerances,
// which still catch one wrong element of a mat-mul's output.
func TestF16Tolerances(t *testing.T) {
	rs := Ops(&faulty{Device: cpu.New("cpu:1", 1), precision: "f16", kind: ops.MatMul, fault: true}, cpu.New("cpu", 1), 3)
	for _, r := range results(rs, "rms_norm ") {
		if r.Tol != 1e-2 {
			t.Errorf("%s: tolerance %g for an f16 device", r.Name, r.Tol)
		}
	}
	for _, r := range results(rs, "mat_mul ") {
		if r.Status != Fail {
			t.Errorf("%s: %s (error %g, tolerance %g), want a failure", r.Name, r.Status, r.Err, r.Tol)
		}
	}
}

// TestFollowReportsDivergence: a device whose output head is wrong
// diverges from cpu-only at the first step, and the report gives both
// tokens' logits from both runs; a correct one follows every token.
func TestFollowReportsDivergence(t *testing.T) {
	m, err := runtime.LoadModel("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prompt := m.Tokenizer.Encode("Once upon a time", true)
	refEx, err := runtime.NewExecutor(m, cpu.New("cpu", 1), 128)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := Greedy(refEx, prompt, 16, m.Tokenizer.IsEOG)
	if err != nil {
		t.Fatal(err)
	}
	if len(ref.Picks) != 16 || len(ref.Logits) != 16 {
		t.Fatalf("trace of %d picks, %d logits", len(ref.Picks), len(ref.Logits))
	}

	good, _ := runtime.NewExecutor(m, cpu.New("cpu:1", 1), 128)
	same, worst, div, err := Follow(good, ref, 0.02)
	if err != nil || div != nil || same != 16 || worst != 0 {
		t.Fatalf("a second CPU device: %d same, worst %g, %v, %v", same, worst, div, err)
	}

	// Lower the logit of the reference's pick at step 5: the faulty run
	// must pick another token there and nowhere before.
	badEx, err := runtime.NewExecutor(m, &stepFault{Device: cpu.New("cpu:1", 1), at: 5, token: ref.Picks[5]}, 128)
	if err != nil {
		t.Fatal(err)
	}
	same, _, div, err = Follow(badEx, ref, 0.02)
	if err != nil {
		t.Fatal(err)
	}
	if div == nil || div.Step != 5 || same != 5 || div.Want != ref.Picks[5] || div.Got == div.Want || div.Tie {
		t.Fatalf("divergence %+v after %d, want one at step 5 from token %d", div, same, ref.Picks[5])
	}
	if div.WantRef != ref.Logits[5][div.Want] || div.GotRef != ref.Logits[5][div.Got] || !(div.WantCand < div.GotCand) {
		t.Fatalf("divergence logits %+v", div)
	}
	if s := div.String(); !strings.Contains(s, "step 5") || !strings.Contains(s, fmt.Sprint(div.Got)) {
		t.Fatalf("report %q", s)
	}
	// The same divergence within the tie margin is a near tie.
	margin := float64(div.WantRef - div.GotRef)
	tieEx, _ := runtime.NewExecutor(m, &stepFault{Device: cpu.New("cpu:2", 1), at: 5, token: ref.Picks[5]}, 128)
	if _, _, d, _ := Follow(tieEx, ref, margin+1e-3); d == nil || !d.Tie {
		t.Fatalf("margin %g under a tie margin of %g: %+v", margin, margin+1e-3, d)
	}
}

// stepFault lowers one token's logit by 1000 at one decode step (counted by
// runs of the output head).
type stepFault struct {
	*cpu.Device
	at    int
	token int32
	steps int
}

func (s *stepFault) Run(op *ops.Op, st ops.Step, in []devices.Buffer, out devices.Buffer) error {
	if err := s.Device.Run(op, st, in, out); err != nil {
		return err
	}
	if op.Name != "output" {
		return nil
	}
	if s.steps == s.at {
		out.(*cpu.Buffer).F[s.token] -= 1000
	}
	s.steps++
	return nil
}

// TestRunFindsDevice: a device name that is not present is an error that
// names what is.
func TestRunFindsDevice(t *testing.T) {
	_, err := Run(Options{Device: "cpu:7", Threads: 1, Policies: []string{"cpu-only"}})
	if err != nil {
		t.Fatalf("cpu:7 with 8 CPU devices: %v", err)
	}
	_, err = Run(Options{Device: "tpu:0", Threads: 1})
	if err == nil || !strings.Contains(err.Error(), "tpu:0") || !strings.Contains(err.Error(), "cpu") {
		t.Fatalf("tpu:0: %v", err)
	}
	if cpuCount(Options{Device: "cpu:3"}) != 4 || cpuCount(Options{Device: "cpu"}) != 2 || cpuCount(Options{Device: "metal"}) != 1 {
		t.Fatal("cpuCount")
	}
	if errors.Is(err, devices.ErrNotAvailable) {
		t.Fatal("a name that matches nothing is not a missing backend")
	}
}
