// Package runtime executes a model's op graph on one or more devices: it makes
// weights resident where the plan puts the ops that read them, allocates
// activation buffers per device, copies f32 values only where they cross a
// device boundary, runs prefill and decode steps, samples tokens, and records
// per-op and per-device time and every copy.
package runtime

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"time"

	"hybrid/devices"
	"hybrid/models/llama"
	"hybrid/ops"
)

// MaxBatch is the most tokens one prefill step runs; longer prompts are split
// into steps of this size (llama.cpp's default micro-batch is also 512).
const MaxBatch = 512

// Options configure an Executor.
type Options struct {
	// Placement maps op names to device names (a planner.Plan's ByName); ops
	// it does not name go with their first input's producer. nil puts every
	// op on the first device.
	Placement map[string]string
	// PerOp runs the ablation: every op's inputs are copied from host memory
	// to its device and its output back, as a naive integration does.
	PerOp bool
	// CopyTime, if set, models the time of a copy that involves a simulated
	// device (the planner's cost model); real copies are timed.
	CopyTime func(from, to devices.Info, bytes int64) time.Duration
	// PlaceStep, if set, places a prefill step (a graph of more than one
	// token) for its own shape: each op's device by name and, for an op whose
	// weight is streamed in for the step, the device the weight is resident
	// on, "" elsewhere (planner.MakeStep). Unset, a prefill runs each op where
	// Placement puts it.
	PlaceStep func(g *ops.Graph) (device, streamedFrom []string, err error)
	// SyncEachOp waits for every op to finish before timing it, so that
	// per-op times are right on devices whose Run only queues the work
	// (profiling); it costs a round trip per op.
	SyncEachOp bool
	// MicroBatch is the tokens of each step a prompt is split into
	// (llama.cpp's -ub). 0 splits prompts into steps of DefaultMicroBatch
	// where the plan is a chain of devices that queue their work
	// (devices.Info.Queues: the GPUs of a layer split, each holding a run of
	// whole layers), so that a device computes one micro-batch while the
	// device after it computes the one before (a pipeline), and elsewhere
	// runs steps of up to MaxBatch tokens; negative always runs steps of up
	// to MaxBatch tokens.
	MicroBatch int
}

// DefaultMicroBatch is Options.MicroBatch's default. On an H200, Llama-7B
// Q4_K_M's prompt steps of 256 tokens cost 1.12 times a 512-token step's
// time per token, of 128 tokens 1.37 times; over two H200s a 512-token
// prompt in two micro-batches of 256 (three rounds) and in four of 128
// (five rounds) ran alike (10.8k and 10.5k tok/s), and the longer the
// prompt, the more the cheaper steps count.
const DefaultMicroBatch = 256

// Executor runs a model on a set of devices.
type Executor struct {
	m      *llama.Model
	devs   []devices.Device
	byName map[string]devices.Device
	opts   Options
	ctx    int
	steps  map[stepKey]*compiled
	logits []float32
	// rowLogits holds a batched step's logits, every row's.
	rowLogits []float32
	host      []float32 // scratch for copies through the host
	// single is a device that runs steps of one sequence only (nil: none).
	single devices.Device
	// pipeline is true where the plan is a chain of several devices that
	// queue their work: a prompt then runs in micro-batches
	// (Options.MicroBatch).
	pipeline bool
	// prefills is the prompt steps kept compiled, oldest first (compile).
	prefills []stepKey
	// chained is the chain whose steps are queued ahead of the reads
	// of their tokens' picks (nil: none); runStep drops those steps before
	// any other runs.
	chained *stepChain
	Stats   Stats
}

// compiled is a step's graph with every op's device, buffers and copies.
type compiled struct {
	g      *ops.Graph
	dev    []devices.Device // per op
	out    []devices.Buffer // per value: on its producer's device
	ins    [][]devices.Buffer
	copies [][]copyStep                        // per op: copies to make after it runs
	pre    [][]copyStep                        // per op: copies to make before it runs (per-op ablation)
	hostV  [][]float32                         // per value: host copy (per-op ablation)
	stream []streamStep                        // per op: the weight to stream in before it runs, if any
	bufs   map[devices.Device][]devices.Buffer // the buffers allocated for it, freed when it is dropped
	runs   []opRun                             // the ops in runs for Batchers (batchRuns), once built
}

// opRun is ops[from:to] of a compiled step: a run of neighbouring ops on
// one devices.Batcher with no copy or stream between them, given to it in
// one RunAll (calls), or one op run alone (calls nil).
type opRun struct {
	from, to int
	calls    []devices.Call
}

// batchRuns splits c's ops into runs (built once): an op joins the run of
// the op before it when both are on the same Batcher (not a Simulator,
// whose ops are timed one by one), it streams nothing in, no copy is made
// before it and none after the op before it.
func (c *compiled) batchRuns() []opRun {
	if c.runs != nil {
		return c.runs
	}
	batcher := func(i int) bool {
		_, ok := c.dev[i].(devices.Batcher)
		_, sim := c.dev[i].(devices.Simulator)
		return ok && !sim && !c.streams(i)
	}
	var runs []opRun
	for i := 0; i < len(c.g.Ops); {
		j := i + 1
		if batcher(i) {
			for j < len(c.g.Ops) && batcher(j) && c.dev[j] == c.dev[i] && len(c.pre[j]) == 0 && len(c.copies[j-1]) == 0 {
				j++
			}
		}
		r := opRun{from: i, to: j}
		if j-i > 1 {
			for _, op := range c.g.Ops[i:j] {
				r.calls = append(r.calls, devices.Call{Op: op, In: c.ins[op.ID], Out: c.out[op.Out]})
			}
		}
		runs = append(runs, r)
		i = j
	}
	c.runs = runs
	return runs
}

// streamStep is a weight copied into an op's device for one step, or an
// attention op's KV cache: the cells before the step copied in, the step's
// own cells copied back to where the cache is resident.
type streamStep struct {
	from devices.Device // where it is resident
	data []byte         // its bytes as the file holds them
	kv   bool           // an attention op's KV cache, not a weight
}

// streamedCaches counts the attention ops of the step that stream their KV
// cache (a test's check).
func (c *compiled) streamedCaches() int {
	n := 0
	for i := range c.stream {
		if c.stream[i].kv {
			n++
		}
	}
	return n
}

// streams reports whether op i streams a weight or a KV cache in.
func (c *compiled) streams(i int) bool {
	return c.stream != nil && (c.stream[i].data != nil || c.stream[i].kv)
}

type copyStep struct {
	value    int
	from, to devices.Device
	src, dst devices.Buffer
	toHost   bool // per-op ablation: download to hostV[value]
	fromHost bool // per-op ablation: upload from hostV[value]
}

// NewExecutor runs every op of m on dev with a KV cache of ctx positions.
func NewExecutor(m *llama.Model, dev devices.Device, ctx int) (*Executor, error) {
	return NewPlanExecutor(m, []devices.Device{dev}, ctx, Options{})
}

// NewPlanExecutor prepares m to run on devs as opts.Placement says: each
// weight is loaded once onto the device of every op that reads it.
func NewPlanExecutor(m *llama.Model, devs []devices.Device, ctx int, opts Options) (*Executor, error) {
	if ctx <= 0 {
		return nil, fmt.Errorf("runtime: context size %d must be positive", ctx)
	}
	if len(devs) == 0 {
		return nil, fmt.Errorf("runtime: no devices")
	}
	e := &Executor{m: m, devs: devs, byName: map[string]devices.Device{}, opts: opts, ctx: ctx,
		steps: map[stepKey]*compiled{}, logits: make([]float32, m.Config.Vocab)}
	for _, d := range devs {
		e.byName[d.Name()] = d
		if e.single == nil && !d.Info().Sequences {
			e.single = d
		}
	}
	e.Stats.init(devs)
	// Load weights for the decode graph and for a prefill graph (which adds
	// last_token, an op without weights).
	g, err := m.Graph(1, 0, ctx)
	if err != nil {
		return nil, err
	}
	placed, err := e.place(g)
	if err != nil {
		return nil, err
	}
	e.pipeline = chain(placed) && !opts.PerOp && !opts.SyncEachOp
	// Each device's weights, in the graph's order.
	type load struct {
		ws   []*ops.Weight
		data [][]byte
	}
	loads := map[devices.Device]*load{}
	loaded := map[string]bool{}
	for _, op := range g.Ops {
		d := placed[op.ID]
		if err := d.Supports(op); err != nil {
			return nil, fmt.Errorf("runtime: %s cannot run op %s: %w", d.Name(), op, err)
		}
		if op.Weight == nil || loaded[d.Name()+"\x00"+op.Weight.Name] {
			continue
		}
		loaded[d.Name()+"\x00"+op.Weight.Name] = true
		data, err := m.TensorData(op.Weight.Name)
		if err != nil {
			return nil, err
		}
		l := loads[d]
		if l == nil {
			l = &load{}
			loads[d] = l
		}
		l.ws, l.data = append(l.ws, op.Weight), append(l.data, data)
	}
	for _, d := range devs {
		l := loads[d]
		if l == nil {
			continue
		}
		if wl, ok := d.(devices.WeightsLoader); ok {
			if err := guardLoad(m, fmt.Sprintf("%d weights onto %s", len(l.ws), d.Name()), func() error { return wl.LoadWeights(l.ws, l.data) }); err != nil {
				return nil, err
			}
			continue
		}
		for i, w := range l.ws {
			if err := guardLoad(m, w.Name, func() error { return d.LoadWeight(w, l.data[i]) }); err != nil {
				return nil, err
			}
		}
	}
	return e, nil
}

// guardLoad runs load, which reads the mapped bytes of m's weights (what),
// turning a fault reading them (a file truncated under us) into an error.
func guardLoad(m *llama.Model, what string, load func() error) error {
	var lerr error
	if err := m.File.Guard(func() { lerr = load() }); err != nil {
		return fmt.Errorf("runtime: loading %s: %w", what, err)
	}
	if lerr != nil {
		if cerr := m.File.Check(); cerr != nil {
			return fmt.Errorf("runtime: loading %s: %w (%v)", what, cerr, lerr)
		}
		return lerr
	}
	return nil
}

// place returns each op's device.
func (e *Executor) place(g *ops.Graph) ([]devices.Device, error) {
	out := make([]devices.Device, len(g.Ops))
	producer := g.Producers()
	for i, op := range g.Ops {
		if e.opts.Placement == nil {
			out[i] = e.devs[0]
			continue
		}
		name, ok := e.opts.Placement[op.Name]
		if !ok {
			if len(op.In) == 0 {
				return nil, fmt.Errorf("runtime: the placement does not name op %s", op)
			}
			out[i] = out[producer[op.In[0]]]
			continue
		}
		d, ok := e.byName[name]
		if !ok {
			return nil, fmt.Errorf("runtime: op %s is placed on %s, which is not among the devices", op, name)
		}
		out[i] = d
	}
	return out, nil
}

// placeStep places a prefill step by opts.PlaceStep: each op's device, and
// the weights streamed in for it.
func (e *Executor) placeStep(g *ops.Graph) ([]devices.Device, []streamStep, error) {
	names, from, err := e.opts.PlaceStep(g)
	if err != nil {
		return nil, nil, err
	}
	if len(names) != len(g.Ops) || len(from) != len(g.Ops) {
		return nil, nil, fmt.Errorf("runtime: a step placement of %d and %d ops for a graph of %d", len(names), len(from), len(g.Ops))
	}
	dev := make([]devices.Device, len(g.Ops))
	var stream []streamStep
	for i, op := range g.Ops {
		d, ok := e.byName[names[i]]
		if !ok {
			return nil, nil, fmt.Errorf("runtime: op %s is placed on %s, which is not among the devices", op, names[i])
		}
		if err := d.Supports(op); err != nil {
			return nil, nil, fmt.Errorf("runtime: %s cannot run op %s: %w", d.Name(), op, err)
		}
		dev[i] = d
		if from[i] == "" {
			continue
		}
		src, ok := e.byName[from[i]]
		if stream == nil {
			stream = make([]streamStep, len(g.Ops))
		}
		if op.Kind == ops.Attention {
			_, streams := d.(devices.KVStreamer)
			if _, host := src.(devices.KVHost); !ok || !streams || !host {
				return nil, nil, fmt.Errorf("runtime: op %s cannot stream its KV cache from %s to %s", op, from[i], d.Name())
			}
			stream[i] = streamStep{from: src, kv: true}
			continue
		}
		if _, streams := d.(devices.WeightStreamer); !ok || !streams || op.Weight == nil {
			return nil, nil, fmt.Errorf("runtime: op %s cannot stream its weight from %s to %s", op, from[i], d.Name())
		}
		data, err := e.m.TensorData(op.Weight.Name)
		if err != nil {
			return nil, nil, err
		}
		stream[i] = streamStep{from: src, data: data}
	}
	return dev, stream, nil
}

// Context is the KV cache's length in positions.
func (e *Executor) Context() int { return e.ctx }

// Device is the first device (the only one for a single-device executor).
func (e *Executor) Device() devices.Device { return e.devs[0] }

// Devices lists the executor's devices.
func (e *Executor) Devices() []devices.Device { return e.devs }

// Forward runs one step of tokens starting at position pos and returns the
// logits of the last token. The slice is reused by the next call.
//
// A model file truncated or rewritten while in use is an error wrapping
// gguf.ErrChanged: checked before each step, and behind any error of one.
func (e *Executor) Forward(tokens []int32, pos int) ([]float32, error) {
	if err := e.m.File.Check(); err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	logits, err := e.forward(tokens, pos)
	if err != nil {
		if cerr := e.m.File.Check(); cerr != nil {
			return nil, fmt.Errorf("runtime: %w (%v)", cerr, err)
		}
	}
	return logits, err
}

func (e *Executor) forward(tokens []int32, pos int) ([]float32, error) {
	return e.forwardStep(ops.Step{Tokens: tokens, Pos: pos})
}

// ForwardSeq is Forward for the sequence whose KV cache cells start at
// base (a slot of an Engine): positions pos.. of that sequence, in cells
// base+pos.. of the cache.
func (e *Executor) ForwardSeq(tokens []int32, pos, base int) ([]float32, error) {
	if err := e.m.File.Check(); err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	return e.forwardStep(ops.Step{Tokens: tokens, Pos: pos, Base: base})
}

// ForwardRows runs a batched step: len(tokens) sequences decoding one token
// each, token i at rows[i] (its position and its sequence's first cell). It
// returns every row's logits, row after row (len(tokens) × vocabulary); the
// slice is reused by the next call.
func (e *Executor) ForwardRows(tokens []int32, rows []ops.Row) ([]float32, error) {
	if err := e.m.File.Check(); err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	if len(rows) != len(tokens) {
		return nil, fmt.Errorf("runtime: a batched step of %d tokens has %d rows", len(tokens), len(rows))
	}
	return e.forwardStep(ops.Step{Tokens: tokens, Rows: rows})
}

// ForwardGreedy is Forward for a single sequence that wants only the greedy
// pick of the last token's logits (runtime.Greedy): where the device that
// holds the logits picks it itself (devices.Argmaxer), only the token id
// comes back to the host.
func (e *Executor) ForwardGreedy(tokens []int32, pos int) (int32, error) {
	return e.ForwardSeqGreedy(tokens, pos, 0)
}

// ForwardSeqGreedy is ForwardGreedy for the sequence whose KV cache cells
// start at base (ForwardSeq).
func (e *Executor) ForwardSeqGreedy(tokens []int32, pos, base int) (int32, error) {
	if err := e.m.File.Check(); err != nil {
		return 0, fmt.Errorf("runtime: %w", err)
	}
	var id [1]int32
	if err := e.greedyStep(ops.Step{Tokens: tokens, Pos: pos, Base: base}, id[:]); err != nil {
		return 0, err
	}
	return id[0], nil
}

// ForwardRowsGreedy is ForwardRows for rows that want only their greedy
// picks (runtime.Greedy of each row's logits): where the device that holds
// the logits picks them itself (devices.Argmaxer), only the token ids come
// back. ids[i] is row i's; it returns ids.
func (e *Executor) ForwardRowsGreedy(tokens []int32, rows []ops.Row, ids []int32) ([]int32, error) {
	if err := e.m.File.Check(); err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	if len(rows) != len(tokens) {
		return nil, fmt.Errorf("runtime: a batched step of %d tokens has %d rows", len(tokens), len(rows))
	}
	ids = slices.Grow(ids[:0], len(tokens))[:len(tokens)]
	if err := e.greedyStep(ops.Step{Tokens: tokens, Rows: rows}, ids); err != nil {
		return nil, err
	}
	return ids, nil
}

// greedyStep runs step st and puts the greedy pick of each of its logits'
// rows in ids (one for a sequence's step, whose logits are its last
// token's; one a row for a batched step).
func (e *Executor) greedyStep(st ops.Step, ids []int32) error {
	c, err := e.runStep(st)
	if err == nil {
		out := c.dev[c.g.Ops[len(c.g.Ops)-1].ID]
		if a, ok := out.(devices.Argmaxer); ok {
			if err = a.ReadArgmax(c.out[c.g.Output], len(e.logits), ids); err == nil {
				e.Stats.Steps++
				return nil
			}
		} else {
			var logits []float32
			if logits, err = e.readLogits(c, st); err == nil {
				v := len(e.logits)
				for i := range ids {
					ids[i] = Greedy(logits[i*v : (i+1)*v])
				}
				return nil
			}
		}
	}
	if cerr := e.m.File.Check(); cerr != nil {
		return fmt.Errorf("runtime: %w (%v)", cerr, err)
	}
	return err
}

// ForwardTop is Forward for a sampler that needs only the m largest logits
// (Sampler.Needs, Sampler.SampleTop): where the device that holds them
// picks them itself (devices.TopKer), only those m come back and logits is
// nil; otherwise (no such device, m outside 1..devices.MaxPicks or the
// vocabulary, a NaN among the logits) picks is nil and logits are
// Forward's. picks is reused for the result.
func (e *Executor) ForwardTop(tokens []int32, pos, m int, picks []devices.Pick) ([]devices.Pick, []float32, error) {
	return e.ForwardSeqTop(tokens, pos, 0, m, picks)
}

// ForwardSeqTop is ForwardTop for the sequence whose KV cache cells start
// at base (ForwardSeq).
func (e *Executor) ForwardSeqTop(tokens []int32, pos, base, m int, picks []devices.Pick) ([]devices.Pick, []float32, error) {
	if err := e.m.File.Check(); err != nil {
		return nil, nil, fmt.Errorf("runtime: %w", err)
	}
	return e.topStep(ops.Step{Tokens: tokens, Pos: pos, Base: base}, m, picks)
}

// ForwardRowsTop is ForwardRows for rows whose samplers need only their m
// largest logits (ForwardTop): m picks a row, row after row, or every
// row's logits.
func (e *Executor) ForwardRowsTop(tokens []int32, rows []ops.Row, m int, picks []devices.Pick) ([]devices.Pick, []float32, error) {
	if err := e.m.File.Check(); err != nil {
		return nil, nil, fmt.Errorf("runtime: %w", err)
	}
	if len(rows) != len(tokens) {
		return nil, nil, fmt.Errorf("runtime: a batched step of %d tokens has %d rows", len(tokens), len(rows))
	}
	return e.topStep(ops.Step{Tokens: tokens, Rows: rows}, m, picks)
}

// noDeviceTopK turns the device's sampled picks off (HYBRID_DEVICE_TOPK=0):
// every sampled step reads its logits back, neither its top-k picked nor
// its token sampled on the device (stepChain), to measure the ways.
var noDeviceTopK = os.Getenv("HYBRID_DEVICE_TOPK") == "0"

// topStep runs step st and reads back the m largest of each of its logits'
// rows into picks, or, where the device cannot pick them, the logits.
func (e *Executor) topStep(st ops.Step, m int, picks []devices.Pick) ([]devices.Pick, []float32, error) {
	c, err := e.runStep(st)
	if err == nil {
		v := len(e.logits)
		t, ok := c.dev[c.g.Ops[len(c.g.Ops)-1].ID].(devices.TopKer)
		if ok && !noDeviceTopK && m >= 1 && m <= min(v, devices.MaxPicks) {
			rows := 1
			if st.Rows != nil {
				rows = len(st.Tokens)
			}
			picks = slices.Grow(picks[:0], rows*m)[:rows*m]
			if err = t.ReadTopK(c.out[c.g.Output], v, m, picks); err == nil && !nanRow(picks, m) {
				e.Stats.Steps++
				return picks, nil, nil
			}
		}
		if err == nil {
			var logits []float32
			if logits, err = e.readLogits(c, st); err == nil {
				return nil, logits, nil
			}
		}
	}
	if cerr := e.m.File.Check(); cerr != nil {
		return nil, nil, fmt.Errorf("runtime: %w (%v)", cerr, err)
	}
	return nil, nil, err
}

// nanRow reports whether any row of picks (m a row) is that of a row of
// logits with a NaN (devices.TopKer).
func nanRow(picks []devices.Pick, m int) bool {
	for i := 0; i < len(picks); i += m {
		if picks[i].Index < 0 {
			return true
		}
	}
	return false
}

func (e *Executor) forwardStep(st ops.Step) ([]float32, error) {
	c, err := e.runStep(st)
	if err != nil {
		return nil, err
	}
	return e.readLogits(c, st)
}

// runStep checks step st, compiles its graph if needed and runs its ops.
func (e *Executor) runStep(st ops.Step) (*compiled, error) {
	tokens := st.Tokens
	n := len(tokens)
	if n == 0 || n > MaxBatch {
		return nil, fmt.Errorf("runtime: a step takes 1..%d tokens, got %d", MaxBatch, n)
	}
	if st.Rows == nil && st.Base == 0 && (st.Pos < 0 || st.Pos+n > e.ctx) {
		return nil, fmt.Errorf("runtime: positions %d..%d exceed the context of %d tokens", st.Pos, st.Pos+n-1, e.ctx)
	}
	if err := st.CheckCells(e.ctx); err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	if e.chained != nil && !st.Chained {
		if err := e.chained.close(); err != nil {
			return nil, err
		}
	}
	key := stepKey{n: n}
	if st.Rows != nil {
		key.n = -n
	} else if n > 1 && st.Pos > 0 && e.opts.PlaceStep != nil {
		key.past = pastBucket(st.Pos, n, e.ctx)
	}
	if st.Multi() && e.single != nil {
		return nil, fmt.Errorf("runtime: %s does not run steps of several sequences (server slots); use a policy without it, or one slot", e.single.Name())
	}
	c, err := e.compile(key)
	if err != nil {
		return nil, err
	}
	for _, r := range c.batchRuns() {
		if r.calls != nil && !e.opts.SyncEachOp {
			if err := e.runAll(c, r, st); err != nil {
				return nil, err
			}
			continue
		}
		for _, op := range c.g.Ops[r.from:r.to] {
			if err := e.runOne(c, op, st); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// readLogits reads the logits of step st, run on c: the last token's, or
// every row's of a batched step. Read waits for the ops run before it
// (devices.Device), so no Sync: on a GPU each is a hand-over to the
// device's thread and back.
func (e *Executor) readLogits(c *compiled, st ops.Step) ([]float32, error) {
	n := len(st.Tokens)
	out := c.dev[c.g.Ops[len(c.g.Ops)-1].ID]
	logits := e.logits
	if st.Rows != nil {
		if cap(e.rowLogits) < n*len(e.logits) {
			e.rowLogits = make([]float32, n*len(e.logits))
		}
		logits = e.rowLogits[:n*len(e.logits)]
	}
	if err := out.Read(logits, c.out[c.g.Output]); err != nil {
		return nil, err
	}
	e.Stats.Steps++
	return logits, nil
}

// runAll gives the run r of c's ops to its device in one call, with the
// copies before its first op and after its last; the device's time is the
// call's (its ops are not timed one by one: Stats.Ops leaves them out).
func (e *Executor) runAll(c *compiled, r opRun, st ops.Step) error {
	first, last := c.g.Ops[r.from], c.g.Ops[r.to-1]
	for _, cp := range c.pre[first.ID] {
		if err := e.copy(c, cp); err != nil {
			return err
		}
	}
	d := c.dev[first.ID]
	t0 := time.Now()
	if err := d.(devices.Batcher).RunAll(st, r.calls); err != nil {
		return err
	}
	ds := e.Stats.Devices[d.Name()]
	ds.Ops += r.to - r.from
	ds.Time += time.Since(t0)
	for _, cp := range c.copies[last.ID] {
		if err := e.copy(c, cp); err != nil {
			return err
		}
	}
	return nil
}

// runOne runs op of c alone, with its copies and streams.
func (e *Executor) runOne(c *compiled, op *ops.Op, st ops.Step) error {
	for _, cp := range c.pre[op.ID] {
		if err := e.copy(c, cp); err != nil {
			return err
		}
	}
	d := c.dev[op.ID]
	streams := c.streams(op.ID)
	if streams {
		if err := e.streamIn(op, st, d, c.stream[op.ID]); err != nil {
			return err
		}
	}
	t0 := time.Now()
	if err := d.Run(op, st, c.ins[op.ID], c.out[op.Out]); err != nil {
		return err
	}
	if streams && c.stream[op.ID].kv {
		if err := e.streamKVOut(op, st, d, c.stream[op.ID]); err != nil {
			return err
		}
	}
	if e.opts.SyncEachOp {
		if err := d.Sync(); err != nil {
			return err
		}
	}
	el := time.Since(t0)
	if s, ok := d.(devices.Simulator); ok {
		el = s.OpTime(op, st)
	}
	e.Stats.op(op, d, el)
	for _, cp := range c.copies[op.ID] {
		if err := e.copy(c, cp); err != nil {
			return err
		}
	}
	return nil
}

// streamIn copies op's weight into d for this step, or, for an attention
// op, its sequence's KV cells before the step; counted apart from the
// copies of values.
func (e *Executor) streamIn(op *ops.Op, st ops.Step, d devices.Device, s streamStep) error {
	t0 := time.Now()
	if s.kv {
		k, v, err := s.from.(devices.KVHost).KVCells(op, st.Base, st.Pos)
		if err == nil {
			err = d.(devices.KVStreamer).StreamKV(op, st, k, v)
		}
		if err != nil {
			return fmt.Errorf("runtime: streaming the KV cache of %s from %s to %s: %w", op, s.from.Name(), d.Name(), err)
		}
		if len(k) > 0 {
			e.countStream(&e.Stats.KVStreams, s.from, d, 2*2*int64(len(k)), time.Since(t0))
		}
		return nil
	}
	if err := d.(devices.WeightStreamer).StreamWeight(op.Weight, s.data); err != nil {
		return fmt.Errorf("runtime: streaming weight %s from %s to %s: %w", op.Weight.Name, s.from.Name(), d.Name(), err)
	}
	e.countStream(&e.Stats.Streams, s.from, d, int64(len(s.data)), time.Since(t0))
	return nil
}

// streamKVOut copies the KV cells attention op appended on d, for a cache
// resident elsewhere, to that cache.
func (e *Executor) streamKVOut(op *ops.Op, st ops.Step, d devices.Device, s streamStep) error {
	t0 := time.Now()
	k, v, err := s.from.(devices.KVHost).KVCells(op, st.Base+st.Pos, len(st.Tokens))
	if err == nil {
		err = d.(devices.KVStreamer).StreamedKV(op, st, k, v)
	}
	if err != nil {
		return fmt.Errorf("runtime: streaming the KV cells of %s from %s back to %s: %w", op, d.Name(), s.from.Name(), err)
	}
	e.countStream(&e.Stats.KVStreams, d, s.from, 2*2*int64(len(k)), time.Since(t0))
	return nil
}

// countStream adds a streamed copy of bytes from one device to another to
// cs: its measured time el, or the cost model's where a device is
// simulated.
func (e *Executor) countStream(cs *CopyStats, from, to devices.Device, bytes int64, el time.Duration) {
	fi, ti := from.Info(), to.Info()
	if (fi.Simulated || ti.Simulated) && e.opts.CopyTime != nil {
		el = e.opts.CopyTime(fi, ti, bytes)
	}
	cs.Count++
	cs.Bytes += bytes
	cs.Time += el
}

// copy moves one value: device to device through host memory, or, in the
// ablation, between a device and the value's host copy.
func (e *Executor) copy(c *compiled, cp copyStep) error {
	n := c.g.Values[cp.value].Elems()
	t0 := time.Now()
	var from, to devices.Info
	switch {
	case cp.toHost:
		if err := cp.from.Read(c.hostV[cp.value], cp.src); err != nil {
			return err
		}
		from, to = cp.from.Info(), devices.Host
	case cp.fromHost:
		if err := cp.to.Write(cp.dst, c.hostV[cp.value]); err != nil {
			return err
		}
		from, to = devices.Host, cp.to.Info()
	default:
		if err := transfer(cp.from, cp.to, cp.dst, cp.src, n, &e.host); err != nil {
			return err
		}
		from, to = cp.from.Info(), cp.to.Info()
	}
	el := time.Since(t0)
	if (from.Simulated || to.Simulated) && e.opts.CopyTime != nil {
		el = e.opts.CopyTime(from, to, 4*int64(n))
	}
	e.Stats.copy(from.Name, to.Name, 4*int64(n), el)
	return nil
}

// transfer copies n elements of src on from into dst on to: peer to peer
// when from can (devices.PeerCopier), else through host memory (host is the
// scratch, grown as needed).
func transfer(from, to devices.Device, dst, src devices.Buffer, n int, host *[]float32) error {
	if pc, ok := from.(devices.PeerCopier); ok {
		done, err := pc.CopyTo(to, dst, src, n)
		if err != nil {
			return fmt.Errorf("runtime: copy %s -> %s: %w", from.Name(), to.Name(), err)
		}
		if done {
			return nil
		}
	}
	if cap(*host) < n {
		*host = make([]float32, n)
	}
	h := (*host)[:n]
	if err := from.Read(h, src); err != nil {
		return err
	}
	return to.Write(dst, h)
}

// chain reports whether placed (each op's device, in the graph's order)
// is a pipeline the executor can overlap: every device queues its work
// (devices.Info.Queues), there are several, and each holds one run of
// neighbouring ops, so that each device's queue takes a micro-batch's part
// after the one before it and nothing waits on a later device. A device
// visited twice (the embedding on the last GPU, layers alternating) would
// hold each micro-batch's second visit behind the one before it; a device
// that does not queue holds up the host.
func chain(placed []devices.Device) bool {
	done := map[devices.Device]bool{}
	var cur devices.Device
	for _, d := range placed {
		if d == cur {
			continue
		}
		if done[d] || !d.Info().Queues {
			return false
		}
		done[d] = true
		cur = d
	}
	return len(done) > 1
}

// prefillStep is the most tokens of one step of a prompt of n tokens: the
// micro-batch (Options.MicroBatch) for prompts longer than one, else
// MaxBatch.
func (e *Executor) prefillStep(n int) int {
	ub := e.opts.MicroBatch
	if ub == 0 && e.pipeline {
		ub = DefaultMicroBatch
	}
	if ub <= 0 || n <= ub {
		return MaxBatch
	}
	return min(ub, MaxBatch)
}

// PromptSteps is how a prompt of n tokens runs: in steps of at most step
// tokens (Options.MicroBatch, else MaxBatch), pipelined across the plan's
// devices where the plan is a chain of devices that queue their work.
func (e *Executor) PromptSteps(n int) (step int, pipelined bool) {
	step = e.prefillStep(n)
	return step, e.pipeline && step < n
}

// Prefill runs the prompt in steps of at most MaxBatch tokens from position pos
// and returns the last token's logits. Where the plan is a chain of devices
// that queue their work (the GPUs of a layer split), the steps are
// micro-batches (Options.MicroBatch) queued one after another without
// waiting, so that the devices compute different micro-batches at once.
func (e *Executor) Prefill(tokens []int32, pos int) ([]float32, error) {
	if pos+len(tokens) > e.ctx {
		return nil, fmt.Errorf("runtime: a prompt of %d tokens does not fit the context of %d tokens (use a larger --ctx or a shorter prompt)", len(tokens), e.ctx-pos)
	}
	return e.PrefillSeq(tokens, pos, 0)
}

// PrefillSeq is Prefill for the sequence whose cells start at base
// (ForwardSeq).
func (e *Executor) PrefillSeq(tokens []int32, pos, base int) ([]float32, error) {
	n := len(tokens)
	if n == 0 {
		return e.ForwardSeq(tokens, pos, base) // the step's own error
	}
	step := e.prefillStep(n)
	// Every step but the last is only queued: its logits are not read, so
	// nothing waits for it (a device's Read waits for its queue).
	for i := 0; i+step < n; i += step {
		if err := e.m.File.Check(); err != nil {
			return nil, fmt.Errorf("runtime: %w", err)
		}
		if _, err := e.runStep(ops.Step{Tokens: tokens[i : i+step], Pos: pos + i, Base: base}); err != nil {
			return nil, err
		}
		e.Stats.Steps++
	}
	last := (n - 1) / step * step
	return e.ForwardSeq(tokens[last:], pos+last, base)
}

// interval is a buffer's need on one device: from op start to op end.
type interval struct {
	start, end int
	elems      int
	buf        *devices.Buffer
}

// stepKey names a compiled step: n tokens (-n: a batched step of n rows)
// after past cells of its sequence, as planned (pastBucket).
type stepKey struct{ n, past int }

// pastBucket is the depth a prompt's step of n tokens at pos (> 0) is
// planned at: pos rounded up to a power of two, at most ctx-n. A step is
// planned for its shape, and a later step of a long prompt attends over the
// cells before it (what copying a KV cache in for it costs, and attending
// at depth); a few buckets keep the plans few.
func pastBucket(pos, n, ctx int) int {
	b := 1
	for b < pos {
		b *= 2
	}
	return max(min(b, ctx-n), 0)
}

// compile returns the step of n tokens, building it the first time: each
// op's device, where every value lives (layout), the per-op ablation's
// buffers when asked for, and the buffers bound to each op (bind). Only the
// decode step and the latest prompt step are kept (where prompts run in
// micro-batches, the newest prompt steps of at most MaxBatch tokens
// together); a dropped step's buffers are freed, so memory does not grow
// with every new prompt length.
//
// A negative n is a batched step of -n rows (ForwardRows); those are kept
// for every row count, at most MaxSlots of them, each small.
func (e *Executor) compile(key stepKey) (*compiled, error) {
	if c := e.steps[key]; c != nil {
		return c, nil
	}
	n := key.n
	if n > 1 {
		// Where prompts run in micro-batches, the newest prompt steps are
		// kept while they and this one hold at most MaxBatch tokens
		// together (a prompt's micro-batches are steps of their own,
		// planned at their depths); elsewhere only this one. The others
		// are freed.
		budget := 0
		if e.pipeline || e.opts.MicroBatch > 0 {
			budget = MaxBatch - n
		}
		var keep, drop []stepKey
		for i := len(e.prefills) - 1; i >= 0; i-- {
			if k := e.prefills[i]; k.n <= budget {
				budget -= k.n
				keep = append(keep, k)
			} else {
				drop = append(drop, k)
			}
		}
		slices.Reverse(keep)
		e.prefills = keep
		var errs []error
		for _, k := range drop {
			errs = append(errs, e.steps[k].free())
			delete(e.steps, k)
		}
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
	}
	var g *ops.Graph
	var err error
	if n < 0 {
		g, err = e.m.RowsGraph(-n, e.ctx)
	} else {
		g, err = e.m.Graph(n, key.past, e.ctx)
	}
	if err != nil {
		return nil, err
	}
	dev, err := e.place(g)
	if err != nil {
		return nil, err
	}
	var stream []streamStep
	if n > 1 && e.opts.PlaceStep != nil {
		if dev, stream, err = e.placeStep(g); err != nil {
			return nil, err
		}
	}
	l := layoutFor(g, dev, e.opts.PerOp)
	if e.opts.PerOp {
		l.addPerOp(g, dev)
	}
	c, err := bind(g, dev, l)
	if err != nil {
		return nil, err
	}
	c.stream = stream
	e.steps[key] = c
	if n > 1 {
		e.prefills = append(e.prefills, key)
	}
	return c, nil
}

// layout is where one step's values live: the buffer intervals each device
// needs, and the copies between devices.
type layout struct {
	need   map[devices.Device][]*interval
	home   []*interval           // per value: on its producer's device
	copies map[valueOn]*interval // a value's copy on a device that reads it
	remote map[[2]int]*interval  // per-op ablation: (value, reading op) -> its buffer
}

// valueOn is a value on a device.
type valueOn struct {
	v int
	d devices.Device
}

// layoutFor gives every value a buffer on its producer's device, live until
// its last reader there, and, unless perOp, a copy to every other device that
// reads it, made right after it is produced and kept until its last reader
// there: a value crosses to a device once, however many ops read it.
func layoutFor(g *ops.Graph, dev []devices.Device, perOp bool) *layout {
	l := &layout{need: map[devices.Device][]*interval{}, home: make([]*interval, len(g.Values)),
		copies: map[valueOn]*interval{}, remote: map[[2]int]*interval{}}
	// Where each value is read: device -> last reading op.
	lastOn := make([]map[devices.Device]int, len(g.Values))
	for _, op := range g.Ops {
		for _, in := range op.In {
			if lastOn[in] == nil {
				lastOn[in] = map[devices.Device]int{}
			}
			lastOn[in][dev[op.ID]] = op.ID
		}
	}
	for _, op := range g.Ops {
		d := dev[op.ID]
		end := op.ID
		if last, ok := lastOn[op.Out][d]; ok {
			end = last
		}
		if op.Out == g.Output {
			end = len(g.Ops)
		}
		iv := &interval{start: op.ID, end: end, elems: g.Values[op.Out].Elems()}
		l.home[op.Out] = iv
		l.need[d] = append(l.need[d], iv)
		if perOp {
			continue
		}
		var others []devices.Device
		for od := range lastOn[op.Out] {
			if od != d {
				others = append(others, od)
			}
		}
		sort.Slice(others, func(i, j int) bool { return others[i].Name() < others[j].Name() })
		for _, od := range others {
			civ := &interval{start: op.ID, end: lastOn[op.Out][od], elems: iv.elems}
			l.copies[valueOn{op.Out, od}] = civ
			l.need[od] = append(l.need[od], civ)
		}
	}
	return l
}

// addPerOp adds the ablation's buffers: every input of every op gets its own
// buffer on the op's device, live for that op only (bind fills it from the
// value's host copy).
func (l *layout) addPerOp(g *ops.Graph, dev []devices.Device) {
	for _, op := range g.Ops {
		for _, in := range op.In {
			iv := &interval{start: op.ID, end: op.ID, elems: g.Values[in].Elems()}
			l.remote[[2]int{in, op.ID}] = iv
			l.need[dev[op.ID]] = append(l.need[dev[op.ID]], iv)
		}
	}
}

// bind allocates the layout's buffers on each device and gives every op its
// input and output buffers and the copies to make around it.
func bind(g *ops.Graph, dev []devices.Device, l *layout) (*compiled, error) {
	c := &compiled{g: g, dev: dev, out: make([]devices.Buffer, len(g.Values)),
		ins: make([][]devices.Buffer, len(g.Ops)), copies: make([][]copyStep, len(g.Ops)), pre: make([][]copyStep, len(g.Ops)),
		bufs: map[devices.Device][]devices.Buffer{}}
	perOp := len(l.remote) > 0
	if perOp {
		c.hostV = make([][]float32, len(g.Values))
		for v := range g.Values {
			c.hostV[v] = make([]float32, g.Values[v].Elems())
		}
	}
	for d, ivs := range l.need {
		bs, err := allocate(d, ivs, g.Tokens)
		c.bufs[d] = bs
		if err != nil {
			return nil, errors.Join(err, c.free())
		}
	}
	producer := g.Producers()
	for v := range g.Values {
		c.out[v] = *l.home[v].buf
	}
	for _, op := range g.Ops {
		d := dev[op.ID]
		for _, in := range op.In {
			switch {
			case perOp:
				b := *l.remote[[2]int{in, op.ID}].buf
				c.ins[op.ID] = append(c.ins[op.ID], b)
				c.pre[op.ID] = append(c.pre[op.ID], copyStep{value: in, to: d, dst: b, fromHost: true})
			case dev[producer[in]] == d:
				c.ins[op.ID] = append(c.ins[op.ID], c.out[in])
			default:
				c.ins[op.ID] = append(c.ins[op.ID], *l.copies[valueOn{in, d}].buf)
			}
		}
		if perOp {
			c.copies[op.ID] = append(c.copies[op.ID], copyStep{value: op.Out, from: d, src: c.out[op.Out], toHost: true})
			continue
		}
		var cs []copyStep
		for k, civ := range l.copies {
			if k.v == op.Out {
				cs = append(cs, copyStep{value: op.Out, from: d, to: k.d, src: c.out[op.Out], dst: *civ.buf})
			}
		}
		sort.Slice(cs, func(i, j int) bool { return cs[i].to.Name() < cs[j].to.Name() })
		c.copies[op.ID] = cs
	}
	return c, nil
}

// free releases the step's buffers.
func (c *compiled) free() error {
	var errs []error
	for d, bs := range c.bufs {
		for _, b := range bs {
			if err := d.Free(b); err != nil {
				errs = append(errs, fmt.Errorf("runtime: %s: %w", d.Name(), err))
			}
		}
	}
	c.bufs = nil
	return errors.Join(errs...)
}

// BufferBytes is the bytes of activation buffers the executor holds on each
// device (by name) for the steps it keeps compiled.
func (e *Executor) BufferBytes() map[string]int64 {
	out := map[string]int64{}
	for _, c := range e.steps {
		for d, bs := range c.bufs {
			for _, b := range bs {
				out[d.Name()] += 4 * int64(b.Len())
			}
		}
	}
	return out
}

// allocate gives every interval on device d a buffer, reusing a buffer once
// the interval holding it has ended more than d's fusion window before (the
// first free one large enough, or growing one), so that a step needs a few
// buffers per device, not one per value. A device that launches up to k
// neighbouring ops as one kernel reads an input while the group writes its
// outputs, so an output must not take the buffer of a value read within the
// group (devices.Info.FusionWindow), in a step of as few tokens as it fuses
// (FusionTokens). It returns the buffers it allocated, also those allocated
// before an error.
func allocate(d devices.Device, ivs []*interval, tokens int) ([]devices.Buffer, error) {
	window := 0
	if in := d.Info(); in.FusionTokens == 0 || tokens <= in.FusionTokens {
		window = in.FusionWindow
	}
	sort.SliceStable(ivs, func(i, j int) bool { return ivs[i].start < ivs[j].start })
	type slot struct {
		size int
		free int // op index after which it is free
		ivs  []*interval
	}
	var slots []*slot
	for _, iv := range ivs {
		pick := -1
		for i, s := range slots {
			if s.free+window >= iv.start {
				continue
			}
			if pick < 0 || (s.size >= iv.elems && (slots[pick].size < iv.elems || s.size < slots[pick].size)) {
				pick = i
			}
		}
		if pick < 0 {
			slots = append(slots, &slot{})
			pick = len(slots) - 1
		}
		s := slots[pick]
		s.size = max(s.size, iv.elems)
		s.free = iv.end
		s.ivs = append(s.ivs, iv)
	}
	var bufs []devices.Buffer
	for _, s := range slots {
		b, err := d.Alloc(s.size)
		if err != nil {
			return bufs, fmt.Errorf("runtime: %s: %w", d.Name(), err)
		}
		bufs = append(bufs, b)
		for _, iv := range s.ivs {
			v, err := d.View(b, iv.elems)
			if err != nil {
				return bufs, fmt.Errorf("runtime: %s: %w", d.Name(), err)
			}
			iv.buf = &v
		}
	}
	return bufs, nil
}
