// Package planner decides, op by op, which device runs what: it turns a
// model's op graph, the devices present, a cost model and a policy into a
// Plan, a device for every op and the copies that follow from it, with the
// predicted time of each and the reasons.
package planner

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"hybrid/devices"
	"hybrid/ops"
)

// Plan is a placement of one step's graph.
type Plan struct {
	Policy  string
	Graph   *ops.Graph
	Devices []devices.Info
	// Device[i] is the name of the device of Graph.Ops[i].
	Device []string
	// Estimates[i][j] is the predicted time of op i on Devices[j], or -1
	// where the device cannot run it under the policy.
	Estimates [][]time.Duration
	// Source[i][j] says where Estimates[i][j] comes from: "measured",
	// "simulated" or "roofline".
	Source    [][]string
	Transfers []Transfer
	// Streamed[i], for a step planned by MakeStep, names the device op i's
	// weight is streamed from for the step ("" where the weight is resident
	// on the op's device), or, for an attention op, the device its KV cache
	// is resident on when it runs elsewhere (the step's cells are copied
	// back there); nil for a plan without streaming.
	Streamed []string
	// PerOp is true for the ablation plan: every op's inputs are copied from
	// the host and its output back, as a naive integration does.
	PerOp bool
	// Predicted is the total predicted time of the step: every op plus every
	// copy, one after another.
	Predicted time.Duration
	// Memory is the bytes each device holds under the plan (weights, KV
	// cache, activation values), by device name.
	Memory map[string]int64
	// Resident is the part of Memory that stays for the whole run, weights
	// and KV cache, which a device reports as it holds them; the rest is
	// activation buffers, which the executor sizes for each step.
	Resident map[string]int64
	// Approximate is true when the search had to be bounded (very many
	// unlike devices) and the placement is the best found, not proven
	// optimal; a note gives the bound on the gap.
	Approximate bool
	Notes       []string
}

// Transfer is one copy of a value to a device other than its producer's.
type Transfer struct {
	Value      int    // value id
	FromOp     int    // op that produced it
	FromDevice string // its producer's device
	ToDevice   string
	ToOps      []int // the ops on ToDevice that read it
	Bytes      int64
	Time       time.Duration
}

// DeviceIndex returns the index of the named device in p.Devices, or -1.
func (p *Plan) DeviceIndex(name string) int {
	for i, d := range p.Devices {
		if d.Name == name {
			return i
		}
	}
	return -1
}

// OpTime is the predicted time of op i where the plan puts it.
func (p *Plan) OpTime(i int) time.Duration {
	j := p.DeviceIndex(p.Device[i])
	if j < 0 {
		return 0
	}
	return p.Estimates[i][j]
}

// DeviceSummary is one device's share of a plan.
type DeviceSummary struct {
	Device    string
	Simulated bool
	Ops       int
	Predicted time.Duration // its ops' predicted time
	Memory    int64
}

// Summary sums the plan per device, in the order of p.Devices, skipping
// devices with no ops.
func (p *Plan) Summary() []DeviceSummary {
	var out []DeviceSummary
	for j, d := range p.Devices {
		s := DeviceSummary{Device: d.Name, Simulated: d.Simulated, Memory: p.Memory[d.Name]}
		for i := range p.Graph.Ops {
			if p.Device[i] == d.Name {
				s.Ops++
				s.Predicted += p.Estimates[i][j]
			}
		}
		if s.Ops > 0 {
			out = append(out, s)
		}
	}
	return out
}

// Pipelined predicts m steps of p run as a pipeline over its devices
// (runtime's pipelined prompt: each device's ops and the copies into it
// are a stage, which works on one step while the stage after it works on
// the one before): every stage once, then the slowest stage for each
// further step. For m of 1 it is the step's ops and copies one after
// another.
func (p *Plan) Pipelined(m int) time.Duration {
	stage := map[string]time.Duration{}
	for _, d := range p.Summary() {
		stage[d.Device] = d.Predicted
	}
	for _, t := range p.Transfers {
		stage[t.ToDevice] += t.Time
	}
	var sum, slowest time.Duration
	for _, t := range stage {
		sum += t
		slowest = max(slowest, t)
	}
	return sum + time.Duration(max(m-1, 0))*slowest
}

// TransferBytes is the total bytes the plan's copies move in one step.
func (p *Plan) TransferBytes() int64 {
	var n int64
	for _, t := range p.Transfers {
		n += t.Bytes
	}
	return n
}

// Placement returns the number of ops on each device.
func (p *Plan) Placement() map[string]int {
	m := map[string]int{}
	for _, d := range p.Device {
		m[d]++
	}
	return m
}

// PlacementText is Placement as one line: "cpu 162, cuda:0 171".
func (p *Plan) PlacementText() string {
	var parts []string
	for name, n := range p.Placement() {
		parts = append(parts, fmt.Sprintf("%s %d", name, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// StreamedWeights counts the weights a step streams in (Streamed) and
// their bytes.
func (p *Plan) StreamedWeights() (n int, bytes int64) {
	for i, from := range p.Streamed {
		if from != "" && p.Graph.Ops[i].Weight != nil {
			n++
			bytes += p.Graph.Ops[i].Weight.Bytes()
		}
	}
	return n, bytes
}

// StreamedCaches counts the attention ops a step runs away from their KV
// cache (Streamed) and the bytes of the cells copied in (those before the
// step) and back (the step's own).
func (p *Plan) StreamedCaches() (n int, bytes int64) {
	for i, from := range p.Streamed {
		if from != "" && p.Graph.Ops[i].Kind == ops.Attention {
			n++
			bytes += p.streamedBytes(i)
		}
	}
	return n, bytes
}

// streamedBytes is what op i streams: its weight, or, for an attention op
// away from its cache, the cells before the step copied in and the step's
// own copied back to the cache's device.
func (p *Plan) streamedBytes(i int) int64 {
	op := p.Graph.Ops[i]
	if op.Kind != ops.Attention {
		return op.Weight.Bytes()
	}
	elem := 2
	if j := p.DeviceIndex(p.Streamed[i]); j >= 0 {
		elem = p.Devices[j].KVElemBytes()
	}
	return kvCellBytes(op, p.Graph.Past+p.Graph.Values[op.Out].Rows, elem)
}

// kvCellBytes is the keys and values of n cells of attention op's cache,
// at elem bytes an element.
func kvCellBytes(op *ops.Op, n, elem int) int64 {
	return 2 * int64(elem) * int64(n) * int64(op.Attn.KVHeads*op.Attn.HeadDim)
}

// ByName returns the plan's devices keyed by op name, so that the placement
// of a decode step can be applied to a prefill step's graph (the same ops,
// other shapes, plus last_token).
func (p *Plan) ByName() map[string]string {
	m := make(map[string]string, len(p.Device))
	for i, op := range p.Graph.Ops {
		m[op.Name] = p.Device[i]
	}
	return m
}

// Assign places graph g's ops by name from a plan made for another step of the
// same model; an op the plan does not name (last_token in a prefill) goes
// where its first input's producer is.
func Assign(byName map[string]string, g *ops.Graph) ([]string, error) {
	out := make([]string, len(g.Ops))
	producer := g.Producers()
	for i, op := range g.Ops {
		if d, ok := byName[op.Name]; ok {
			out[i] = d
			continue
		}
		if len(op.In) == 0 {
			return nil, fmt.Errorf("planner: the plan does not place op %s", op)
		}
		out[i] = out[producer[op.In[0]]]
	}
	return out, nil
}

// transfersFor lists the copies a placement causes: each value read on a
// device other than its producer's is copied there once.
func transfersFor(g *ops.Graph, assign []string, copyTime func(from, to string, bytes int64) time.Duration) []Transfer {
	producer := g.Producers()
	type key struct {
		v  int
		to string
	}
	idx := map[key]int{}
	var ts []Transfer
	for _, op := range g.Ops {
		seen := map[int]bool{}
		for _, in := range op.In {
			if seen[in] {
				continue
			}
			seen[in] = true
			from := assign[producer[in]]
			to := assign[op.ID]
			if from == to {
				continue
			}
			k := key{in, to}
			if i, ok := idx[k]; ok {
				ts[i].ToOps = append(ts[i].ToOps, op.ID)
				continue
			}
			b := g.Values[in].Bytes()
			idx[k] = len(ts)
			ts = append(ts, Transfer{Value: in, FromOp: producer[in], FromDevice: from, ToDevice: to,
				ToOps: []int{op.ID}, Bytes: b, Time: copyTime(from, to, b)})
		}
	}
	return ts
}

// perOpTransfers lists the ablation's copies: every input from the host to
// the op's device and every output back, for ops not on a host device.
func perOpTransfers(g *ops.Graph, assign []string, isHost func(string) bool, copyTime func(from, to string, bytes int64) time.Duration) []Transfer {
	producer := g.Producers()
	var ts []Transfer
	for _, op := range g.Ops {
		d := assign[op.ID]
		if isHost(d) {
			continue
		}
		for _, in := range op.In {
			b := g.Values[in].Bytes()
			ts = append(ts, Transfer{Value: in, FromOp: producer[in], FromDevice: devices.Host.Name, ToDevice: d,
				ToOps: []int{op.ID}, Bytes: b, Time: copyTime(devices.Host.Name, d, b)})
		}
		b := g.Values[op.Out].Bytes()
		ts = append(ts, Transfer{Value: op.Out, FromOp: op.ID, FromDevice: d, ToDevice: devices.Host.Name,
			Bytes: b, Time: copyTime(d, devices.Host.Name, b)})
	}
	return ts
}

// memoryFor is what each device holds under a placement: each weight once,
// the KV cache of its attention ops at the device's element size, and the
// values its ops produce or receive, each once (an upper bound on the
// activations: buffers are reused as values die, and a value copied in
// from another device takes a buffer as one made there does). resident is
// the weights and KV cache alone.
func (p *Plan) memoryFor(assign []string) (mem, resident map[string]int64) {
	g := p.Graph
	mem, resident = map[string]int64{}, map[string]int64{}
	weights := map[string]bool{}
	producer := g.Producers()
	type copied struct {
		v int
		d string
	}
	received := map[copied]bool{}
	for i, op := range g.Ops {
		for _, in := range op.In {
			if c := (copied{in, assign[i]}); assign[producer[in]] != c.d && !received[c] {
				received[c] = true
				mem[c.d] += g.Values[in].Bytes()
			}
		}
		d := assign[i]
		streamed := p.Streamed != nil && p.Streamed[i] != ""
		if op.Weight != nil && !streamed && !weights[d+"\x00"+op.Weight.Name] {
			weights[d+"\x00"+op.Weight.Name] = true
			resident[d] += op.Weight.Bytes()
		}
		if op.Kind == ops.Attention && !streamed {
			elem := 2
			if j := p.DeviceIndex(d); j >= 0 {
				elem = p.Devices[j].KVElemBytes()
			}
			resident[d] += KVCacheBytes(op, elem)
		}
		mem[d] += g.Values[op.Out].Bytes()
	}
	for d, b := range resident {
		mem[d] += b
	}
	return mem, resident
}

// KVCacheBytes is the KV cache of one attention op, keys and values for
// every position of its context, at elem bytes an element (2 for the CPU
// device's f16 cache, 4 for an f32 one: devices.Info.KVBytes).
func KVCacheBytes(op *ops.Op, elem int) int64 {
	a := op.Attn
	return 2 * int64(elem) * int64(a.Context) * int64(a.KVHeads*a.HeadDim)
}

func sortedNames(m map[string]int64) []string {
	var ns []string
	for n := range m {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}
