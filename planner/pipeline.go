package planner

import (
	"hybrid/devices"
	"hybrid/ops"
)

// Splitting whole layers over several capped devices.
//
// With one capped device, solveWithin tries what llama.cpp's -ngl does: the
// device keeps the first or the last k layers. With several (two GPUs of one
// host, each capped below the model), that search restricts one device at a
// time, and the solver then puts every other layer on the next fastest
// device, over its cap too: no split that uses both GPUs is ever tried, and
// the model spills to the CPU although the GPUs together would hold it.
// pipelines tries what llama.cpp's --split-mode layer with --tensor-split
// does by hand: each capped device that cannot hold the whole model takes
// the next run that fits its cap, one device after another, and the solver
// places the rest (the layers no capped device took, any op it finds
// cheaper elsewhere). fill then uses the room whole layers leave.
//
// A run is of positions: the ops before the blocks (the embedding) are
// position 0, block l is position l+1, and the ops after the blocks (the
// output norm and head) the last position. In a small model the embedding
// and the head are most of the bytes (stories15m: 20 of its 25 MiB), so
// runs that leave them to the solver leave it nothing that fits; runs that
// take them in turn put the embedding with the first layers and the head
// with the last. Runs of the blocks alone are tried too, with the ops
// outside them left free or kept off the capped devices.

// shrinkTries bounds how often pipelines lowers the room of a device that a
// split's solution puts over its cap (ops it may also run outside its run,
// placed there by the solver, count against it too).
const shrinkTries = 3

// outsideOps is what a split does with the ops outside the blocks.
type outsideOps int

const (
	inRuns      outsideOps = iota // in the runs, at both ends
	freeOutside                   // left to the solver, anywhere
	offCapped                     // kept off the capped devices where another runs them
)

// positions numbers g's ops for pipelines: ops outside the blocks before
// the first block op 0, block l's ops l+1, ops outside the blocks after it
// layers+1; and returns layers, the number of blocks.
func positions(g *ops.Graph) (pos []int, layers int) {
	first := -1
	for i, op := range g.Ops {
		layers = max(layers, op.Layer+1)
		if op.Layer >= 0 && first < 0 {
			first = i
		}
	}
	pos = make([]int, len(g.Ops))
	for i, op := range g.Ops {
		switch {
		case op.Layer >= 0:
			pos[i] = op.Layer + 1
		case i < first:
			pos[i] = 0
		default:
			pos[i] = layers + 1
		}
	}
	return pos, layers
}

// tightDevices returns the capped devices that cannot hold every op they
// may run (tight), and for every capped device what each position's ops
// hold there (per[j][p], footprintAt).
func tightDevices(prob *Problem, caps []int64, infos []devices.Info) (tight []int, per [][]int64, pos []int, layers int) {
	pos, layers = positions(prob.Graph)
	per = make([][]int64, prob.Devices)
	for j := range infos {
		if caps[j] <= 0 {
			continue
		}
		var all int64
		per[j], all = footprintAt(prob, j, infos[j], pos, layers+2)
		if all > caps[j] {
			tight = append(tight, j)
		}
	}
	return tight, per, pos, layers
}

// pipelines calls consider with the solver's assignment for each split of
// positions over the tight devices (tightDevices), for every order of them,
// from the first position or from the last, with the ops outside the
// blocks in the runs, free, or off the tight devices: shares in proportion
// to the caps (shares), then each device's longest run within its cap in
// turn. solveWithin calls it when at least two devices are tight (one is
// the -ngl search's case). prob.Penalty must be nil.
func pipelines(prob *Problem, caps []int64, memory func([]int) map[string]int64, infos []devices.Info, consider func([]int)) {
	tight, per, pos, layers := tightDevices(prob, caps, infos)
	if len(tight) < 2 || layers == 0 {
		return
	}
	class := prob.classes()
	seen := map[string]bool{}
	for _, order := range orders(tight) {
		// Devices alike in every cost and in cap give the same splits in
		// either order.
		key := ""
		for _, j := range order {
			key += string(rune(class[j])) + ":" + bytesStr(caps[j]) + ","
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		for _, prefix := range []bool{true, false} {
			for _, out := range []outsideOps{inRuns, freeOutside, offCapped} {
				lo, hi := 1, layers+1 // the positions the runs cover: [lo, hi)
				if out == inRuns {
					lo, hi = 0, layers+2
				}
				// Shares in proportion to the caps first: among plans
				// predicted alike (a decode step crosses each boundary
				// once however the layers are shared), the first is kept.
				if bal := shares(order, per, caps, lo, hi); bal != nil {
					if a, _, ok := solveIn(prob, pos, lo, hi, windows(order, per, bal, lo, hi, prefix), out); ok {
						consider(a)
					}
				}
				budget := append([]int64(nil), caps...)
				for try := 0; try <= shrinkTries; try++ {
					win := windows(order, per, budget, lo, hi, prefix)
					a, _, ok := solveIn(prob, pos, lo, hi, win, out)
					if !ok {
						break
					}
					consider(a)
					// A device over its cap gets that much less room than
					// its run took, and the devices after it move up.
					mem := memory(a)
					over := false
					for _, j := range order {
						if d := mem[infos[j].Name] - caps[j]; d > 0 {
							budget[j] = win[j].bytes(per[j]) - d
							over = true
						}
					}
					if !over {
						break
					}
				}
			}
		}
	}
}

// shares returns budgets for windows that share the positions [lo, hi)
// among the devices of order in proportion to their caps, as llama.cpp's
// default --tensor-split shares layers by free memory: each device's run
// ends within half an average position past its share (and within its
// cap). A prompt pipelined over them (runtime's micro-batches) then waits
// on no device much longer than on the others, where filling each in turn
// to its cap leaves the last with little to do. nil where the caps are too
// small to share anything.
func shares(order []int, per [][]int64, caps []int64, lo, hi int) []int64 {
	var all int64
	for _, j := range order {
		all += caps[j]
	}
	if all <= 0 {
		return nil
	}
	budget := append([]int64(nil), caps...)
	for _, j := range order {
		var total int64
		for p := lo; p < hi; p++ {
			total += per[j][p]
		}
		share := float64(total) * float64(caps[j]) / float64(all)
		half := float64(total) / float64(2*(hi-lo)) // half an average position
		budget[j] = min(caps[j], int64(share+half))
	}
	return budget
}

// span is a run of positions [from, to).
type span struct{ from, to int }

// bytes is what the span's positions hold on a device where they hold per.
func (s span) bytes(per []int64) int64 {
	var n int64
	for p := s.from; p < s.to; p++ {
		n += per[p]
	}
	return n
}

// windows gives each device of order, in turn, the longest run of the
// positions [lo, hi) that fits its budget, from lo up (prefix) or from hi
// down.
func windows(order []int, per [][]int64, budget []int64, lo, hi int, prefix bool) map[int]span {
	win := map[int]span{}
	n := hi - lo
	next := 0 // positions taken so far
	for _, j := range order {
		var used int64
		k := 0
		for next+k < n {
			p := lo + next + k
			if !prefix {
				p = hi - 1 - next - k
			}
			if used+per[j][p] > budget[j] {
				break
			}
			used += per[j][p]
			k++
		}
		if prefix {
			win[j] = span{lo + next, lo + next + k}
		} else {
			win[j] = span{hi - next - k, hi - next}
		}
		next += k
	}
	return win
}

// solveIn solves the problem with each device of win allowed, of the
// positions [lo, hi), only those of its span; ops at other positions (the
// ops outside the blocks, when the runs cover the blocks alone) stay
// allowed there with freeOutside, and are forbidden where another device
// can run them with offCapped. Devices not in win are unrestricted.
func solveIn(prob *Problem, pos []int, lo, hi int, win map[int]span, out outsideOps) ([]int, float64, bool) {
	saved := prob.OpTime
	t := make([][]float64, len(saved))
	for i := range prob.Graph.Ops {
		t[i] = saved[i]
		var row []float64
		for j, w := range win {
			p := pos[i]
			in := p >= w.from && p < w.to
			if p < lo || p >= hi {
				in = out == freeOutside || !elsewhere(t[i], j)
			}
			if !in && t[i][j] >= 0 {
				if row == nil {
					row = append([]float64(nil), saved[i]...)
					t[i] = row
				}
				row[j] = -1
			}
		}
	}
	prob.OpTime = t
	defer func() { prob.OpTime = saved }()
	return Solve(prob)
}

// footprintAt is what each position's ops hold on device j if they all run
// there, as memoryFor counts it (weights once, the KV cache at the device's
// element size, every value they produce), and what every op device j may
// run holds there in all.
func footprintAt(prob *Problem, j int, d devices.Info, pos []int, n int) ([]int64, int64) {
	g := prob.Graph
	per := make([]int64, n)
	var all int64
	weights := map[string]bool{}
	for i, op := range g.Ops {
		if prob.OpTime[i][j] < 0 {
			continue
		}
		b := g.Values[op.Out].Bytes()
		if op.Weight != nil && !weights[op.Weight.Name] {
			weights[op.Weight.Name] = true
			b += op.Weight.Bytes()
		}
		if op.Kind == ops.Attention {
			b += KVCacheBytes(op, d.KVElemBytes())
		}
		per[pos[i]] += b
		all += b
	}
	return per, all
}

// orders lists the orders of devs pipelines tries: all of them for up to
// four devices, else devs and its reverse.
func orders(devs []int) [][]int {
	var out [][]int
	var perm func(prefix, rest []int)
	perm = func(prefix, rest []int) {
		if len(rest) == 0 {
			out = append(out, append([]int(nil), prefix...))
			return
		}
		for i := range rest {
			next := append(append([]int(nil), rest[:i]...), rest[i+1:]...)
			perm(append(prefix, rest[i]), next)
		}
	}
	if n := len(devs); n <= 4 {
		perm(nil, devs)
		return out
	}
	rev := make([]int, len(devs))
	for i, j := range devs {
		rev[len(devs)-1-i] = j
	}
	return [][]int{append([]int(nil), devs...), rev}
}
