package planner

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"hybrid/devices"
	"hybrid/devices/sim"
	"hybrid/ops"
)

// planBound is the most a plan of TinyLlama may take in these tests: the
// goal is under a second on the 2-core CI machine (0.03–0.3 s measured);
// the bound leaves room for a loaded machine.
const planBound = 5 * time.Second

func cpuCandidates(n int, threads func(i int) int) []Candidate {
	cands := make([]Candidate, n)
	for i := range cands {
		name := "cpu"
		if i > 0 {
			name = fmt.Sprintf("cpu:%d", i)
		}
		cands[i] = Candidate{Info: devices.Info{Name: name, Kind: "cpu", Threads: threads(i)}, Supports: func(*ops.Op) error { return nil }}
	}
	return cands
}

func timedPlan(t *testing.T, g *ops.Graph, cands []Candidate, pol *Policy, c *Costs) *Plan {
	t.Helper()
	start := time.Now()
	p, err := Make(g, cands, pol, c)
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	t.Logf("%d devices: planned in %v, predicted %v, approximate %v", len(cands), el, p.Predicted, p.Approximate)
	if el > planBound {
		t.Fatalf("planning %d ops on %d devices took %v (bound %v)", len(g.Ops), len(cands), el, planBound)
	}
	return p
}

// TestPlanSixteenCPUsFast plans TinyLlama on the 16 CPU devices of `hybrid
// plan --cpus 16`: interchangeable devices are searched once, so the search
// stays exact and fast (it took more than 120 s before).
func TestPlanSixteenCPUsFast(t *testing.T) {
	auto, err := LoadPolicy("auto")
	if err != nil {
		t.Fatal(err)
	}
	g := tinyLlamaGraph(t)
	for _, n := range []int{2, 8, 16} {
		cands := cpuCandidates(n, func(int) int { return 2 })
		p := timedPlan(t, g, cands, auto, &Costs{})
		if p.Approximate {
			t.Fatalf("%d identical CPUs: the plan is approximate; merging them should keep it exact", n)
		}
		one, err := Make(g, cands[:1], auto, &Costs{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Predicted > one.Predicted {
			t.Fatalf("%d CPUs: predicted %v, slower than one CPU alone (%v)", n, p.Predicted, one.Predicted)
		}
	}
}

// TestPlanSixteenSimulatedDevicesFast plans TinyLlama on a hardware profile
// of sixteen simulated devices: fifteen CPUs and a GPU.
func TestPlanSixteenSimulatedDevicesFast(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: many\nsource: a test host\ndevices:\n")
	for i := 0; i < 15; i++ {
		fmt.Fprintf(&b, "  - {name: cpu%d, kind: cpu, memory_gb: 64, bandwidth_gbs: 20, tflops: 0.1, launch_us: 2}\n", i)
	}
	b.WriteString("  - {name: gpu, kind: cuda, memory_gb: 80, bandwidth_gbs: 3000, tflops: 60, launch_us: 3}\nlinks:\n")
	for i := 0; i < 15; i++ {
		fmt.Fprintf(&b, "  - {from: cpu%d, to: gpu, latency_us: 10, bandwidth_gbs: 25}\n", i)
	}
	hw, err := sim.ParseHardware([]byte(b.String()), "many.yaml")
	if err != nil {
		t.Fatal(err)
	}
	devs := sim.Open(hw, 1)
	defer func() {
		for _, d := range devs {
			d.Close()
		}
	}()
	auto, err := LoadPolicy("auto")
	if err != nil {
		t.Fatal(err)
	}
	p := timedPlan(t, tinyLlamaGraph(t), Candidates(devs), auto, &Costs{})
	if p.Approximate {
		t.Fatal("fifteen identical CPUs and a GPU: the plan is approximate")
	}
}

// TestPlanManyUnlikeDevicesBounded plans on sixteen CPUs that all differ
// (each its own thread count, so each op costs a little more on the next):
// nothing merges, the search is bounded, and the plan says it is not proven
// optimal, with a bound on the gap, and is never worse than one device.
func TestPlanManyUnlikeDevicesBounded(t *testing.T) {
	auto, err := LoadPolicy("auto")
	if err != nil {
		t.Fatal(err)
	}
	g := tinyLlamaGraph(t)
	cands := cpuCandidates(16, func(i int) int { return 1 + i })
	p := timedPlan(t, g, cands, auto, &Costs{})
	for _, cd := range cands {
		one := &Policy{Name: "only", Devices: []string{cd.Info.Name}, Transfers: "boundary", Memory: map[string]int64{}}
		q, err := Make(g, cands, one, &Costs{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Predicted > q.Predicted {
			t.Fatalf("auto predicted %v, slower than %s alone (%v)", p.Predicted, cd.Info.Name, q.Predicted)
		}
	}
	if p.Approximate && !strings.Contains(strings.Join(p.Notes, "\n"), "not proven optimal") {
		t.Fatalf("an approximate plan without its note: %q", p.Notes)
	}
}

// TestSolveBoundedSearch forces the search bound on a small problem and
// checks what the bound promises: Inexact is set, the answer is a valid
// placement no better than the exact optimum and no better than the lower
// bound.
func TestSolveBoundedSearch(t *testing.T) {
	g := builtinGraph(t, 1)
	const devs = 3
	p := &Problem{Graph: g, Devices: devs, OpTime: make([][]float64, len(g.Ops)),
		CopyTime: func(v, from, to int) float64 { return 1e-6 * float64(1+from+2*to) }}
	for i := range g.Ops {
		p.OpTime[i] = make([]float64, devs)
		for d := range p.OpTime[i] {
			p.OpTime[i][d] = 1e-6 * float64(1+(i*7+d*3)%5)
		}
	}
	_, exact, ok := Solve(p)
	if !ok || p.Inexact {
		t.Fatalf("the unbounded search: ok %v, inexact %v", ok, p.Inexact)
	}
	p.MaxStates = 2
	a, got, ok := Solve(p)
	if !ok || !p.Inexact {
		t.Fatalf("the bounded search: ok %v, inexact %v", ok, p.Inexact)
	}
	ev, ok := Evaluate(p, a)
	if !ok || ev != got {
		t.Fatalf("the bounded answer costs %v by Evaluate, %v by Solve", ev, got)
	}
	if lb := LowerBound(p); got < exact || exact < lb {
		t.Fatalf("bounded %v, exact %v, lower bound %v: want lb <= exact <= bounded", got, exact, lb)
	}
}
