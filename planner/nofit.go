package planner

import (
	"fmt"
	"strings"

	"hybrid/ops"
)

// What to lower when nothing fits.
//
// A plan that fits no device's memory says why in the terms a user can
// change: which device's cap is too small, for what (weights, the KV cache
// at the context asked for, activations), and the largest context that
// would fit, since the KV cache is the one part that the context sizes.

// footprint is what a set of ops holds on one device, as memoryFor counts
// it, in its parts.
type footprint struct {
	weights, kv, values int64
	ctx                 int   // the context the KV cache is sized for
	kvPerPos            int64 // KV bytes per position of context
	ops                 int
}

func (f footprint) total() int64 { return f.weights + f.kv + f.values }

// add counts op i of g on a device whose KV elements take elem bytes;
// seen dedups weights.
func (f *footprint) add(g *ops.Graph, i, elem int, seen map[string]bool) {
	op := g.Ops[i]
	f.ops++
	f.values += g.Values[op.Out].Bytes()
	if op.Weight != nil && !seen[op.Weight.Name] {
		seen[op.Weight.Name] = true
		f.weights += op.Weight.Bytes()
	}
	if op.Kind == ops.Attention && op.Attn.Context > 0 {
		kv := KVCacheBytes(op, elem)
		f.kv += kv
		f.kvPerPos += kv / int64(op.Attn.Context)
		f.ctx = op.Attn.Context
	}
}

// describe words f: "1.20 GiB: weights 1.00 GiB, KV cache 200.0 MiB at a
// context of 4096 positions, activations 1.0 MiB".
func (f footprint) describe() string {
	s := fmt.Sprintf("%s: weights %s", bytesStr(f.total()), bytesStr(f.weights))
	if f.kv > 0 {
		s += fmt.Sprintf(", KV cache %s at a context of %d positions", bytesStr(f.kv), f.ctx)
	}
	return s + fmt.Sprintf(", activations %s", bytesStr(f.values))
}

// lower says what would make f fit in room: the largest context at which it
// does, where the weights and activations alone fit, else that they do not.
// shared says room is several devices' caps together, each holding whole
// ops, so that the context may have to be lower still.
func (f footprint) lower(room int64, raise string, shared bool) string {
	fixed := f.weights + f.values
	if f.kvPerPos > 0 && fixed < room {
		if n := (room - fixed) / f.kvPerPos; n >= 1 && int(n) < f.ctx {
			if shared {
				return fmt.Sprintf("lower the context to at most %d positions (perhaps less: each device holds whole ops), or %s", n, raise)
			}
			return fmt.Sprintf("lower the context to at most %d positions, or %s", n, raise)
		}
	}
	return fmt.Sprintf("the weights and activations alone take %s: %s", bytesStr(fixed), raise)
}

// capDesc says where device j's cap comes from: "77.20 GiB (memory: auto
// at p.yaml:3, free 78.20 GiB less a margin of 1.00 GiB)", "8.00 GiB
// (p.yaml:4)" or "79.20 GiB (its memory)".
func (p *Plan) capDesc(pol *Policy, caps []int64, j int) string {
	d := p.Devices[j]
	c, line, auto := pol.memoryCap(d)
	switch {
	case line > 0 && c == caps[j] && auto:
		return fmt.Sprintf("%s (memory: auto at %s:%d, %s)", bytesStr(caps[j]), pol.Path, line, autoWhat(d))
	case line > 0 && c == caps[j]:
		return fmt.Sprintf("%s (memory cap at %s:%d)", bytesStr(caps[j]), pol.Path, line)
	}
	return bytesStr(caps[j]) + " (its memory)"
}

// noFit explains why no placement of the problem fits the caps (0 = none):
// a capped device that must hold more than its cap, the ops that only it
// may run; or devices whose caps together are less than the least the model
// needs; else that no placement was found that fits. The error wraps
// ErrNoPlan.
func (p *Plan) noFit(prob *Problem, caps []int64, pol *Policy) error {
	g := p.Graph
	// The ops only one device may run.
	forced := make([]footprint, len(caps))
	seen := make([]map[string]bool, len(caps))
	for j := range seen {
		seen[j] = map[string]bool{}
	}
	// The least the whole model needs: each weight once, each KV cache at
	// the smallest element size of a device that may hold it.
	var least footprint
	leastSeen := map[string]bool{}
	for i := range g.Ops {
		only, n, elem := -1, 0, 0
		for j, t := range prob.OpTime[i] {
			if t < 0 {
				continue
			}
			n++
			only = j
			if e := p.Devices[j].KVElemBytes(); elem == 0 || e < elem {
				elem = e
			}
		}
		if n == 1 {
			forced[only].add(g, i, p.Devices[only].KVElemBytes(), seen[only])
		}
		least.add(g, i, elem, leastSeen)
	}
	for j, f := range forced {
		if caps[j] > 0 && f.total() > caps[j] {
			d := p.Devices[j].Name
			raise := "raise its cap, or let other devices run some of its ops (the policy's devices and rules)"
			return fmt.Errorf("planner: policy %s: %s must hold the %d ops only it may run, %s, more than its cap of %s: %s: %w",
				pol.Name, d, f.ops, f.describe(), p.capDesc(pol, caps, j), f.lower(caps[j], raise, false), ErrNoPlan)
		}
	}
	// The devices that may run any op, and what they may hold in all.
	var room int64
	var capped []string
	for j := range caps {
		any := false
		for i := range g.Ops {
			any = any || prob.OpTime[i][j] >= 0
		}
		if !any {
			continue
		}
		if caps[j] <= 0 || room < 0 {
			room = -1 // a device without a cap: the sum is no bound
		} else {
			room += caps[j]
		}
		if caps[j] > 0 {
			capped = append(capped, p.Devices[j].Name+" "+p.capDesc(pol, caps, j))
		}
	}
	if room > 0 && least.total() > room {
		return fmt.Errorf("planner: policy %s: the model needs at least %s, more than the %s its devices may hold (%s): %s: %w",
			pol.Name, least.describe(), bytesStr(room), strings.Join(capped, "; "), least.lower(room, "raise a cap", len(capped) > 1), ErrNoPlan)
	}
	return fmt.Errorf("planner: policy %s: no placement fits the devices' memory (the model needs at least %s; caps: %s): raise a cap or lower the context: %w",
		pol.Name, least.describe(), strings.Join(capped, "; "), ErrNoPlan)
}
