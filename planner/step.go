package planner

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"hybrid/ops"
)

// MakeStep plans a step of its own shape (a prefill of g.Tokens tokens) on
// the weights and KV cache that the decode plan made resident. Each op may
// run on any device the policy allows, as Make's ops do, with two
// differences: an attention op runs with its KV cache, on its decode
// device, or on a device that can stream a cache from one in host memory
// (Candidate.KVStreams, KVHost) at the cost of copying the cells before
// the step in and the step's own back; and an op whose weight is resident
// elsewhere runs on a device
// that can stream weights (Candidate.Streams) at the cost of copying the
// weight in for the step (the link's time for its bytes, from the cheapest
// device that holds it) on top of its own. A GPU multiplying a 512-token
// prompt with a layer held in host memory can beat the CPU by far more
// than the copy costs; a decode step never pays it.
//
// Each streaming device needs room for two streamed weights at a time
// (one copying while the other is read) beside what the decode plan keeps
// there: weights that do not fit are not streamed to it, and a note says so.
func MakeStep(g *ops.Graph, cands []Candidate, pol *Policy, c *Costs, decode *Plan) (*Plan, error) {
	c = c.For(cands)
	p, prob, caps, err := prepare(g, cands, pol, c)
	if err != nil {
		return nil, err
	}
	// Where the decode plan keeps each weight and each attention op.
	held := map[string]map[string]bool{}
	attnDev := map[string]string{}
	for i, op := range decode.Graph.Ops {
		d := decode.Device[i]
		if op.Weight != nil {
			if held[op.Weight.Name] == nil {
				held[op.Weight.Name] = map[string]bool{}
			}
			held[op.Weight.Name][d] = true
		}
		if op.Kind == ops.Attention {
			attnDev[op.Name] = d
		}
	}
	// What each streaming device has left under its cap beside the decode
	// plan's weights and cache: two streamed weights must fit there.
	room := make([]int64, len(cands))
	for j, cd := range cands {
		room[j] = -1 // not a streaming device
		if cd.Streams {
			room[j] = math.MaxInt64
			if caps[j] > 0 {
				room[j] = max(caps[j]-decode.Resident[cd.Info.Name], 0)
			}
		}
	}
	p.Streamed = make([]string, len(g.Ops))
	from := make([][]string, len(g.Ops)) // per op and device: the device streamed from, if any
	tooBig := map[string]int64{}         // per streaming device: the largest weight refused
	largest := make([]int64, len(cands)) // per streaming device: the largest weight it may stream
	var attn []int                       // the attention ops, placed after the weights
	for i, op := range g.Ops {
		from[i] = make([]string, len(cands))
		if op.Kind == ops.Attention {
			if _, ok := attnDev[op.Name]; !ok {
				return nil, fmt.Errorf("planner: op %s has no KV cache in the decode plan", op)
			}
			attn = append(attn, i)
			continue
		}
		if op.Weight == nil {
			continue
		}
		homes := held[op.Weight.Name]
		if len(homes) == 0 {
			return nil, fmt.Errorf("planner: weight %s of op %s is resident nowhere in the decode plan", op.Weight.Name, op)
		}
		bytes := op.Weight.Bytes()
		for j, cd := range cands {
			if homes[cd.Info.Name] || prob.OpTime[i][j] < 0 {
				continue
			}
			if room[j] < 0 {
				prob.OpTime[i][j] = -1
				continue
			}
			if 2*bytes > room[j] {
				prob.OpTime[i][j] = -1
				tooBig[cd.Info.Name] = max(tooBig[cd.Info.Name], bytes)
				continue
			}
			best := time.Duration(-1)
			for _, src := range p.Devices {
				if homes[src.Name] {
					if t := p.copyTime(c, src.Name, cd.Info.Name, bytes); best < 0 || t < best {
						best, from[i][j] = t, src.Name
					}
				}
			}
			p.Estimates[i][j] += best
			prob.OpTime[i][j] += best.Seconds()
			largest[j] = max(largest[j], bytes)
		}
	}
	// An attention op runs where its KV cache is resident, or on a device
	// that streams caches from a cache in host memory: there it attends
	// over a cache of its own, the cells before the step (the graph's Past)
	// copied in and the step's cells copied back (the link's time for them
	// on top of its own). That cache, the cells before the step and the
	// step's, lies in the two slots of streamed weights, keys in one and
	// values in the other (no op reads a slot while attention runs): free
	// where the slots hold weights that size already, else they grow.
	kvTooBig := map[string]int64{}
	for _, i := range attn {
		op := g.Ops[i]
		home := attnDev[op.Name]
		h := slices.IndexFunc(cands, func(cd Candidate) bool { return cd.Info.Name == home })
		for j, cd := range cands {
			if cd.Info.Name == home || prob.OpTime[i][j] < 0 {
				continue
			}
			if h < 0 || !cands[h].KVHost || !cd.KVStreams || room[j] < 0 {
				prob.OpTime[i][j] = -1
				continue
			}
			if half := kvCellBytes(op, g.Past+g.Tokens, cd.Info.KVElemBytes()) / 2; 2*max(half, largest[j]) > room[j] {
				prob.OpTime[i][j] = -1
				kvTooBig[cd.Info.Name] = 2 * half
				continue
			}
			elem := cands[h].Info.KVElemBytes()
			back := p.copyTime(c, cd.Info.Name, home, kvCellBytes(op, g.Values[op.Out].Rows, elem))
			if g.Past > 0 {
				back += p.copyTime(c, home, cd.Info.Name, kvCellBytes(op, g.Past, elem))
			}
			p.Estimates[i][j] += back
			prob.OpTime[i][j] += back.Seconds()
			from[i][j] = home
		}
	}
	assign, _, ok := Solve(prob)
	if !ok {
		return nil, fmt.Errorf("planner: policy %s: no placement of the %d-token step keeps every op on a device that holds or can stream its weight: %w", pol.Name, g.Tokens, ErrNoPlan)
	}
	p.Device = names(p.Devices, assign)
	for i, j := range assign {
		p.Streamed[i] = from[i][j]
	}
	p.finish(c)
	// The decode plan's resident memory stays; streaming adds its two slots.
	stream := map[string]int64{} // per device: its streaming slot, the largest weight or half a cache streamed
	var streamTime, kvTime time.Duration
	for i, src := range p.Streamed {
		switch op := g.Ops[i]; {
		case src == "":
		case op.Kind == ops.Attention:
			j := p.DeviceIndex(p.Device[i])
			stream[p.Device[i]] = max(stream[p.Device[i]], kvCellBytes(op, g.Past+g.Tokens, p.Devices[j].KVElemBytes())/2)
			elem := p.Devices[p.DeviceIndex(src)].KVElemBytes()
			kvTime += p.copyTime(c, p.Device[i], src, kvCellBytes(op, g.Values[op.Out].Rows, elem))
			if g.Past > 0 {
				kvTime += p.copyTime(c, src, p.Device[i], kvCellBytes(op, g.Past, elem))
			}
		default:
			b := op.Weight.Bytes()
			stream[p.Device[i]] = max(stream[p.Device[i]], b)
			streamTime += p.copyTime(c, src, p.Device[i], b)
		}
	}
	mem := map[string]int64{}
	for d, b := range p.Memory {
		mem[d] = b - p.Resident[d] // the step's activations
	}
	for d, b := range decode.Resident {
		mem[d] += b
	}
	for d, b := range stream {
		mem[d] += 2 * b
	}
	p.Memory, p.Resident = mem, maps.Clone(decode.Resident)
	if count, total := p.StreamedWeights(); count > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("%d weights (%s) are streamed in for each %d-token step, %s of its predicted time; they stay resident where the decode plan keeps them", count, bytesStr(total), g.Tokens, streamTime.Round(time.Microsecond)))
	}
	if count, total := p.StreamedCaches(); count > 0 {
		moved := fmt.Sprintf("each %d-token step's keys and values are copied back to it", g.Tokens)
		if g.Past > 0 {
			moved = fmt.Sprintf("the keys and values of the %d cells before each %d-token step are copied in, and the step's own back", g.Past, g.Tokens)
		}
		p.Notes = append(p.Notes, fmt.Sprintf("%d attention ops run away from their KV cache: %s (%s in all), %s of its predicted time", count, moved, bytesStr(total), kvTime.Round(time.Microsecond)))
	}
	for _, d := range sortedNames(kvTooBig) {
		p.Notes = append(p.Notes, fmt.Sprintf("no attention runs on %s away from its KV cache: the step's cells of one layer (%s, halves in the two slots of streamed weights) do not fit under its cap", d, bytesStr(kvTooBig[d])))
	}
	for _, d := range sortedNames(tooBig) {
		p.Notes = append(p.Notes, fmt.Sprintf("weights of up to %s are not streamed to %s: two at a time do not fit beside the decode plan's %s under its cap", bytesStr(tooBig[d]), d, bytesStr(decode.Resident[d])))
	}
	return p, nil
}

// promptTokens is the longest step a prompt is run in (runtime.MaxBatch):
// the size whose plan decides whether room for streaming is worth keeping.
const promptTokens = 512

// streamingPays says whether a prompt's step of promptTokens would run op
// on device j, its weight streamed in from another candidate, faster than
// on that candidate: op's work scaled from its graph's tokens, the copy of
// its weight at the link's cost.
func streamingPays(p *Plan, c *Costs, op *ops.Op, j int) bool {
	scale := float64(promptTokens) / float64(max(p.Graph.Tokens, 1))
	w := op.Weight.Bytes()
	big := *op
	big.Cost = ops.Cost{
		FLOPs:        int64(float64(op.Cost.FLOPs) * scale),
		BytesRead:    w + int64(float64(max(op.Cost.BytesRead-w, 0))*scale),
		BytesWritten: int64(float64(op.Cost.BytesWritten) * scale),
	}
	d := p.Devices[j]
	here, _ := c.OpTime(d, &big, promptTokens)
	for k, h := range p.Devices {
		if k == j {
			continue
		}
		there, _ := c.OpTime(h, &big, promptTokens)
		if here+p.copyTime(c, h.Name, d.Name, w) < there {
			return true
		}
	}
	return false
}

// reserveStreaming keeps room on each capped device that can stream
// weights for two of the largest weights of the model's blocks, when the
// model does not fit under the cap anyway: the decode plan then leaves
// some layers elsewhere, and a prefill (MakeStep) can stream their weights
// in. The output head and the embedding are not reserved for: the head is
// the most valuable weight to keep resident, and a table lookup is never
// worth streaming. No room is kept where streaming would not pay for a
// prompt (streamingPays: a slow link), nor above half the cap. It returns
// the caps less the reserves, and a note for each.
func reserveStreaming(p *Plan, cands []Candidate, pol *Policy, c *Costs, caps []int64) ([]int64, []string) {
	g := p.Graph
	caps = slices.Clone(caps)
	var notes []string
	for j, cd := range cands {
		if !cd.Streams || caps[j] <= 0 {
			continue
		}
		all := make([]string, len(g.Ops))
		for i := range all {
			all[i] = cd.Info.Name
		}
		mem, _ := p.memoryFor(all)
		if mem[cd.Info.Name] <= caps[j] {
			continue // the whole model fits: nothing will be streamed
		}
		var largest *ops.Op
		for _, op := range g.Ops {
			if op.Weight != nil && op.Layer >= 0 && slices.Contains(pol.Candidates(op, p.Devices), cd.Info.Name) &&
				(largest == nil || op.Weight.Bytes() > largest.Weight.Bytes()) {
				largest = op
			}
		}
		if largest == nil || !streamingPays(p, c, largest, j) {
			continue
		}
		if r := 2 * largest.Weight.Bytes(); r <= caps[j]/2 {
			caps[j] -= r
			notes = append(notes, fmt.Sprintf("%s keeps %s of its cap free for two streamed weights: a prompt multiplies there with weights of the layers it does not hold", describe(cd.Info), bytesStr(r)))
		}
	}
	return caps, notes
}
