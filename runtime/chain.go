package runtime

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"hybrid/devices"
	"hybrid/ops"
)

// stepChain runs one sequence's decode steps (ForwardGreedy's, at the
// sequence's first cells, or a sampler's picks) so that a GPU does not wait
// for the host between them. Where every op of a one-token step runs in
// one run on one device that keeps its picks (devices.Chainer), the steps
// after a pick are queued, each one's token the device's own pick of the
// step before, before that pick is read back: up to depth steps at once,
// as many as the caller may still want. The host's part of a step (walking
// the ops, reading the pick, the caller's work with it) then overlaps the
// device's steps, and a host that stalls for a while (its core taken by
// another process) finds the device still busy with the steps queued
// ahead. Sampled picks are chained where the device makes them too
// (devices.SampleChainer, Sampler.Chained), each with the draw the sampler
// would have taken for it. Elsewhere it is ForwardGreedy (and, for a
// sampler, the caller's own steps).
type stepChain struct {
	e     *Executor
	ch    devices.Chainer       // nil: not chained
	sch   devices.SampleChainer // ch, where it makes sampled picks too
	c     *compiled             // the one-token step's
	depth int                   // the most steps queued at once (chainDepth)
	front int                   // position of the oldest step queued whose pick is not yet read
	ahead int                   // steps queued whose picks are not yet read: positions front, front+1, …
	qbase int                   // their sequence's first cell
	last  int32                 // the pick step returned last: the token of the step at front
	s     *Sampler              // the queued steps' sampler; nil: greedy picks
	draws []float32             // the queued sampled picks' draws, oldest first

	// Where depth grows (chainGrow, a device that times its picks): the
	// shortest device time seen between two picks queued back to back, a
	// step's device time (0: none yet; observe).
	grow  bool
	pt    devices.PickTimer
	stepT time.Duration
}

// chainDepth is the most steps a chain queues at once: the
// environment's HYBRID_GREEDY_CHAIN (2..devices.MaxChained; 0 or 1 waits
// for each pick before the next step, ForwardGreedy's steps, to compare),
// else defaultChain.
var chainDepth = func() int {
	if v, err := strconv.Atoi(os.Getenv("HYBRID_GREEDY_CHAIN")); err == nil && v >= 0 {
		return min(v, devices.MaxChained)
	}
	return defaultChain
}()

// defaultChain is chainDepth's default, eight, from which a chain grows
// where a step is short (chainGrow). Measured
// on an H200 (tg128 tok/s, hybrid pinned to one host core alone → sharing
// it with a busy loop, bench/cuda/slow-host.sh's test; HYBRID_GREEDY_CHAIN
// 0 / 2 / 4 / 8): TinyLlama Q4_0 1373 → 695, 1520 → 888, 1527 → 1080, 1520
// → 1417 (a second round 1452 → 718, 1518 → 870, 1517 → 1128, 1519 → 1391);
// Llama-7B Q4_K_M 484 → 250, 514 → 376, 514 → 503, 515 → 513. A host that
// loses its core for a time slice finds the GPU still busy with the steps
// queued ahead. The cost: a sequence that stops on its end token leaves up
// to seven steps queued past it, which the next step on the executor (or
// close) waits for (about 5 ms for TinyLlama, 14 ms for the 7B there).
const defaultChain = 8

// chainGrow says whether a chain's depth grows past chainDepth, up to
// devices.MaxChained, until the steps queued ahead take at least chainAhead
// of the device's time (grownDepth), on a device that times its picks
// (devices.PickTimer): HYBRID_GREEDY_CHAIN unset. Eight
// steps of TinyLlama Q4_0 on an H200 are 4.2 ms, shorter than a time slice
// the host may lose: pinned to one host core shared with a busy loop,
// hybrid kept 90% and 86% of its tg128 at eight (1702 and 1627 tok/s
// against 1893 and 1895 alone), 96% and 98% at sixteen, 95% and 97% at 32
// (thirty-ninth session, two rounds; bench/RESULTS.md). The 7B's eight
// steps are 14 ms already and kept 99%. The cost is the same as eight's
// for a long step: a sequence that stops on its end token leaves up to
// chainAhead of steps queued past it.
var chainGrow = os.Getenv("HYBRID_GREEDY_CHAIN") == ""

// chainAhead is the device time a growing chain keeps queued ahead (a
// variable for tests).
var chainAhead = 8 * time.Millisecond

// grownDepth is the depth, at least depth and at most devices.MaxChained,
// whose steps of t each take at least chainAhead.
func grownDepth(depth int, t time.Duration) int {
	if t <= 0 {
		return depth
	}
	return max(depth, min(int((chainAhead+t-1)/t), devices.MaxChained))
}

// newStepChain returns e's chained stepper; close it when done.
func (e *Executor) newStepChain() (*stepChain, error) {
	g := &stepChain{e: e, depth: chainDepth, grow: chainGrow}
	if e.opts.SyncEachOp || g.depth < 2 {
		return g, nil
	}
	c, err := e.compile(stepKey{n: 1})
	if err != nil {
		return nil, err
	}
	runs := c.batchRuns()
	if len(runs) != 1 || runs[0].calls == nil {
		return g, nil // ops on several devices, or streamed in, or alone
	}
	last := c.g.Ops[len(c.g.Ops)-1]
	if len(c.copies[last.ID]) > 0 || len(c.pre[c.g.Ops[0].ID]) > 0 {
		return g, nil
	}
	if ch, ok := c.dev[last.ID].(devices.Chainer); ok && ch.Chains() {
		g.ch, g.c = ch, c
		if g.grow {
			g.pt, _ = ch.(devices.PickTimer)
		}
		if !noDeviceTopK {
			g.sch, _ = ch.(devices.SampleChainer)
		}
	}
	return g, nil
}

// samples reports whether the chain queues the steps of sampler s's picks
// (step with s): the device makes such picks and s asks for none that it
// does not make (Sampler.Chained).
func (g *stepChain) samples(s *Sampler) bool {
	_, ok := s.Chained()
	return ok && g.sch != nil
}

// takes reports whether the chain's steps can make sampler s's picks, and
// the sampler to step with: nil for greedy ones (Sampler.Greedy), s where
// the device samples them (samples). Elsewhere the caller steps itself.
func (g *stepChain) takes(s *Sampler) (*Sampler, bool) {
	switch {
	case s.Greedy():
		return nil, true
	case g.samples(s):
		return s, true
	}
	return nil, false
}

// step returns the pick of the step at pos whose token is tok: the greedy
// one where s is nil, else sampler s's (for which samples holds). The
// caller may want up to left steps after it (fewer if it stops on a pick):
// up to depth of them are queued before the pick is read.
func (g *stepChain) step(tok int32, pos, left int, s *Sampler) (int32, error) {
	return g.stepSeq(tok, pos, 0, left, s)
}

// stepSeq is step for the sequence whose cells start at base (ForwardSeq).
// Another step run on the executor in between (another sequence's, a
// prompt's) first drops the steps queued ahead (runStep): their only trace
// is the keys and values they wrote at the sequence's next cells, which the
// sequence's next steps write again the same, or, where the sequence ended,
// cells past its tokens that its caller allowed it (left).
func (g *stepChain) stepSeq(tok int32, pos, base, left int, s *Sampler) (int32, error) {
	e := g.e
	if s != nil && !g.samples(s) {
		return 0, fmt.Errorf("runtime: a sampled step chained where the device does not make its picks") // samples says
	}
	if g.ch == nil {
		return e.ForwardSeqGreedy([]int32{tok}, pos, base)
	}
	if g.ahead == 0 || g.front != pos || g.qbase != base || tok != g.last || s != g.s {
		// Nothing queued for this step (the first, or the caller took
		// another token, position, sequence or sampler): drop what is,
		// run it with tok.
		if err := g.close(); err != nil {
			return 0, err
		}
		g.s = s
		if err := g.run(ops.Step{Tokens: []int32{tok}, Pos: pos, Base: base}); err != nil {
			return 0, err
		}
		g.front, g.ahead, g.qbase, e.chained = pos, 1, base, g
	}
	// The steps after it, each one's token the pick before it, up to
	// depth queued, the caller's left and the cache's last cell.
	for p := pos + g.ahead; g.ahead < g.depth && p <= pos+left && base+p < e.ctx; p++ {
		if err := g.run(ops.Step{Tokens: []int32{0}, Pos: p, Base: base, Chained: true}); err != nil {
			return 0, err
		}
		g.ahead++
	}
	e.Stats.ChainDepth = max(e.Stats.ChainDepth, g.ahead)
	id, draw, err := g.next()
	if err != nil {
		return 0, err
	}
	if id < 0 && s != nil {
		// The step's logits hold a NaN, which the device does not
		// order: the steps queued after it read no meaningful token.
		// Drop them, give back their draws and then this step's, and
		// run it again for the sampler to pick from (its NaN order).
		if err := g.close(); err != nil {
			return 0, err
		}
		s.undraw([]float32{draw})
		picks, logits, err := e.ForwardSeqTop([]int32{tok}, pos, base, s.Needs(nil), nil)
		if err != nil {
			return 0, err
		}
		if logits != nil {
			id = s.Sample(logits, nil)
		} else {
			id = s.SampleTop(picks, nil)
		}
	}
	g.last = id
	return id, nil
}

// next reads the oldest queued step's pick, and its draw if it was
// sampled. e.chained is g while g has steps queued (from the unchained
// step that starts them to the last pick's read).
func (g *stepChain) next() (int32, float32, error) {
	g.front, g.ahead = g.front+1, g.ahead-1
	if g.ahead == 0 {
		g.e.chained = nil
	}
	var draw float32
	if len(g.draws) > 0 {
		draw, g.draws = g.draws[0], g.draws[1:]
	}
	id, err := g.ch.NextPick()
	if err != nil {
		return 0, 0, g.fileErr(err)
	}
	if g.pt != nil {
		g.observe(g.pt.PickGap())
	}
	g.e.Stats.Steps++
	return id, draw, nil
}

// observe grows the chain's depth (grownDepth) from the device's time
// between the pick just read and the one queued before it
// (devices.PickTimer; ok false: none). Picks queued back to back are a
// step apart on the device, and a device that ran dry between them, its
// host late, only makes the gap longer: the shortest seen is a step's
// device time. The device's clock, not the host's: the thirty-ninth
// session's reads timed on the host, where a read slowed by the host's
// own hand-off looked like a short step, grew the 7B's chain to 32 steps
// (56 ms) on a shared core and TinyLlama's to 30 at depth 4096; the
// device's clock gives them 8 and 12 (fortieth session).
func (g *stepChain) observe(d time.Duration, ok bool) {
	if ok && d > 0 && (g.stepT == 0 || d < g.stepT) {
		g.stepT = d
		g.depth = grownDepth(g.depth, d)
	}
}

// run queues step st and its pick: the greedy one, or g.s's with its next
// draw.
func (g *stepChain) run(st ops.Step) error {
	e := g.e
	if err := e.m.File.Check(); err != nil {
		return fmt.Errorf("runtime: %w", err)
	}
	c, err := e.runStep(st)
	if err == nil && c != g.c {
		err = fmt.Errorf("runtime: a chained step compiled anew") // compile keeps a shape's step
	}
	if err == nil && g.s == nil {
		err = g.ch.PickNext(c.out[c.g.Output], len(e.logits))
	} else if err == nil {
		sp, _ := g.s.Chained()
		sp.Draw = g.s.draw()
		if err = g.sch.SampleNext(c.out[c.g.Output], len(e.logits), sp); err == nil {
			g.draws = append(g.draws, sp.Draw)
		} else {
			g.s.undraw([]float32{sp.Draw})
		}
	}
	return g.fileErr(err)
}

// fileErr is err, with the model file's own error first where it was
// truncated under the step.
func (g *stepChain) fileErr(err error) error {
	if err == nil {
		return nil
	}
	if cerr := g.e.m.File.Check(); cerr != nil {
		return fmt.Errorf("runtime: %w (%v)", cerr, err)
	}
	return err
}

// close waits for the steps queued ahead, if any, and drops their picks,
// giving their draws back to their sampler.
func (g *stepChain) close() error {
	if len(g.draws) > 0 {
		g.s.undraw(g.draws)
		g.draws = nil
	}
	for g.ahead > 0 {
		if _, _, err := g.next(); err != nil {
			g.ahead, g.e.chained = 0, nil
			return err
		}
	}
	return nil
}
