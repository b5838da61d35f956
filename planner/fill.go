package planner

import (
	"math"
	"sort"

	"hybrid/devices"
	"hybrid/ops"
)

// Filling a capped device's leftover memory.
//
// Under a memory cap, the searches of solveWithin place whole layers: a
// per-byte price moves every identical layer at once, and the -ngl-style
// splits move layers one by one. What is left on the capped device after k
// whole layers (up to one layer's worth) stays empty, although part of the
// next layer would fit there: its feed-forward mat-muls, say, for two small
// activation copies. fill uses it. It takes one window of ops at a time (the
// ops of one layer, or those outside the blocks), keeps every other op where
// the plan has it, and finds the cheapest placement of the window's ops that
// keeps every capped device within its cap (solveBudget); the best window's
// placement replaces the plan when it is strictly cheaper and fits, and the
// search goes on from there for a few rounds.

// fillRounds bounds the rounds of fill: each round tries every window once and
// keeps the best. A round fills what one layer's ops can use; more rounds
// spread what is left over the ops of other layers.
const fillRounds = 4

// windowMax bounds the ops of one window of fill, and so the work of each
// solveBudget: a Llama layer has 15 ops (17 in the last layer of a prefill);
// a larger group, as in a graph with no layers, is cut into runs.
const windowMax = 32

// windowWork and fillWork bound the work of solveBudget (states made, each
// counted as stateWork, plus front members compared) in one window and in one
// call of fill. A layer of TinyLlama or Llama-7B under a GPU cap takes up to
// about 150,000, a whole fill 1 to 2.5 million; a state costs about 1 µs on
// the 2-core CI machine. A window that needs more than windowWork is cut in
// two, and once fillWork is spent fill keeps what it has found, which bounds
// its search to about a third of a second whatever the graph.
const (
	windowWork = 1_000_000
	fillWork   = 10_000_000
	// stateWork is what making one state costs against comparing two front
	// members: roughly 30 times as much (copying and sorting its live
	// values, hashing its key).
	stateWork = 30
)

// frontMax bounds the placements solveBudget keeps per solver state. The
// window of one Llama layer, seven weights and fifteen outputs of several
// sizes, has Pareto fronts of time against bytes of up to about 130 (TinyLlama
// and Llama-7B under GPU caps); past the bound a front is thinned to every
// other member (the result may then miss the window's optimum, but it still
// fits, since fill checks every result).
const frontMax = 256

// fill improves assignment a under the memory caps (0 = none) by moving ops
// onto capped devices with room left, or elsewhere, one window at a time, and
// returns the result: a itself unless a placement that fits every cap and is
// strictly cheaper by Evaluate was found (or if a itself does not fit).
// prob.Penalty must be nil.
func fill(prob *Problem, a []int, caps []int64, memory func([]int) map[string]int64, infos []devices.Info) []int {
	var capped []int
	for j, c := range caps {
		if c > 0 {
			capped = append(capped, j)
		}
	}
	if len(capped) == 0 || prob.Devices < 2 {
		return a
	}
	g := prob.Graph
	cost, ok := Evaluate(prob, a)
	if !ok {
		return a
	}
	if ok, _ := fitsCaps(memory(a), caps, infos); !ok {
		return a
	}
	windows := fillWindows(g)
	spent := 0 // work of solveBudget, bounded by fillWork
	times := make([][]float64, len(g.Ops))
	fixed := make([][]float64, len(g.Ops))
	bytes := make([][]int64, len(g.Ops)) // the window's rows of foot
	for round := 0; round < fillRounds; round++ {
		mem := memory(a)
		// foot[i][j] is what op i adds to capped device j's memory when it
		// runs there rather than elsewhere, measured one op at a time from a
		// (so a weight two ops share counts for each: the sum is an upper
		// bound, and every result is checked against memory itself).
		foot := make([][]int64, len(g.Ops))
		b := append([]int(nil), a...)
		for i := range g.Ops {
			foot[i] = make([]int64, prob.Devices)
			for _, j := range capped {
				if prob.OpTime[i][j] < 0 {
					continue
				}
				if a[i] != j {
					b[i] = j
					foot[i][j] = max(0, memory(b)[infos[j].Name]-mem[infos[j].Name])
				} else if e := other(prob.OpTime[i], j); e >= 0 {
					b[i] = e
					foot[i][j] = max(0, mem[infos[j].Name]-memory(b)[infos[j].Name])
				}
				b[i] = a[i]
			}
			row := make([]float64, prob.Devices)
			for d := range row {
				row[d] = -1
			}
			row[a[i]] = prob.OpTime[i][a[i]]
			fixed[i] = row
		}
		var next []int
		nextCost := cost
		queue := append([][]int(nil), windows...)
		for len(queue) > 0 && spent < fillWork {
			w := queue[0]
			queue = queue[1:]
			if !choice(prob.OpTime, w) {
				continue
			}
			budget := make([]int64, prob.Devices)
			for d := range budget {
				budget[d] = -1
			}
			for _, j := range capped {
				// The room for the window's ops: the cap less what the
				// ops outside the window hold. A cap the window cannot
				// reach with all its ops there (a host's memory) is no
				// budget: left in, it would make the fronts trade its
				// bytes against the binding cap's for nothing.
				room, all := caps[j]-mem[infos[j].Name], int64(0)
				for _, i := range w {
					if a[i] == j {
						room += foot[i][j]
					}
					all += foot[i][j]
				}
				if all > room {
					budget[j] = room
				}
			}
			// One budgeted device: the window's ops may go anywhere. With
			// several, fronts that trade the bytes of each against the
			// others' grow past any bound (two capped GPUs and a host: a
			// window of TinyLlama passed a million states), so the ops go
			// to one budgeted device at a time, each op choosing between
			// where it is and there: what leaves a device only frees it.
			var targets [][]int64
			nb := 0
			for _, b := range budget {
				if b >= 0 {
					nb++
				}
			}
			if nb <= 1 {
				targets = [][]int64{budget}
			} else {
				for j, b := range budget {
					if b < 0 {
						continue
					}
					one := make([]int64, len(budget))
					for d := range one {
						one[d] = -1
					}
					one[j] = b
					targets = append(targets, one)
				}
			}
			for _, tb := range targets {
				copy(times, fixed)
				clear(bytes)
				for _, i := range w {
					times[i] = prob.OpTime[i]
					bytes[i] = foot[i]
				}
				if len(targets) > 1 {
					for _, i := range w {
						row := append([]float64(nil), fixed[i]...)
						for d, b := range tb {
							if b >= 0 {
								row[d] = prob.OpTime[i][d]
							}
						}
						times[i] = row
					}
				}
				sub := &Problem{Graph: g, OpTime: times, CopyTime: prob.CopyTime, Devices: prob.Devices}
				c, _, work, ok := solveBudget(sub, bytes, tb, min(windowWork, fillWork-spent))
				spent += work
				if !ok {
					if work > windowWork && len(w) > 1 {
						// Too many choices at once: try each half.
						queue = append(queue, w[:len(w)/2], w[len(w)/2:])
						break
					}
					continue
				}
				if ok, _ := fitsCaps(memory(c), caps, infos); !ok {
					continue
				}
				// Strictly cheaper, beyond the rounding of summing the
				// same terms in another order.
				if ev, ok := Evaluate(prob, c); ok && ev < nextCost-1e-12*math.Abs(nextCost) {
					next, nextCost = c, ev
				}
			}
		}
		if next == nil {
			break
		}
		a, cost = next, nextCost
	}
	return a
}

// fillWindows groups the ops of g for fill: the ops of each layer, and those
// outside the blocks, in runs of at most windowMax ops in graph order.
func fillWindows(g *ops.Graph) [][]int {
	byLayer := map[int][]int{}
	var layers []int
	for i, op := range g.Ops {
		if _, seen := byLayer[op.Layer]; !seen {
			layers = append(layers, op.Layer)
		}
		byLayer[op.Layer] = append(byLayer[op.Layer], i)
	}
	var out [][]int
	for _, l := range layers {
		w := byLayer[l]
		for len(w) > windowMax {
			out = append(out, w[:windowMax])
			w = w[windowMax:]
		}
		out = append(out, w)
	}
	return out
}

// choice reports whether some op of window w may run on more than one device.
func choice(times [][]float64, w []int) bool {
	for _, i := range w {
		n := 0
		for _, t := range times[i] {
			if t >= 0 {
				n++
			}
		}
		if n > 1 {
			return true
		}
	}
	return false
}

// other returns a device other than j that may run an op of times row, or -1.
func other(row []float64, j int) int {
	for d, t := range row {
		if d != j && t >= 0 {
			return d
		}
	}
	return -1
}

// fitsCaps reports whether the memory use mem respects every cap (0 = none),
// and the devices over theirs.
func fitsCaps(mem map[string]int64, caps []int64, infos []devices.Info) (bool, []int) {
	var over []int
	for j, c := range caps {
		if c > 0 && mem[infos[j].Name] > c {
			over = append(over, j)
		}
	}
	return len(over) == 0, over
}

// bstate is a state of solveBudget: Solve's state plus the bytes its ops put
// on each budgeted device.
type bstate struct {
	live []liveVal
	cost float64
	used []int64 // by budgeted device, in the order of solveBudget's slots
	prev *bstate
	dev  int
}

// solveBudget is Solve under budgets: bytes[i][d] is what op i adds to device
// d's memory when it runs there (a nil row: nothing), budget[d] what device d
// may hold in all (< 0: no budget). It returns the cheapest assignment within
// every budget, by the same dynamic programming as Solve, keeping for each
// state not one prefix but every prefix that no other beats on time and on the
// bytes of every budgeted device (a Pareto front, of at most frontMax). The
// fronts stay small when few ops have a choice, as in fill's windows; over a
// whole graph of free ops they would not, so the search gives up once its work
// (states made plus front members compared) passes limit. Penalty is
// ignored. ok is false when nothing fits or the search gave up (work > limit).
func solveBudget(p *Problem, bytes [][]int64, budget []int64, limit int) (assign []int, cost float64, work int, ok bool) {
	g := p.Graph
	last := lastReaders(g)
	var slots []int // the budgeted devices
	slot := make([]int, p.Devices)
	for d := range slot {
		slot[d] = -1
		if d < len(budget) && budget[d] >= 0 {
			slot[d] = len(slots)
			slots = append(slots, d)
		}
	}
	// Past the last op that can add bytes, the bytes no longer matter: one
	// prefix per state, the cheapest, as in Solve.
	lastBytes := -1
	for i, row := range bytes {
		for _, d := range slots {
			if row != nil && row[d] != 0 {
				lastBytes = i
			}
		}
	}
	// The fronts are kept in the order their states first appear, not in a
	// map's, so that ties and thinning come out the same on every run.
	fronts := [][]*bstate{{{used: make([]int64, len(slots))}}}
	for _, op := range g.Ops {
		index := map[stateKey]int{}
		var next [][]*bstate
		for _, front := range fronts {
			for _, s := range front {
				for d := 0; d < p.Devices; d++ {
					t := p.OpTime[op.ID][d]
					if t < 0 {
						continue
					}
					used := s.used
					if k := slot[d]; k >= 0 && bytes[op.ID] != nil && bytes[op.ID][d] != 0 {
						if s.used[k]+bytes[op.ID][d] > budget[d] {
							continue
						}
						used = append([]int64(nil), s.used...)
						used[k] += bytes[op.ID][d]
					}
					kept, copies := p.advance(s.live, op, d, last)
					ns := &bstate{live: kept, cost: s.cost + t + copies, used: used, prev: s, dev: d}
					k := keyOf(kept)
					x, seen := index[k]
					if !seen {
						x = len(next)
						index[k] = x
						next = append(next, nil)
					}
					var compared int
					next[x], compared = admit(next[x], ns)
					work += stateWork + compared
				}
			}
			if work > limit {
				return nil, 0, work, false
			}
		}
		if len(next) == 0 {
			return nil, 0, work, false
		}
		if op.ID >= lastBytes {
			for x, front := range next {
				if len(front) > 1 {
					next[x] = []*bstate{cheapest(front)}
				}
			}
		}
		fronts = next
	}
	var best *bstate
	for _, front := range fronts {
		if s := cheapest(front); best == nil || s.cost < best.cost {
			best = s
		}
	}
	assign = make([]int, len(g.Ops))
	for i, s := len(g.Ops)-1, best; i >= 0; i, s = i-1, s.prev {
		assign[i] = s.dev
	}
	return assign, best.cost, work, true
}

// cheapest returns the member of a non-empty front with the least time.
func cheapest(front []*bstate) *bstate {
	best := front[0]
	for _, s := range front[1:] {
		if s.cost < best.cost {
			best = s
		}
	}
	return best
}

// admit adds s to the Pareto front unless a member is as cheap and uses no
// more bytes anywhere, dropping the members s beats so, and thins the front
// past frontMax members. It returns the front and the members it compared.
// With one budgeted device the front is kept sorted by bytes, and so by
// falling time, and s finds its place by binary search.
func admit(front []*bstate, s *bstate) ([]*bstate, int) {
	if len(s.used) == 1 {
		u := s.used[0]
		// front[:i] use no more bytes than s; front[lo:] no fewer.
		i := sort.Search(len(front), func(k int) bool { return front[k].used[0] > u })
		if i > 0 && front[i-1].cost <= s.cost {
			return front, 1
		}
		lo := sort.Search(i, func(k int) bool { return front[k].used[0] >= u })
		hi := lo
		for hi < len(front) && front[hi].cost >= s.cost {
			hi++
		}
		if hi == lo {
			front = append(front, nil)
			copy(front[lo+1:], front[lo:])
		} else {
			front = append(front[:lo+1], front[hi:]...)
		}
		front[lo] = s
		if len(front) > frontMax {
			front = thin(front)
		}
		return front, 1 + hi - lo
	}
	for _, o := range front {
		if o.cost <= s.cost && within(o.used, s.used) {
			return front, len(front)
		}
	}
	kept := front[:0]
	for _, o := range front {
		if !(s.cost <= o.cost && within(s.used, o.used)) {
			kept = append(kept, o)
		}
	}
	n := len(front)
	kept = append(kept, s)
	if len(kept) > frontMax {
		kept = thin(kept)
	}
	return kept, 2 * n
}

// thin halves a front that outgrew frontMax, keeping members spread evenly
// from the fewest bytes to the most (and the two ends), so that what is left
// still offers every trade of time for bytes, in coarser steps.
func thin(front []*bstate) []*bstate {
	total := func(s *bstate) int64 {
		var n int64
		for _, u := range s.used {
			n += u
		}
		return n
	}
	sort.SliceStable(front, func(a, b int) bool {
		ta, tb := total(front[a]), total(front[b])
		if ta != tb {
			return ta < tb
		}
		return front[a].cost < front[b].cost
	})
	out := make([]*bstate, 0, frontMax/2+1)
	for i := 0; i < len(front); i += 2 {
		out = append(out, front[i])
	}
	if len(front)%2 == 0 {
		out = append(out, front[len(front)-1])
	}
	return out
}

// within reports whether a uses no more than b on every device.
func within(a, b []int64) bool {
	for i := range a {
		if a[i] > b[i] {
			return false
		}
	}
	return true
}
