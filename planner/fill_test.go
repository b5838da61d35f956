package planner

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"hybrid/devices"
	"hybrid/ops"
)

// h100Host is a real H100 and a 16-thread host with the default costs (no
// profile), as bench/cuda/side-by-side.sh runs them.
func h100Host() []Candidate {
	all := func(*ops.Op) error { return nil }
	return []Candidate{
		{Info: devices.Info{Name: "cuda:0", Kind: "cuda", Memory: 80 << 30}, Supports: all},
		{Info: devices.Info{Name: "cpu", Kind: "cpu", Threads: 16}, Supports: all},
	}
}

// splitLayers returns the layers of g whose ops the placement puts on gpu in
// part only.
func splitLayers(g *ops.Graph, device []string, gpu string) []int {
	on, off := map[int]int{}, map[int]int{}
	for i, op := range g.Ops {
		if op.Layer < 0 {
			continue
		}
		if device[i] == gpu {
			on[op.Layer]++
		} else {
			off[op.Layer]++
		}
	}
	var out []int
	for l := range on {
		if off[l] > 0 {
			out = append(out, l)
		}
	}
	return out
}

// largestMatMul is the largest footprint of one mat-mul of g on a device:
// its weight and its output.
func largestMatMul(g *ops.Graph) int64 {
	var n int64
	for _, op := range g.Ops {
		if op.Kind == ops.MatMul && op.Layer >= 0 {
			n = max(n, op.Weight.Bytes()+g.Values[op.Out].Bytes())
		}
	}
	return n
}

// TestFillBeatsFixedSplits caps the GPU where the best whole-layer split
// leaves more than one mat-mul's bytes free: auto must put part of another
// layer there and so be predicted strictly faster than every fixed split
// (first or last k blocks, head or not), within the cap.
func TestFillBeatsFixedSplits(t *testing.T) {
	g := tinyLlamaGraph(t)
	cases := []struct {
		name      string
		cands     []Candidate
		c         *Costs
		gpu, host string
		limit     int64
	}{
		// 300 MiB, as bench/cuda/side-by-side.sh caps the H100.
		{"h100 300MiB", h100Host(), &Costs{}, "cuda:0", "cpu", 300 << 20},
		{"h100 200MiB", h100Host(), &Costs{}, "cuda:0", "cpu", 200 << 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pol := &Policy{Name: "capped", Transfers: "boundary", Memory: map[string]int64{"cuda": tc.limit}}
			start := time.Now()
			p, err := Make(g, tc.cands, pol, tc.c)
			if err != nil {
				t.Fatal(err)
			}
			el := time.Since(start)
			best := checkBeatsFixedSplits(t, g, tc.cands, pol, tc.c, p, tc.gpu, tc.host, tc.limit)
			if free := tc.limit - best.Memory[tc.gpu]; free <= largestMatMul(g) {
				t.Fatalf("the best fixed split leaves %d bytes, not more than a mat-mul's %d: the case tests nothing", free, largestMatMul(g))
			}
			if p.Predicted >= best.Predicted {
				t.Fatalf("auto %v is not faster than the best fixed split (%s) %v", p.Predicted, best.Policy, best.Predicted)
			}
			split := splitLayers(g, p.Device, tc.gpu)
			if len(split) == 0 {
				t.Fatalf("no layer is split between %s and %s: %v", tc.gpu, tc.host, p.Placement())
			}
			var moved []string
			for i, op := range g.Ops {
				if op.Layer == split[0] && p.Device[i] == tc.gpu {
					moved = append(moved, op.Name)
				}
			}
			t.Logf("auto %v is %.1f%% faster than the best fixed split %s %v; %d of %d bytes on %s; layer %d has %v there; planned in %v",
				p.Predicted, 100*(1-p.Predicted.Seconds()/best.Predicted.Seconds()), best.Policy, best.Predicted,
				p.Memory[tc.gpu], tc.limit, tc.gpu, split[0], moved, el)
		})
	}
}

// TestFillNoRoomKeepsFixedSplit caps the GPU just below what the best fixed
// split of TinyLlama needs plus its smallest mat-mul: no mat-mul fits
// beside the split, and auto's plan must cost what the split costs.
func TestFillNoRoomKeepsFixedSplit(t *testing.T) {
	g := tinyLlamaGraph(t)
	cands := h100Host()
	c := &Costs{}
	// The best split under 300 MiB, then a cap that fits it exactly plus
	// less than any mat-mul.
	loose := &Policy{Name: "capped", Transfers: "boundary", Memory: map[string]int64{"cuda": 300 << 20}}
	split := bestFixedSplit(t, g, cands, loose, c, "cuda:0", "cpu", 300<<20)
	smallest := int64(math.MaxInt64)
	for _, op := range g.Ops {
		if op.Kind == ops.MatMul {
			smallest = min(smallest, op.Weight.Bytes()+g.Values[op.Out].Bytes())
		}
	}
	for _, extra := range []int64{0, smallest - 1} {
		limit := split.Memory["cuda:0"] + extra
		pol := &Policy{Name: "tight", Transfers: "boundary", Memory: map[string]int64{"cuda": limit}}
		p, err := Make(g, cands, pol, c)
		if err != nil {
			t.Fatal(err)
		}
		best := checkBeatsFixedSplits(t, g, cands, pol, c, p, "cuda:0", "cpu", limit)
		if best.Predicted != split.Predicted {
			t.Fatalf("cap %d: the best fixed split is %s %v, want %s %v", limit, best.Policy, best.Predicted, split.Policy, split.Predicted)
		}
		// Ops are summed in the same order either way: the same
		// placement or its mirror image costs the same to the nanosecond,
		// give or take a rounding per op.
		if d := p.Predicted - best.Predicted; d < -time.Duration(len(g.Ops)) || d > 0 {
			t.Fatalf("cap %d (%d bytes over the split): auto %v, the fixed split %s %v", limit, extra, p.Predicted, best.Policy, best.Predicted)
		}
		if l := splitLayers(g, p.Device, "cuda:0"); len(l) > 0 {
			t.Fatalf("cap %d: layers %v are split, at no gain", limit, l)
		}
		t.Logf("cap %d (split + %d bytes): auto %v %v, fixed split %s %v", limit, extra, p.Predicted, p.Placement(), best.Policy, best.Predicted)
	}
}

// TestFillPlanTime plans a 32-layer, Llama-7B-shaped decode step under GPU
// caps that split it, and bounds the time it takes on this machine.
func TestFillPlanTime(t *testing.T) {
	g := llama7bGraph(t)
	cands := h100Host()
	for _, limit := range []int64{1 << 30, 3 << 30} {
		pol := &Policy{Name: "capped", Transfers: "boundary", Memory: map[string]int64{"cuda": limit}}
		start := time.Now()
		p, err := Make(g, cands, pol, &Costs{})
		if err != nil {
			t.Fatal(err)
		}
		el := time.Since(start)
		// About 0.6 s on the 2-core CI machine, shared.
		if el > 2*time.Second {
			t.Fatalf("planning %d ops under a %d-byte cap took %v", len(g.Ops), limit, el)
		}
		best := checkBeatsFixedSplits(t, g, cands, pol, &Costs{}, p, "cuda:0", "cpu", limit)
		if p.Predicted >= best.Predicted {
			t.Fatalf("cap %d: auto %v is not faster than the best fixed split (%s) %v", limit, p.Predicted, best.Policy, best.Predicted)
		}
		t.Logf("7B shape, %d ops, GPU cap %d MiB: planned in %v", len(g.Ops), limit>>20, el)
	}
}

// TestSolveBudgetIsOptimal checks solveBudget against brute force on random
// small graphs with random bytes per op and device, and budgets on some
// devices.
func TestSolveBudgetIsOptimal(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for trial := 0; trial < 300; trial++ {
		n, d := 2+r.IntN(7), 2+r.IntN(2)
		p := randomProblem(r, n, d)
		bytes := make([][]int64, n)
		var total int64
		for i := range bytes {
			if r.IntN(4) == 0 {
				continue // nil: adds nothing anywhere
			}
			bytes[i] = make([]int64, d)
			for j := range bytes[i] {
				bytes[i][j] = int64(r.IntN(100))
				total += bytes[i][j]
			}
		}
		budget := make([]int64, d)
		for j := range budget {
			budget[j] = -1
			if r.IntN(2) == 0 {
				budget[j] = int64(r.IntN(int(total/int64(d)) + 1))
			}
		}
		within := func(a []int) bool {
			used := make([]int64, d)
			for i, j := range a {
				if bytes[i] != nil {
					used[j] += bytes[i][j]
				}
			}
			for j, b := range budget {
				if b >= 0 && used[j] > b {
					return false
				}
			}
			return true
		}
		want, feasible := math.Inf(1), false
		a := make([]int, n)
		var rec func(i int)
		rec = func(i int) {
			if i == n {
				if c, ok := Evaluate(p, a); ok && within(a) && c < want {
					want, feasible = c, true
				}
				return
			}
			for j := 0; j < d; j++ {
				if p.OpTime[i][j] >= 0 {
					a[i] = j
					rec(i + 1)
				}
			}
		}
		rec(0)
		got, cost, _, ok := solveBudget(p, bytes, budget, math.MaxInt)
		if ok != feasible {
			t.Fatalf("trial %d: solveBudget feasible=%v, brute force %v", trial, ok, feasible)
		}
		if !ok {
			continue
		}
		if !within(got) {
			t.Fatalf("trial %d: solveBudget's assignment %v is over a budget %v", trial, got, budget)
		}
		if ev, _ := Evaluate(p, got); math.Abs(ev-cost) > 1e-9 {
			t.Fatalf("trial %d: solveBudget says %g for its assignment, which costs %g", trial, cost, ev)
		}
		if math.Abs(cost-want) > 1e-9 {
			t.Fatalf("trial %d (%d ops, %d devices, budget %v): solveBudget %g, brute force %g", trial, n, d, budget, cost, want)
		}
	}
}

// TestFillNeverWorse runs fill from random fitting assignments of random
// problems under a cap: the result must fit and cost no more, and it must be
// the assignment itself unless it costs strictly less.
func TestFillNeverWorse(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	improved := 0
	for trial := 0; trial < 200; trial++ {
		n := 3 + r.IntN(10)
		p := randomProblem(r, n, 2)
		for i := range p.OpTime {
			for j := range p.OpTime[i] {
				p.OpTime[i][j] = math.Abs(p.OpTime[i][j])
			}
		}
		// Windows: a few ops share a layer.
		for i, op := range p.Graph.Ops {
			op.Layer = i / 3
		}
		mem := weightBytes(p.Graph)
		a := make([]int, n)
		for i := range a {
			a[i] = r.IntN(2)
		}
		caps := []int64{mem(a)["0"] + int64(r.IntN(512)), 0}
		infos := toInfos([]devInfo{{"0"}, {"1"}})
		before, _ := Evaluate(p, a)
		b := fill(p, append([]int(nil), a...), caps, mem, infos)
		after, _ := Evaluate(p, b)
		if got := mem(b)["0"]; got > caps[0] {
			t.Fatalf("trial %d: device 0 holds %d bytes, cap %d", trial, got, caps[0])
		}
		if after > before {
			t.Fatalf("trial %d: fill made %g of %g", trial, after, before)
		}
		same := fmt.Sprint(a) == fmt.Sprint(b)
		if !same && after >= before {
			t.Fatalf("trial %d: fill changed the assignment at no gain (%g)", trial, after)
		}
		if !same {
			improved++
		}
	}
	if improved == 0 {
		t.Fatal("fill never improved a random assignment")
	}
	t.Logf("fill improved %d of 200 random assignments", improved)
}
