package planner

import (
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"hybrid/devices"
	"hybrid/ops"
)

// Candidate is a device the planner may use: what it is and which ops it
// can run.
type Candidate struct {
	Info     devices.Info
	Supports func(*ops.Op) error
	// Sim is the cost model of a simulated device, nil for a real one.
	Sim devices.Simulator
	// Streams is true for a device that can run an op whose weight is
	// resident elsewhere, copied in for the step (devices.WeightStreamer).
	Streams bool
	// KVStreams is true for a device that can run an attention op whose KV
	// cache is resident elsewhere, the cells copied in and back for the
	// step (devices.KVStreamer); KVHost for a device whose cache can be
	// read and written so (devices.KVHost: one in host memory).
	KVStreams, KVHost bool
}

// noKVStream (HYBRID_KV_STREAM=0) plans no attention away from its KV
// cache, to measure what streaming caches gains.
var noKVStream = os.Getenv("HYBRID_KV_STREAM") == "0"

// Candidates wraps devices for the planner.
func Candidates(devs []devices.Device) []Candidate {
	out := make([]Candidate, len(devs))
	for i, d := range devs {
		out[i] = Candidate{Info: d.Info(), Supports: d.Supports}
		_, out[i].Streams = d.(devices.WeightStreamer)
		_, out[i].KVStreams = d.(devices.KVStreamer)
		out[i].KVStreams = out[i].KVStreams && !noKVStream
		_, out[i].KVHost = d.(devices.KVHost)
		if s, ok := d.(devices.Simulator); ok && out[i].Info.Simulated {
			out[i].Sim = s
		}
	}
	return out
}

// ErrNoPlan is wrapped when no placement satisfies the policy.
var ErrNoPlan = errors.New("no plan fits")

// Make plans graph g on the candidate devices under policy pol with cost
// model c. A policy with pins or a single device leaves no choice for those
// ops; everything else is placed to minimise the predicted step time (ops plus
// copies) under each device's memory budget. The result is never predicted
// slower than the best single-device plan the policy allows.
func Make(g *ops.Graph, cands []Candidate, pol *Policy, c *Costs) (*Plan, error) {
	c = c.For(cands)
	p, prob, caps, err := prepare(g, cands, pol, c)
	if err != nil {
		return nil, err
	}
	memory := func(a []int) map[string]int64 {
		mem, _ := p.memoryFor(names(p.Devices, a))
		return mem
	}
	// Room for streamed weights is kept where a plan still fits with it.
	reserved, notes := reserveStreaming(p, cands, pol, c, caps)
	assign, err := solveWithin(prob, reserved, memory, p.Devices)
	if notes != nil && errors.Is(err, errNoFit) {
		assign, err = solveWithin(prob, caps, memory, p.Devices)
	} else if err == nil {
		p.Notes = append(p.Notes, notes...)
	}
	if errors.Is(err, errNoFit) {
		return nil, p.noFit(prob, caps, pol)
	}
	if err != nil {
		return nil, fmt.Errorf("planner: policy %s: %w", pol.Name, err)
	}
	p.Device = names(p.Devices, assign)
	p.finish(c)
	if prob.Inexact {
		prob.Penalty = nil
		lb := time.Duration(LowerBound(prob) * 1e9)
		p.Approximate = true
		p.Notes = append(p.Notes, fmt.Sprintf("not proven optimal: with %d unlike devices the search kept only the cheapest partial placements after some ops; no placement can take less than %s (every op on its fastest device, no copies), this one is predicted %s (within %.1f%% of that bound)",
			len(p.Devices), lb, p.Predicted, 100*(float64(p.Predicted)/float64(max(lb, 1))-1)))
	}
	return p, nil
}

// Apply costs a given placement (device names per op) of graph g, as Make
// would have, without choosing it: a decode plan applied to a prefill step.
func Apply(g *ops.Graph, cands []Candidate, pol *Policy, c *Costs, assign []string) (*Plan, error) {
	c = c.For(cands)
	p, _, _, err := prepare(g, cands, pol, c)
	if err != nil {
		return nil, err
	}
	for i, d := range assign {
		if p.DeviceIndex(d) < 0 {
			return nil, fmt.Errorf("planner: op %s is placed on %s, which is not a candidate device", g.Ops[i], d)
		}
	}
	p.Device = assign
	p.finish(c)
	return p, nil
}

// prepare estimates every op on every candidate and sets up the problem.
func prepare(g *ops.Graph, cands []Candidate, pol *Policy, c *Costs) (*Plan, *Problem, []int64, error) {
	if len(cands) == 0 {
		return nil, nil, nil, fmt.Errorf("planner: no devices: %w", ErrNoPlan)
	}
	if len(cands) > 16 {
		return nil, nil, nil, fmt.Errorf("planner: %d devices; at most 16 are supported", len(cands))
	}
	infos := make([]devices.Info, len(cands))
	for j, cd := range cands {
		infos[j] = cd.Info
	}
	p := &Plan{Policy: pol.Name, Graph: g, Devices: infos, PerOp: pol.Transfers == "per-op"}
	n := len(g.Ops)
	p.Estimates = make([][]time.Duration, n)
	p.Source = make([][]string, n)
	opTime := make([][]float64, n)
	for i, op := range g.Ops {
		p.Estimates[i] = make([]time.Duration, len(cands))
		p.Source[i] = make([]string, len(cands))
		opTime[i] = make([]float64, len(cands))
		allowed := map[string]bool{}
		for _, name := range pol.Candidates(op, infos) {
			allowed[name] = true
		}
		any := false
		var why []string
		for j, cd := range cands {
			t, src := c.OpTime(cd.Info, op, g.Tokens)
			p.Estimates[i][j], p.Source[i][j] = t, src
			opTime[i][j] = t.Seconds()
			if !allowed[cd.Info.Name] {
				opTime[i][j] = -1
				continue
			}
			if err := cd.Supports(op); err != nil {
				opTime[i][j] = -1
				why = append(why, fmt.Sprintf("%s: %v", cd.Info.Name, err))
				continue
			}
			any = true
		}
		if !any {
			return nil, nil, nil, fmt.Errorf("planner: policy %s leaves no device for op %s %v: %w", pol.Name, op, why, ErrNoPlan)
		}
	}
	// Copy times depend on a value only through its size, and the search
	// asks for the same few sizes many times: each is priced once.
	sizeOf := make([]int, len(g.Values))
	index := map[int64]int{}
	for v, val := range g.Values {
		b := val.Bytes()
		if _, ok := index[b]; !ok {
			index[b] = len(index)
		}
		sizeOf[v] = index[b]
	}
	nd := len(cands)
	priced := make([]float64, len(index)*nd*nd)
	for i := range priced {
		priced[i] = -1
	}
	prob := &Problem{Graph: g, OpTime: opTime, Devices: nd, CopyTime: func(v, from, to int) float64 {
		k := (sizeOf[v]*nd+from)*nd + to
		if priced[k] < 0 {
			priced[k] = p.copyTime(c, infos[from].Name, infos[to].Name, g.Values[v].Bytes()).Seconds()
		}
		return priced[k]
	}}
	if p.PerOp {
		// The ablation does not optimise copies away: each op goes to the
		// device the policy allows that computes it fastest.
		prob.CopyTime = func(v, from, to int) float64 { return 0 }
	}
	caps := make([]int64, len(cands))
	for j, cd := range cands {
		if msg, line := pol.capProblem(cd.Info); msg != "" && pol.allowed(cd.Info, infos) {
			return nil, nil, nil, fmt.Errorf("%s:%d: %s: %w", pol.Path, line, msg, ErrNoPlan)
		}
		caps[j] = cd.Info.Memory
		if m := pol.MemoryCap(cd.Info); m > 0 && (caps[j] == 0 || m < caps[j]) {
			caps[j] = m
		}
		if _, line, auto := pol.memoryCap(cd.Info); auto && caps[j] < cd.Info.Memory {
			p.Notes = append(p.Notes, fmt.Sprintf("memory: auto (%s:%d) caps %s at %s: its %s", pol.Path, line, describe(cd.Info), bytesStr(caps[j]), autoWhat(cd.Info)))
		}
	}
	return p, prob, caps, nil
}

func (p *Plan) copyTime(c *Costs, from, to string, bytes int64) time.Duration {
	host := devices.Host
	fi, ti := host, host
	if j := p.DeviceIndex(from); j >= 0 {
		fi = p.Devices[j]
	}
	if j := p.DeviceIndex(to); j >= 0 {
		ti = p.Devices[j]
	}
	return c.CopyTime(fi, ti, bytes)
}

// finish derives the transfers, predicted time, memory and notes of the
// placement in p.Device.
func (p *Plan) finish(c *Costs) {
	g := p.Graph
	ct := func(from, to string, bytes int64) time.Duration { return p.copyTime(c, from, to, bytes) }
	if p.PerOp {
		p.Transfers = perOpTransfers(g, p.Device, func(string) bool { return false }, ct)
	} else {
		p.Transfers = transfersFor(g, p.Device, ct)
	}
	p.Predicted = 0
	for i := range g.Ops {
		p.Predicted += p.OpTime(i)
	}
	for _, t := range p.Transfers {
		p.Predicted += t.Time
	}
	p.Memory, p.Resident = p.memoryFor(p.Device)
	for i := range g.Ops {
		j := p.DeviceIndex(p.Device[i])
		if p.Source[i][j] == "roofline" {
			p.Notes = append(p.Notes, fmt.Sprintf("no measurement for %s on %s: its times are roofline estimates from FLOPs and bytes (run `hybrid profile`)", g.Ops[i].Kind, describe(p.Devices[j])))
			break
		}
	}
}

func names(infos []devices.Info, a []int) []string {
	out := make([]string, len(a))
	for i, j := range a {
		out[i] = infos[j].Name
	}
	return out
}

// fewerLayers is how many splits with fewer layers than the first one that
// fits solveWithin still tries on an over-budget device.
const fewerLayers = 2

// solveWithin solves the problem under memory caps (0 = none). The exact
// optimum is taken when it fits; otherwise a per-byte price on the weights of
// each over-budget device is raised until the solution fits (Lagrangian
// relaxation), llama.cpp-style splits of whole layers are tried, and the best
// fitting plan seen, including every fitting single-device plan, wins; fill
// then uses what that plan leaves free under the caps, where it pays.
func solveWithin(prob *Problem, caps []int64, memory func([]int) map[string]int64, infos []devices.Info) ([]int, error) {
	fits := func(a []int) (bool, []int) { return fitsCaps(memory(a), caps, infos) }
	var best []int
	bestCost := math.Inf(1)
	consider := func(a []int) {
		if a == nil {
			return
		}
		if ok, _ := fits(a); !ok {
			return
		}
		saved := prob.Penalty
		prob.Penalty = nil
		c, ok := Evaluate(prob, a)
		prob.Penalty = saved
		if ok && c < bestCost {
			best, bestCost = a, c
		}
	}
	// Single-device plans: the floor the result must not be worse than.
	for d := range infos {
		a := make([]int, len(prob.Graph.Ops))
		ok := true
		for i := range a {
			if prob.OpTime[i][d] < 0 {
				ok = false
				break
			}
			a[i] = d
		}
		if ok {
			consider(a)
		}
	}
	a, _, ok := Solve(prob)
	if !ok {
		return nil, ErrNoPlan
	}
	consider(a)
	fit0, over0 := fits(a)
	if fit, over := fit0, over0; !fit {
		prob.Penalty = make([]float64, len(infos))
		price := 1e-12 // seconds per byte
		for iter := 0; iter < 60 && !fit; iter++ {
			for _, j := range over {
				prob.Penalty[j] += price
			}
			price *= 2
			a, _, ok = Solve(prob)
			if !ok {
				break
			}
			consider(a)
			fit, over = fits(a)
		}
		prob.Penalty = nil
	}
	if !fit0 {
		// Identical layers all flip at the same price, so the relaxation can
		// jump from "everything there" to "nothing there". Also try what
		// users do by hand with llama.cpp's -ngl: the over-budget device
		// keeps only the first (or the last) k layers, for every k.
		layers := 0
		for _, op := range prob.Graph.Ops {
			layers = max(layers, op.Layer+1)
		}
		// The ops outside the blocks (embedding, output head) may go
		// either way: left free, the solver puts a large output head on
		// the fast device, which can leave k blocks over budget when k
		// blocks alone would fit.
		//
		// k runs down from all layers; once a split fits, splits with
		// fewerLayers fewer layers are still tried, then no smaller k: the
		// device is over budget because the optimum wants more of it, so
		// fewer layers on it only get slower, and fill (below) uses the
		// room whole layers leave.
		//
		// With several tight devices (two capped GPUs), restricting one
		// leaves the solver putting the rest on the other, over its cap
		// too: pipelines (below) splits the layers over all of them
		// instead.
		saved := prob.OpTime
		if tight, _, _, _ := tightDevices(prob, caps, infos); len(tight) >= 2 {
			over0 = nil
		}
		for _, j := range over0 {
			for _, prefix := range []bool{true, false} {
				for _, outside := range []bool{true, false} {
					fitK := -1
					for k := layers; k >= 0 && (fitK < 0 || k >= fitK-fewerLayers); k-- {
						prob.OpTime = restrict(saved, prob.Graph, j, k, layers, prefix, outside)
						a, _, ok := Solve(prob)
						if !ok {
							continue
						}
						consider(a)
						if fitK < 0 {
							if fit, _ := fits(a); fit {
								fitK = k
							}
						}
					}
				}
			}
		}
		prob.OpTime = saved
		// Several capped devices: runs of whole layers on each in turn.
		pipelines(prob, caps, memory, infos, consider)
		if best != nil {
			// Whole layers leave part of the capped devices empty: fill
			// it with parts of other layers where that is faster.
			best = fill(prob, best, caps, memory, infos)
		}
	}
	if best == nil {
		return nil, errNoFit
	}
	return best, nil
}

// errNoFit is solveWithin's error when no placement fits the caps, which
// Make explains (Plan.noFit).
var errNoFit = fmt.Errorf("no placement fits the devices' memory: %w", ErrNoPlan)

// elsewhere reports whether a device other than j may run an op of times row.
func elsewhere(row []float64, j int) bool {
	for d, t := range row {
		if d != j && t >= 0 {
			return true
		}
	}
	return false
}

// restrict forbids device j every block outside the first k layers (prefix)
// or the last k (suffix); ops outside the blocks stay allowed if outside is
// set, and are forbidden where another device can run them if not.
func restrict(t [][]float64, g *ops.Graph, j, k, layers int, prefix, outside bool) [][]float64 {
	out := make([][]float64, len(t))
	for i, op := range g.Ops {
		out[i] = t[i]
		in := (prefix && op.Layer >= 0 && op.Layer < k) || (!prefix && op.Layer >= layers-k)
		if op.Layer < 0 {
			in = outside || !elsewhere(t[i], j)
		}
		if !in && t[i][j] >= 0 {
			row := append([]float64(nil), t[i]...)
			row[j] = -1
			out[i] = row
		}
	}
	return out
}
