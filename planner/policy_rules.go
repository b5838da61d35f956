package planner

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"hybrid/devices"
	"hybrid/ops"
)

// Rule pins ops to a device.
type Rule struct {
	Ops    []ops.Kind // empty: every kind
	Layers LayerSet   // empty: every op, in the blocks or not
	Device string     // reference
	Line   int        // line of the rule in its file
}

// matches reports whether the rule applies to op.
func (r *Rule) matches(op *ops.Op) bool {
	return (len(r.Ops) == 0 || slices.Contains(r.Ops, op.Kind)) && r.Layers.Contains(op.Layer)
}

// LayerSet is a set of block indices, written as comma-separated parts: "3",
// "0-21" (inclusive), "0-21/2" (every second block from 0: 0, 2, ..., 20),
// "1-21/2" (the odd ones), "0-3,8-11", and "none", which stands for the ops
// outside the blocks (the embedding and the output head, whose Layer is -1).
// A set without "none" never contains those ops; the empty set (a rule
// without layers) contains every op.
type LayerSet struct {
	spans []polSpan
	none  bool
	text  string
}

type polSpan struct{ from, to, step int }

// Empty reports whether the set was not given (it then matches every op).
func (s LayerSet) Empty() bool { return len(s.spans) == 0 && !s.none }

// Contains reports whether an op of the given layer (-1: outside the blocks)
// is in the set.
func (s LayerSet) Contains(layer int) bool {
	if s.Empty() {
		return true
	}
	if layer < 0 {
		return s.none
	}
	for _, sp := range s.spans {
		if layer >= sp.from && layer <= sp.to && (layer-sp.from)%sp.step == 0 {
			return true
		}
	}
	return false
}

// String returns the set as it was written.
func (s LayerSet) String() string { return s.text }

var polSpanRe = regexp.MustCompile(`^(\d+)(?:-(\d+)(?:/(\d+))?)?$`)

// polMaxLayer bounds the numbers of a layer set; no model has this many
// blocks, and it keeps the arithmetic far from overflow.
const polMaxLayer = 1 << 20

// ParseLayerSet parses the layer-set syntax described at LayerSet.
func ParseLayerSet(text string) (LayerSet, error) {
	s := LayerSet{text: text}
	for part := range strings.SplitSeq(text, ",") {
		part = strings.TrimSpace(part)
		if part == "none" {
			s.none = true
			continue
		}
		m := polSpanRe.FindStringSubmatch(part)
		if m == nil {
			return LayerSet{}, fmt.Errorf("layer set %q: %q is not N, A-B, A-B/STEP or none", text, part)
		}
		num := func(t string, def int) (int, error) {
			if t == "" {
				return def, nil
			}
			n, err := strconv.Atoi(t)
			if err != nil || n > polMaxLayer {
				return 0, fmt.Errorf("layer set %q: %s is out of range (at most %d)", text, t, polMaxLayer)
			}
			return n, nil
		}
		from, err := num(m[1], 0)
		if err != nil {
			return LayerSet{}, err
		}
		to, err := num(m[2], from)
		if err != nil {
			return LayerSet{}, err
		}
		step, err := num(m[3], 1)
		if err != nil {
			return LayerSet{}, err
		}
		if to < from {
			return LayerSet{}, fmt.Errorf("layer set %q: %q runs backwards", text, part)
		}
		if step < 1 {
			return LayerSet{}, fmt.Errorf("layer set %q: %q has step 0", text, part)
		}
		s.spans = append(s.spans, polSpan{from, to, step})
	}
	return s, nil
}

// Candidates returns the names of the devices op may run on: the devices of
// the first rule that matches it (one device, or several when the pin names
// a kind), else every allowed device. It does not ask whether a device
// supports op: a pin to a device that cannot run it is the caller's error
// to report. After Check, a pin's devices are always allowed ones.
func (p *Policy) Candidates(op *ops.Op, devs []devices.Info) []string {
	var out []string
	for _, r := range p.Rules {
		if !r.matches(op) {
			continue
		}
		for _, d := range Resolve(r.Device, devs) {
			if p.allowed(d, devs) {
				out = append(out, d.Name)
			}
		}
		return out
	}
	for _, d := range devs {
		if p.allowed(d, devs) {
			out = append(out, d.Name)
		}
	}
	return out
}
