// Package runtime executes a model's op graph on a device: it makes weights
// resident, allocates activation buffers, runs prefill and decode steps, and
// samples tokens.
package runtime

import (
	"fmt"

	"hybrid/devices"
	"hybrid/models/llama"
	"hybrid/ops"
)

// MaxBatch is the most tokens one prefill step runs; longer prompts are split
// into steps of this size (llama.cpp's default micro-batch is also 512).
const MaxBatch = 512

// Executor runs a model on one device.
type Executor struct {
	m      *llama.Model
	dev    devices.Device
	ctx    int
	steps  map[int]*compiled // by tokens per step
	logits []float32
}

// compiled is a graph with a buffer for every value; values whose lifetimes do
// not overlap share a buffer.
type compiled struct {
	g    *ops.Graph
	bufs []devices.Buffer // by value id
	ins  [][]devices.Buffer
}

// NewExecutor makes every weight of m resident on dev and prepares a KV cache
// of ctx positions.
func NewExecutor(m *llama.Model, dev devices.Device, ctx int) (*Executor, error) {
	if ctx <= 0 {
		return nil, fmt.Errorf("runtime: context size %d must be positive", ctx)
	}
	e := &Executor{m: m, dev: dev, ctx: ctx, steps: map[int]*compiled{}, logits: make([]float32, m.Config.Vocab)}
	g, err := m.Graph(1, 0, ctx)
	if err != nil {
		return nil, err
	}
	for _, op := range g.Ops {
		if err := dev.Supports(op); err != nil {
			return nil, fmt.Errorf("runtime: %s cannot run op %s: %w", dev.Name(), op, err)
		}
		if op.Weight == nil {
			continue
		}
		data, err := m.TensorData(op.Weight.Name)
		if err != nil {
			return nil, err
		}
		if err := dev.LoadWeight(op.Weight, data); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Context is the KV cache's length in positions.
func (e *Executor) Context() int { return e.ctx }

// Device is the device the executor runs on.
func (e *Executor) Device() devices.Device { return e.dev }

// Forward runs one step of tokens starting at position pos and returns the
// logits of the last token. The slice is reused by the next call.
func (e *Executor) Forward(tokens []int32, pos int) ([]float32, error) {
	n := len(tokens)
	if n == 0 || n > MaxBatch {
		return nil, fmt.Errorf("runtime: a step takes 1..%d tokens, got %d", MaxBatch, n)
	}
	if pos < 0 || pos+n > e.ctx {
		return nil, fmt.Errorf("runtime: positions %d..%d exceed the context of %d tokens", pos, pos+n-1, e.ctx)
	}
	c, err := e.compile(n)
	if err != nil {
		return nil, err
	}
	st := ops.Step{Tokens: tokens, Pos: pos}
	for _, op := range c.g.Ops {
		if err := e.dev.Run(op, st, c.ins[op.ID], c.bufs[op.Out]); err != nil {
			return nil, err
		}
	}
	if err := e.dev.Sync(); err != nil {
		return nil, err
	}
	if err := e.dev.Read(e.logits, c.bufs[c.g.Output]); err != nil {
		return nil, err
	}
	return e.logits, nil
}

// Prefill runs the prompt in steps of at most MaxBatch tokens from position pos
// and returns the last token's logits.
func (e *Executor) Prefill(tokens []int32, pos int) ([]float32, error) {
	if pos+len(tokens) > e.ctx {
		return nil, fmt.Errorf("runtime: a prompt of %d tokens does not fit the context of %d tokens (use a larger --ctx or a shorter prompt)", len(tokens), e.ctx-pos)
	}
	var logits []float32
	for i := 0; i < len(tokens); i += MaxBatch {
		j := min(i+MaxBatch, len(tokens))
		var err error
		if logits, err = e.Forward(tokens[i:j], pos+i); err != nil {
			return nil, err
		}
	}
	return logits, nil
}

func (e *Executor) compile(n int) (*compiled, error) {
	if c := e.steps[n]; c != nil {
		return c, nil
	}
	if n != 1 {
		// Keep the decode step and the latest prefill shape only.
		for k := range e.steps {
			if k != 1 {
				delete(e.steps, k)
			}
		}
	}
	g, err := e.m.Graph(n, 0, e.ctx)
	if err != nil {
		return nil, err
	}
	c := &compiled{g: g, bufs: make([]devices.Buffer, len(g.Values)), ins: make([][]devices.Buffer, len(g.Ops))}
	slots, sizes := assignBuffers(g)
	pool := make([]devices.Buffer, len(sizes))
	for i, s := range sizes {
		if pool[i], err = e.dev.Alloc(s); err != nil {
			return nil, fmt.Errorf("runtime: %s: %w", e.dev.Name(), err)
		}
	}
	for v, s := range slots {
		if c.bufs[v], err = e.dev.View(pool[s], g.Values[v].Elems()); err != nil {
			return nil, fmt.Errorf("runtime: %s: %w", e.dev.Name(), err)
		}
	}
	for _, op := range g.Ops {
		for _, in := range op.In {
			c.ins[op.ID] = append(c.ins[op.ID], c.bufs[in])
		}
	}
	e.steps[n] = c
	return c, nil
}

// assignBuffers gives every value a buffer slot such that no two values live at
// the same time share one, reusing the first free slot that is large enough
// (or growing one). It returns the slot of each value and each slot's size.
func assignBuffers(g *ops.Graph) (slots []int, sizes []int) {
	last := make([]int, len(g.Values)) // last op that reads each value
	for i := range last {
		last[i] = -1
	}
	for _, op := range g.Ops {
		for _, in := range op.In {
			last[in] = op.ID
		}
	}
	last[g.Output] = len(g.Ops) // read after the step
	slots = make([]int, len(g.Values))
	var free []int
	for _, op := range g.Ops {
		need := g.Values[op.Out].Elems()
		pick := -1
		for i, s := range free {
			if pick < 0 || (sizes[s] >= need && (sizes[free[pick]] < need || sizes[s] < sizes[free[pick]])) {
				pick = i
			}
		}
		var s int
		if pick >= 0 {
			s = free[pick]
			free = append(free[:pick], free[pick+1:]...)
			sizes[s] = max(sizes[s], need)
		} else {
			s = len(sizes)
			sizes = append(sizes, need)
		}
		slots[op.Out] = s
		// Inputs whose last reader is this op are free once it has run; the
		// output is allocated first so that no op writes over its own input.
		for _, in := range op.In {
			if last[in] == op.ID && !contains(free, slots[in]) {
				free = append(free, slots[in])
			}
		}
		if last[op.Out] < 0 {
			free = append(free, s)
		}
	}
	return slots, sizes
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
