package planner

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"hybrid/ops"
)

// Problem is a placement problem in numbers: for each op, the time on each
// device (negative: not allowed), and the time of copying a value between
// devices. Solve finds the assignment that minimises the sum of op times and
// copy times, where a value is copied from its producer's device to each other
// device that reads it, once.
type Problem struct {
	Graph *ops.Graph
	// OpTime[i][d] is op i's time on device d; < 0 means d may not run it.
	OpTime [][]float64
	// CopyTime(v, from, to) is the time of copying value v.
	CopyTime func(v, from, to int) float64
	// Penalty[d] is added per weight byte placed on device d (used to steer
	// the solution under memory budgets); nil for none.
	Penalty []float64
	Devices int
	// Same, if set, says whether two devices are interchangeable beyond
	// what the numbers above show (equal memory caps); Solve treats devices
	// with equal op times, penalties and copy times (CopyTime may depend on
	// a value only through its size) as one class when Same allows.
	Same func(a, b int) bool
	// MaxStates bounds Solve's search: when more partial placements than
	// this survive an op, only the cheapest are kept and Inexact is set.
	// 0 is maxStates of the problem's size.
	MaxStates int
	// Inexact is set by Solve when it had to bound its search: its answer is
	// then the best found, not proven optimal (LowerBound bounds the gap).
	// Solve never clears it, so it tells whether any of several calls did.
	Inexact bool
}

// searchWork is how many (state, device class) expansions one Solve may
// make when it has to bound its search: about half a second on the 2-core
// CI machine.
const searchWork = 2_500_000

// maxStates is the default bound on the partial placements Solve keeps
// after an op: what searchWork allows for the problem's ops and classes of
// interchangeable devices, between 256 and 16384. Exact searches of Llama
// graphs on up to four unlike devices, or sixteen of two kinds, stay below
// it.
func maxStates(ops, classes int) int {
	return min(max(searchWork/max(ops*classes, 1), 256), 1<<14)
}

// LowerBound is a bound no assignment beats: every op on its fastest
// allowed device, with no copies.
func LowerBound(p *Problem) float64 {
	var lb float64
	for i, op := range p.Graph.Ops {
		best := math.Inf(1)
		for d := 0; d < p.Devices; d++ {
			if t := p.OpTime[i][d]; t >= 0 {
				if p.Penalty != nil && op.Weight != nil {
					t += p.Penalty[d] * float64(op.Weight.Bytes())
				}
				best = min(best, t)
			}
		}
		lb += best
	}
	return lb
}

// classes returns, for each device, the lowest-numbered device it is
// interchangeable with: the same time for every op, the same penalty, and
// the same copy time to and from every other device for values of every
// size in the graph.
func (p *Problem) classes() []int {
	g := p.Graph
	var sizes []int // one value of each size
	seen := map[int64]bool{}
	for _, v := range g.Values {
		if b := v.Bytes(); !seen[b] {
			seen[b] = true
			sizes = append(sizes, v.ID)
		}
	}
	same := func(a, b int) bool {
		if p.Same != nil && !p.Same(a, b) {
			return false
		}
		if p.Penalty != nil && p.Penalty[a] != p.Penalty[b] {
			return false
		}
		for i := range g.Ops {
			if p.OpTime[i][a] != p.OpTime[i][b] {
				return false
			}
		}
		for _, v := range sizes {
			if p.CopyTime(v, a, b) != p.CopyTime(v, b, a) {
				return false
			}
			for x := 0; x < p.Devices; x++ {
				if x != a && x != b && (p.CopyTime(v, a, x) != p.CopyTime(v, b, x) || p.CopyTime(v, x, a) != p.CopyTime(v, x, b)) {
					return false
				}
			}
		}
		return true
	}
	class := make([]int, p.Devices)
	for d := range class {
		class[d] = d
		for c := 0; c < d; c++ {
			if class[c] == c && same(c, d) {
				class[d] = c
				break
			}
		}
	}
	return class
}

// liveVal is a value in the solver's state: its producer's device and the
// set of devices that already hold it.
type liveVal struct {
	v, home int
	mask    uint32
}

type state struct {
	live []liveVal // sorted by v
	cost float64
	prev *state
	dev  int // device of the op that led here
}

// stateKey identifies a state: up to 15 live values packed as value id,
// home device and holder mask; more spill into a string.
type stateKey struct {
	n     int
	vals  [15]uint64
	spill string
}

func (s *state) key() stateKey { return keyOf(s.live) }

// keyOf is the key of a state whose live values are live.
func keyOf(live []liveVal) stateKey {
	var k stateKey
	k.n = len(live)
	if len(live) <= len(k.vals) {
		for i, l := range live {
			k.vals[i] = uint64(l.v)<<24 | uint64(l.home)<<16 | uint64(l.mask)
		}
		return k
	}
	var b strings.Builder
	for _, l := range live {
		b.WriteString(strconv.FormatUint(uint64(l.v)<<24|uint64(l.home)<<16|uint64(l.mask), 36))
		b.WriteByte(',')
	}
	k.spill = b.String()
	return k
}

// Solve returns the optimal assignment (a device index per op) and its cost,
// by dynamic programming over the ops in topological order. The state is, for
// every value still to be read, where it was produced and which devices hold a
// copy: two prefixes with the same state have the same best completion, so
// only the cheapest is kept. Llama graphs keep at most a handful of values
// alive, so the number of states stays small and a 22-layer model plans in
// milliseconds. Interchangeable devices (classes) are tried once: of those
// that hold no live value, only the first, which loses nothing, since
// swapping two such devices in any completion changes no cost. Where more
// than MaxStates states survive an op anyway, the cheapest are kept and
// p.Inexact is set. It returns ok=false if some op has no allowed device.
func Solve(p *Problem) (assign []int, cost float64, ok bool) {
	g := p.Graph
	last := lastReaders(g)
	class := p.classes()
	limit := p.MaxStates
	if limit <= 0 {
		n := 0
		for d, c := range class {
			if c == d {
				n++
			}
		}
		limit = maxStates(len(g.Ops), n)
	}
	frontier := map[stateKey]*state{{}: {}}
	next := map[stateKey]*state{}
	var scratch []liveVal // a candidate's live values, kept only if it wins
	firstFresh := make([]int, p.Devices)
	for _, op := range g.Ops {
		clear(next)
		wbytes := 0.0
		if op.Weight != nil {
			wbytes = float64(op.Weight.Bytes())
		}
		for _, s := range frontier {
			var held uint32
			for _, l := range s.live {
				held |= l.mask
			}
			for d := range firstFresh {
				firstFresh[d] = -1
			}
			for d := 0; d < p.Devices; d++ {
				if held&(1<<d) == 0 && firstFresh[class[d]] < 0 {
					firstFresh[class[d]] = d
				}
			}
			for d := 0; d < p.Devices; d++ {
				t := p.OpTime[op.ID][d]
				if t < 0 {
					continue
				}
				if held&(1<<d) == 0 && firstFresh[class[d]] != d {
					continue // a fresh device like one tried already
				}
				c := s.cost + t
				if p.Penalty != nil {
					c += p.Penalty[d] * wbytes
				}
				var copies float64
				scratch, copies = p.advanceInto(scratch[:0], s.live, op, d, last)
				c += copies
				k := keyOf(scratch)
				if old, dup := next[k]; !dup {
					next[k] = &state{live: slices.Clone(scratch), cost: c, prev: s, dev: d}
				} else if c < old.cost {
					// Same key, same live values: only how it got here changes.
					old.cost, old.prev, old.dev = c, s, d
				}
			}
		}
		if len(next) == 0 {
			return nil, 0, false
		}
		if len(next) > limit {
			prune(next, limit)
			p.Inexact = true
		}
		frontier, next = next, frontier
	}
	var best *state
	for _, s := range frontier {
		if best == nil || s.cost < best.cost {
			best = s
		}
	}
	assign = make([]int, len(g.Ops))
	for i, s := len(g.Ops)-1, best; i >= 0; i, s = i-1, s.prev {
		assign[i] = s.dev
	}
	return assign, best.cost, true
}

// prune keeps the limit cheapest states of m.
func prune(m map[stateKey]*state, limit int) {
	costs := make([]float64, 0, len(m))
	for _, s := range m {
		costs = append(costs, s.cost)
	}
	slices.Sort(costs)
	cut := costs[limit-1]
	kept := 0
	for k, s := range m {
		if s.cost > cut || (s.cost == cut && kept >= limit) {
			delete(m, k)
			continue
		}
		kept++
	}
}

// advance is the solver's state after op runs on device d, given the live
// values before it and, for each value, the op that reads it last: the copies
// of its inputs to d (and their time), less the values it reads last, plus its
// output unless nothing reads it.
func (p *Problem) advance(live []liveVal, op *ops.Op, d int, last []int) ([]liveVal, float64) {
	return p.advanceInto(nil, live, op, d, last)
}

// advanceInto is advance building the new live values in dst's memory.
func (p *Problem) advanceInto(dst, live []liveVal, op *ops.Op, d int, last []int) ([]liveVal, float64) {
	var c float64
	live = append(dst, live...)
	for _, in := range op.In {
		for k := range live {
			if live[k].v == in && live[k].mask&(1<<d) == 0 {
				c += p.CopyTime(in, live[k].home, d)
				live[k].mask |= 1 << d
			}
		}
	}
	kept := live[:0]
	for _, l := range live {
		if last[l.v] != op.ID {
			kept = append(kept, l)
		}
	}
	if last[op.Out] > op.ID {
		kept = append(kept, liveVal{v: op.Out, home: d, mask: 1 << d})
	}
	// Sorted by value: only the appended output can be out of place.
	for i := len(kept) - 1; i > 0 && kept[i].v < kept[i-1].v; i-- {
		kept[i], kept[i-1] = kept[i-1], kept[i]
	}
	return kept, c
}

// lastReaders returns, for each value of g, the id of the last op that reads
// it, or -1.
func lastReaders(g *ops.Graph) []int {
	last := make([]int, len(g.Values))
	for i := range last {
		last[i] = -1
	}
	for _, op := range g.Ops {
		for _, in := range op.In {
			last[in] = op.ID
		}
	}
	return last
}

// Evaluate is the cost of a given assignment under the problem's model, with
// the same copy rule as Solve. It is the brute-force check's yardstick.
func Evaluate(p *Problem, assign []int) (float64, bool) {
	g := p.Graph
	producer := g.Producers()
	held := map[[2]int]bool{}
	var c float64
	for _, op := range g.Ops {
		d := assign[op.ID]
		t := p.OpTime[op.ID][d]
		if t < 0 {
			return math.Inf(1), false
		}
		c += t
		if p.Penalty != nil && op.Weight != nil {
			c += p.Penalty[d] * float64(op.Weight.Bytes())
		}
		for _, in := range op.In {
			home := assign[producer[in]]
			if home != d && !held[[2]int{in, d}] {
				held[[2]int{in, d}] = true
				c += p.CopyTime(in, home, d)
			}
		}
	}
	return c, true
}
