package planner

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"hybrid/devices"
	"hybrid/ops"
	"hybrid/quant"
)

// randomGraph makes a DAG of n ops in topological order: each op reads one to
// three earlier values (the first op reads none), some with weights.
func randomGraph(r *rand.Rand, n int) *ops.Graph {
	g := &ops.Graph{Tokens: 1}
	for i := 0; i < n; i++ {
		v := &ops.Value{ID: i, Name: fmt.Sprint("v", i), Rows: 1, Cols: 1 + r.IntN(64)}
		g.Values = append(g.Values, v)
		op := &ops.Op{ID: i, Kind: ops.Add, Name: fmt.Sprint("op", i), Layer: -1, Out: i}
		if i > 0 {
			k := 1 + r.IntN(min(3, i))
			for j := 0; j < k; j++ {
				op.In = append(op.In, r.IntN(i))
			}
		}
		if r.IntN(2) == 0 {
			op.Weight = &ops.Weight{Name: fmt.Sprint("w", i), Type: quant.F32, Rows: 1 + r.IntN(8), Cols: 32}
		}
		g.Ops = append(g.Ops, op)
	}
	g.Output = n - 1
	return g
}

func randomProblem(r *rand.Rand, n, d int) *Problem {
	g := randomGraph(r, n)
	p := &Problem{Graph: g, Devices: d, OpTime: make([][]float64, n)}
	for i := range p.OpTime {
		p.OpTime[i] = make([]float64, d)
		for j := range p.OpTime[i] {
			p.OpTime[i][j] = r.Float64()
			if r.IntN(8) == 0 {
				p.OpTime[i][j] = -1 // not allowed there
			}
		}
	}
	link := make([][]float64, d)
	for a := range link {
		link[a] = make([]float64, d)
		for b := range link[a] {
			link[a][b] = r.Float64() * 0.02
		}
	}
	p.CopyTime = func(v, from, to int) float64 { return link[from][to] * float64(g.Values[v].Cols) }
	return p
}

// brute enumerates every assignment.
func brute(p *Problem) (float64, bool) {
	n := len(p.Graph.Ops)
	a := make([]int, n)
	best, found := math.Inf(1), false
	var rec func(i int)
	rec = func(i int) {
		if i == n {
			if c, ok := Evaluate(p, a); ok && c < best {
				best, found = c, true
			}
			return
		}
		for d := 0; d < p.Devices; d++ {
			if p.OpTime[i][d] >= 0 {
				a[i] = d
				rec(i + 1)
			}
		}
	}
	rec(0)
	return best, found
}

// TestSolveIsOptimal checks the solver against brute force on random small
// graphs with random op and copy costs, on two and three devices.
func TestSolveIsOptimal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 300; trial++ {
		n, d := 2+r.IntN(7), 2+r.IntN(2)
		p := randomProblem(r, n, d)
		want, feasible := brute(p)
		a, got, ok := Solve(p)
		if ok != feasible {
			t.Fatalf("trial %d: solver feasible=%v, brute force %v", trial, ok, feasible)
		}
		if !ok {
			continue
		}
		if ev, _ := Evaluate(p, a); math.Abs(ev-got) > 1e-9 {
			t.Fatalf("trial %d: solver says %g for its assignment, which costs %g", trial, got, ev)
		}
		if math.Abs(got-want) > 1e-9 {
			t.Fatalf("trial %d (%d ops, %d devices): solver %g, brute force %g", trial, n, d, got, want)
		}
	}
}

// TestSolveWithinBudgets checks that memory caps are never exceeded, that the
// result is never worse than the best fitting single-device plan, and that an
// impossible cap is an error.
func TestSolveWithinBudgets(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 200; trial++ {
		n := 3 + r.IntN(6)
		p := randomProblem(r, n, 2)
		for i := range p.OpTime {
			for j := range p.OpTime[i] {
				p.OpTime[i][j] = math.Abs(p.OpTime[i][j])
			}
		}
		mem := weightBytes(p.Graph)
		infos := []devInfo{{"0"}, {"1"}}
		var total int64
		for _, op := range p.Graph.Ops {
			if op.Weight != nil {
				total += op.Weight.Bytes()
			}
		}
		caps := []int64{total / 2, 0} // device 0 holds at most half
		a, err := solveWithin(p, caps, mem, toInfos(infos))
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if got := mem(a)["0"]; caps[0] > 0 && got > caps[0] {
			t.Fatalf("trial %d: device 0 holds %d bytes, cap %d", trial, got, caps[0])
		}
		single := make([]int, n)
		for i := range single {
			single[i] = 1
		}
		cs, _ := Evaluate(p, single)
		ca, _ := Evaluate(p, a)
		if ca > cs+1e-12 {
			t.Fatalf("trial %d: plan %g is worse than all on device 1 (%g)", trial, ca, cs)
		}
		// When the optimum fits the cap, it is the answer.
		aopt, opt, _ := Solve(p)
		if mem(aopt)["0"] <= caps[0] && math.Abs(ca-opt) > 1e-9 {
			t.Fatalf("trial %d: the optimum %g fits, but the plan costs %g", trial, opt, ca)
		}
	}
	// A cap nothing fits: every op has a weight and may only run on device 0.
	p := randomProblem(rand.New(rand.NewPCG(5, 6)), 4, 2)
	for i, op := range p.Graph.Ops {
		op.Weight = &ops.Weight{Name: fmt.Sprint("w", i), Type: quant.F32, Rows: 1, Cols: 32}
		p.OpTime[i] = []float64{1, -1}
	}
	mem := func(a []int) map[string]int64 { return map[string]int64{"0": 512} }
	if _, err := solveWithin(p, []int64{100, 0}, mem, toInfos([]devInfo{{"0"}, {"1"}})); err == nil {
		t.Fatal("a cap no plan fits was accepted")
	}
}

type devInfo struct{ name string }

func toInfos(ds []devInfo) []devices.Info {
	out := make([]devices.Info, len(ds))
	for i, d := range ds {
		out[i] = devices.Info{Name: d.name, Kind: "cpu"}
	}
	return out
}

// TestSolveIsFastOnALlamaSizedGraph plans a graph the size of a 22-layer
// model (about 330 ops) on four devices.
func TestSolveIsFastOnALlamaSizedGraph(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	g := &ops.Graph{Tokens: 1}
	add := func(in ...int) int {
		id := len(g.Ops)
		g.Values = append(g.Values, &ops.Value{ID: id, Rows: 1, Cols: 2048})
		g.Ops = append(g.Ops, &ops.Op{ID: id, Kind: ops.Add, Name: fmt.Sprint("op", id), In: in, Out: id})
		return id
	}
	x := add()
	for l := 0; l < 22; l++ {
		h := add(x)
		q, k, v := add(h), add(h), add(h)
		q, k = add(q), add(k)
		a := add(q, k, v)
		o := add(a)
		x = add(x, o)
		h = add(x)
		gt, up := add(h), add(h)
		s := add(gt, up)
		d := add(s)
		x = add(x, d)
	}
	add(add(x))
	p := &Problem{Graph: g, Devices: 4, OpTime: make([][]float64, len(g.Ops))}
	for i := range p.OpTime {
		p.OpTime[i] = []float64{r.Float64(), r.Float64(), r.Float64(), r.Float64()}
	}
	p.CopyTime = func(v, from, to int) float64 { return 0.01 }
	start := time.Now()
	if _, _, ok := Solve(p); !ok {
		t.Fatal("no plan")
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("planning %d ops on 4 devices took %v", len(g.Ops), el)
	} else {
		t.Logf("planned %d ops on 4 devices in %v", len(g.Ops), el)
	}
}

// weightBytes is a memory function for hand-made problems: the weight bytes
// of the ops each device (named by its index) runs, every op's weight counted.
func weightBytes(g *ops.Graph) func([]int) map[string]int64 {
	return func(a []int) map[string]int64 {
		m := map[string]int64{}
		for i, op := range g.Ops {
			if op.Weight != nil {
				m[fmt.Sprint(a[i])] += op.Weight.Bytes()
			}
		}
		return m
	}
}
