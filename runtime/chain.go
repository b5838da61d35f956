package runtime

import (
	"fmt"
	"os"

	"hybrid/devices"
	"hybrid/ops"
)

// greedyChain runs one sequence's greedy decode steps (ForwardGreedy's, at
// the sequence's first cells) so that a GPU does not wait for the host
// between them. Where every op of a one-token step runs in one run on one
// device that keeps its picks (devices.Chainer), the step after a pick is
// queued, its token the device's own pick, before that pick is read back:
// the host's part of a step (walking the ops, reading the pick, the
// caller's work with it) then overlaps the device's step before. Elsewhere
// it is ForwardGreedy.
type greedyChain struct {
	e      *Executor
	ch     devices.Chainer // nil: not chained
	c      *compiled       // the one-token step's
	queued int             // position of the step queued ahead of its input's read, or -1
	qbase  int             // its sequence's first cell
	last   int32           // the pick step returned last: the queued step's token
}

// noChain is HYBRID_GREEDY_CHAIN=0: every greedy step waits for the pick
// before it (ForwardGreedy), to compare.
var noChain = os.Getenv("HYBRID_GREEDY_CHAIN") == "0"

// newGreedyChain returns e's greedy stepper; close it when done.
func (e *Executor) newGreedyChain() (*greedyChain, error) {
	g := &greedyChain{e: e, queued: -1}
	if e.opts.SyncEachOp || noChain {
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
	}
	return g, nil
}

// step returns the greedy pick of the step at pos whose token is tok. With
// more, the caller will want the step after it too (unless it stops on
// the pick): that step is queued before the pick is read.
func (g *greedyChain) step(tok int32, pos int, more bool) (int32, error) {
	return g.stepSeq(tok, pos, 0, more)
}

// stepSeq is step for the sequence whose cells start at base (ForwardSeq).
// Another step run on the executor in between (another sequence's, a
// prompt's) first drops the step queued ahead (runStep): its only trace is
// the key and value it wrote at the sequence's next cell, which the
// sequence's next step writes again the same, or, where the sequence
// ended, a cell past its tokens.
func (g *greedyChain) stepSeq(tok int32, pos, base int, more bool) (int32, error) {
	e := g.e
	if g.ch == nil {
		return e.ForwardSeqGreedy([]int32{tok}, pos, base)
	}
	if g.queued != pos || g.qbase != base || tok != g.last {
		// Nothing queued for this step (the first, or the caller took
		// another token, position or sequence): drop what is, run it
		// with tok.
		if err := g.close(); err != nil {
			return 0, err
		}
		if err := g.run(ops.Step{Tokens: []int32{tok}, Pos: pos, Base: base}); err != nil {
			return 0, err
		}
	}
	g.queued = -1
	if more && pos+1 < e.ctx {
		if err := g.run(ops.Step{Tokens: []int32{0}, Pos: pos + 1, Base: base, Chained: true}); err != nil {
			return 0, err
		}
		g.queued, g.qbase = pos+1, base
		e.chained = g
	}
	id, err := g.ch.NextPick()
	if err != nil {
		return 0, g.fileErr(err)
	}
	e.Stats.Steps++
	g.last = id
	return id, nil
}

// run queues step st and its pick.
func (g *greedyChain) run(st ops.Step) error {
	e := g.e
	if err := e.m.File.Check(); err != nil {
		return fmt.Errorf("runtime: %w", err)
	}
	c, err := e.runStep(st)
	if err == nil && c != g.c {
		err = fmt.Errorf("runtime: a chained step compiled anew") // compile keeps a shape's step
	}
	if err == nil {
		err = g.ch.PickNext(c.out[c.g.Output], len(e.logits))
	}
	return g.fileErr(err)
}

// fileErr is err, with the model file's own error first where it was
// truncated under the step.
func (g *greedyChain) fileErr(err error) error {
	if err == nil {
		return nil
	}
	if cerr := g.e.m.File.Check(); cerr != nil {
		return fmt.Errorf("runtime: %w (%v)", cerr, err)
	}
	return err
}

// close waits for the step queued ahead, if any, and drops its pick.
func (g *greedyChain) close() error {
	if g.queued < 0 {
		return nil
	}
	g.queued = -1
	g.e.chained = nil
	if _, err := g.ch.NextPick(); err != nil {
		return g.fileErr(err)
	}
	g.e.Stats.Steps++
	return nil
}
