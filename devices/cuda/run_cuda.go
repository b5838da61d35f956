//go:build cuda

package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"hybrid/devices"
	"hybrid/ops"
	"hybrid/quant"
)

// Run implements devices.Device. It checks what it can at once and queues
// the op for the device's thread, which launches its kernels on the
// context's stream; an error found there is returned by the next Read,
// Write or Sync.
func (d *Device) Run(op *ops.Op, st ops.Step, in []devices.Buffer, out devices.Buffer) error {
	p, err := d.check(devices.Call{Op: op, In: in, Out: out})
	if err != nil {
		return err
	}
	if p, err = d.stepOf(p, st); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("cuda: %s is closed", d.name)
	}
	if debugGraph && len(d.queue) == 0 {
		d.stats.queued = time.Now()
	}
	d.queue = append(d.queue, p)
	return nil
}

// check returns c as an op to queue, less its step: its buffers and weight
// found and checked, and a RoPE's frequency factors uploaded.
func (d *Device) check(c devices.Call) (pending, error) {
	op := c.Op
	p := pending{op: op, n: len(c.In)}
	if len(c.In) > len(p.ins) {
		return p, fmt.Errorf("cuda: op %s: %d inputs", op, len(c.In))
	}
	for i, b := range c.In {
		cb, err := d.buf(b)
		if err != nil {
			return p, err
		}
		p.ins[i] = cb
	}
	ob, err := d.buf(c.Out)
	if err != nil {
		return p, err
	}
	p.out = ob
	if op.Weight != nil {
		d.wmu.Lock()
		p.w = d.weights[op.Weight.Name]
		d.wmu.Unlock()
		if p.w == nil {
			return p, fmt.Errorf("cuda: op %s: weight %s was not loaded", op, op.Weight.Name)
		}
	}
	if op.Kind == ops.RoPE {
		if err := d.uploadFreqs(op); err != nil {
			return p, err
		}
	}
	return p, nil
}

// stepOf returns p for step st, checked against it; the step's slices are
// cloned where the op keeps them (the caller may reuse them before it runs).
func (d *Device) stepOf(p pending, st ops.Step) (pending, error) {
	op := p.op
	if err := checkChained(st); err != nil {
		return p, fmt.Errorf("cuda: op %s: %w", op, err)
	}
	switch op.Kind {
	case ops.Embed:
		for _, t := range st.Tokens {
			if t < 0 || int(t) >= p.w.w.Rows {
				return p, fmt.Errorf("cuda: op %s: token id %d is outside the vocabulary of %d", op, t, p.w.w.Rows)
			}
		}
		st.Tokens = slices.Clone(st.Tokens)
	case ops.Attention:
		if err := st.CheckCells(op.Attn.Context); err != nil {
			return p, fmt.Errorf("cuda: op %s: %w", op, err)
		}
	}
	if st.Rows != nil && (op.Kind == ops.RoPE || op.Kind == ops.Attention || op.Kind == ops.Embed) {
		if len(st.Rows) != len(st.Tokens) {
			return p, fmt.Errorf("cuda: op %s: a batched step of %d tokens has %d rows", op, len(st.Tokens), len(st.Rows))
		}
		st.Rows = slices.Clone(st.Rows)
	}
	p.st = st
	return p, nil
}

// run is a run of calls that RunAll checked: a copy of the calls, the ops
// to queue for them, and the weights' generation they were found in.
type run struct {
	calls []devices.Call
	ops   []pending
	wgen  uint64
}

// maxRuns bounds the runs RunAll keeps; past it they are all dropped.
const maxRuns = 64

// RunAll implements devices.Batcher: Run for each call, in order. A run of
// calls is checked once (check) and kept, keyed by its first call; a later
// step's run is compared with it call by call, buffer by buffer, and the
// weights' generation, which costs a fraction of checking it again. Measured
// on the lent H100's host, a decode step's ~355 Runs took 137 µs of
// TinyLlama's 1.2 ms.
func (d *Device) RunAll(st ops.Step, calls []devices.Call) error {
	if len(calls) == 0 {
		return nil
	}
	var t0 time.Time
	if debugGraph {
		t0 = time.Now()
	}
	d.wmu.Lock()
	gen := d.wgen
	d.wmu.Unlock()
	d.mu.Lock()
	r := d.runs[&calls[0]]
	d.mu.Unlock()
	if r == nil || r.wgen != gen || !sameCalls(r.calls, calls) {
		r = &run{calls: slices.Clone(calls), ops: make([]pending, len(calls)), wgen: gen}
		for i, c := range calls {
			r.calls[i].In = slices.Clone(c.In) // compared with the caller's next time
			p, err := d.check(c)
			if err != nil {
				return err
			}
			r.ops[i] = p
		}
		d.mu.Lock()
		if d.runs == nil || len(d.runs) >= maxRuns {
			d.runs = map[*devices.Call]*run{}
		}
		d.runs[&calls[0]] = r
		d.mu.Unlock()
	}
	// The step, checked as Run checks it, with its slices cloned once for
	// the run's ops.
	if st.Rows != nil && len(st.Rows) != len(st.Tokens) {
		return fmt.Errorf("cuda: op %s: a batched step of %d tokens has %d rows", calls[0].Op, len(st.Tokens), len(st.Rows))
	}
	if err := checkChained(st); err != nil {
		return fmt.Errorf("cuda: op %s: %w", calls[0].Op, err)
	}
	st.Tokens, st.Rows = slices.Clone(st.Tokens), slices.Clone(st.Rows)
	for _, p := range r.ops {
		switch p.op.Kind {
		case ops.Embed:
			for _, t := range st.Tokens {
				if t < 0 || int(t) >= p.w.w.Rows {
					return fmt.Errorf("cuda: op %s: token id %d is outside the vocabulary of %d", p.op, t, p.w.w.Rows)
				}
			}
		case ops.Attention:
			if err := st.CheckCells(p.op.Attn.Context); err != nil {
				return fmt.Errorf("cuda: op %s: %w", p.op, err)
			}
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("cuda: %s is closed", d.name)
	}
	if debugGraph && len(d.queue) == 0 {
		d.stats.queued = t0
	}
	for _, p := range r.ops {
		p.st = st
		d.queue = append(d.queue, p)
	}
	return nil
}

// checkChained checks that a chained step (its token the device's own pick,
// devices.Chainer) is one sequence's step of one token.
func checkChained(st ops.Step) error {
	if st.Chained && (len(st.Tokens) != 1 || st.Rows != nil) {
		return fmt.Errorf("a chained step of %d tokens (rows: %v): want one token of one sequence", len(st.Tokens), st.Rows != nil)
	}
	return nil
}

// sameCalls reports whether a and b are the same calls: the same ops on the
// same buffers.
func sameCalls(a, b []devices.Call) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Op != b[i].Op || a[i].Out != b[i].Out || len(a[i].In) != len(b[i].In) {
			return false
		}
		for j := range a[i].In {
			if a[i].In[j] != b[i].In[j] {
				return false
			}
		}
	}
	return true
}

// pending is an op that Run accepted, to be launched by the next flush.
type pending struct {
	op  *ops.Op
	st  ops.Step // st.Tokens is the op's own only for Embed; the others use its length
	w   *weight
	ins [3]*Buffer
	n   int
	out *Buffer
}

// Debugging switches: HYBRID_CUDA_GRAPHS=0 runs every batch eagerly, and
// HYBRID_CUDA_DEBUG=1 prints how batches ran when the device closes.
var (
	noGraphs   = os.Getenv("HYBRID_CUDA_GRAPHS") == "0"
	debugGraph = os.Getenv("HYBRID_CUDA_DEBUG") == "1"
)

// graphStats counts how flushed batches ran.
type graphStats struct {
	replays, captures, failed, eager int
	fused, alone                     int // units launched by capture or eagerly: fused, and single ops
	lastErr                          error
	// With HYBRID_CUDA_DEBUG=1: replays' GPU time, and the host's time
	// from a batch's first Run to its flush, and in the flush.
	replayGPU    replayTimer
	queued       time.Time
	queue, flush time.Duration
	flushes      int
	mvRopes      int // fuseMVRope units launched
	mvPre        int // mvp_ launches (launchMV)
	siluQ8       int // gate and up launches that also staged the down projection's input (q8Pair)
	batchJoined  int // batched steps' launches that joined ops: fuseMVB with its RMSNorm, SiLUMul or residual add, or the rows' RoPE and cache append
}

// minGraph is the fewest ops of a batch worth capturing as a graph.
const minGraph = 16

// maxGraphs bounds the graphs kept; past it they are all dropped.
const maxGraphs = 64

// flush launches the queued ops q (device thread only), in batches of one
// step each (one position and token count, at most one Embed), and returns
// the first error. Every batch first writes its position and token ids to
// d.tokens, which the kernels read, so a batch seen before (the same ops on
// the same buffers: a decode step) replays as one CUDA graph whatever the
// position.
func (d *Device) flush(q []pending) error {
	var first error
	for i := 0; i < len(q); {
		embed := q[i].op.Kind == ops.Embed
		j := i + 1
		for ; j < len(q); j++ {
			p := q[j]
			if !sameStep(p.st, q[i].st) || (embed && p.op.Kind == ops.Embed) {
				break
			}
			embed = embed || p.op.Kind == ops.Embed
		}
		if err := d.runBatch(q[i:j]); err != nil && first == nil {
			first = err
		}
		i = j
	}
	return first
}

// sameStep reports whether two ops' steps are one step: the same tokens'
// count, position and cells. Ops of a batched step are compared by their
// rows' positions and cells.
func sameStep(a, b ops.Step) bool {
	if len(a.Tokens) != len(b.Tokens) || (a.Rows == nil) != (b.Rows == nil) {
		return false
	}
	if a.Rows == nil {
		return a.Pos == b.Pos && a.Base == b.Base
	}
	for i, r := range a.Rows {
		if b.Rows[i] != r {
			return false
		}
	}
	return true
}

func (d *Device) runBatch(b []pending) error {
	var toks []int32
	var rows []ops.Row
	for _, p := range b {
		if p.op.Kind == ops.Embed {
			toks = p.st.Tokens
		}
		if p.st.Rows != nil && rows == nil && (p.op.Kind == ops.RoPE || p.op.Kind == ops.Attention) {
			rows = p.st.Rows
		}
	}
	// A chained step's token and position are already where it reads
	// them (PickNext's argmax_next wrote them after the step before).
	if !b[0].st.Chained {
		if err := d.uploadStep(b[0].st.Pos, toks); err != nil {
			return fmt.Errorf("cuda: step upload: %w", err)
		}
	}
	if rows != nil {
		if err := d.uploadRows(rows); err != nil {
			return fmt.Errorf("cuda: step upload: %w", err)
		}
	}
	// The step's span picks attention_g's grid (attendG), so it is part
	// of the key (sig).
	d.span = stepSpan(b[0].st)
	defer func() { d.span = 0 }()
	key := d.sig(b)
	if g := d.graphs[string(key)]; g != nil {
		d.stats.replays++
		if debugGraph {
			d.stats.replayGPU.start(d.stream)
			defer d.stats.replayGPU.stop(d.stream)
		}
		return g.launch(d.stream)
	}
	if len(b) >= minGraph && d.seen[string(key)] && !noGraphs {
		used := d.used
		g, err := d.stream.capture(func() error {
			for _, u := range d.fuse(b) {
				if err := d.runUnit(u); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil && used == d.used {
			if len(d.graphs) >= maxGraphs {
				d.freeGraphs()
			}
			if d.graphs == nil {
				d.graphs = map[string]*graph{}
			}
			g.bufs = bufsOf(b)
			d.graphs[string(key)] = g
			d.stats.captures++
			return g.launch(d.stream)
		}
		if g != nil {
			g.free()
		}
		d.stats.failed++
		d.stats.lastErr = err
		// Nothing captured ran: run the batch eagerly.
	}
	if d.seen == nil || len(d.seen) > 1024 {
		d.seen = map[string]bool{}
	}
	d.seen[string(key)] = true
	d.stats.eager++
	var first error
	for _, u := range d.fuse(b) {
		if err := d.runUnit(u); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (d *Device) runOp(p pending) error {
	if err := d.run(p.op, p.st, p.w, p.ins[:p.n], p.out); err != nil {
		return opErr(p, err)
	}
	return nil
}

func opErr(p pending, err error) error { return fmt.Errorf("cuda: op %s: %w", p.op, err) }

// sig is a batch's key: its token count, whether its span is short
// (shortSpan, for attendG's grid) and each op with its weight and buffers.
func (d *Device) sig(b []pending) []byte {
	k := binary.LittleEndian.AppendUint64(d.key[:0], uint64(len(b[0].st.Tokens)))
	// A sequence's first cell is baked into the launches of its step; a
	// batched step's rows are read from device memory (uploadRows), and
	// its key is only whether it is one.
	for _, p := range b {
		if p.op.Kind != ops.Attention {
			continue
		}
		if p.st.Rows == nil {
			k = binary.LittleEndian.AppendUint64(k, uint64(p.st.Base))
		} else {
			k = binary.LittleEndian.AppendUint64(k, math.MaxUint64)
		}
		k = append(k, byte(b2i(d.shortSpan())))
		break
	}
	for _, p := range b {
		k = binary.LittleEndian.AppendUint64(k, uint64(uintptr(unsafe.Pointer(p.op))))
		var w uint64
		if p.w != nil {
			w = uint64(p.w.ptr)
		}
		k = binary.LittleEndian.AppendUint64(k, w)
		k = binary.LittleEndian.AppendUint64(k, uint64(p.out.ptr))
		k = binary.LittleEndian.AppendUint64(k, uint64(p.out.n))
		for _, in := range p.ins[:p.n] {
			k = binary.LittleEndian.AppendUint64(k, uint64(in.ptr))
			k = binary.LittleEndian.AppendUint64(k, uint64(in.n))
		}
	}
	d.key = k
	return k
}

func (d *Device) freeGraphs() {
	for _, g := range d.graphs {
		g.free()
	}
	d.graphs = nil
}

// dropGraphs frees the graphs whose batches read or write an activation
// buffer in [lo, hi).
func (d *Device) dropGraphs(lo, hi dptr) {
	for k, g := range d.graphs {
		for _, p := range g.bufs {
			if p >= lo && p < hi {
				g.free()
				delete(d.graphs, k)
				break
			}
		}
	}
}

// bufsOf lists the buffers a batch's ops read and write.
func bufsOf(b []pending) []dptr {
	var ps []dptr
	for _, p := range b {
		ps = append(ps, p.out.ptr)
		for _, in := range p.ins[:p.n] {
			ps = append(ps, in.ptr)
		}
	}
	slices.Sort(ps)
	return slices.Compact(ps)
}

// weightsOf returns the weights' and products' pointers and the weights'
// rows of a launch of up to three weights for n activation rows, checking
// that each product has room for them.
func weightsOf(ws []mvWeight, n int) (wp, yp [3]uintptr, rows [3]int, err error) {
	for j, m := range ws {
		if m.y.n < n*m.w.w.Rows {
			return wp, yp, rows, fmt.Errorf("output of %d elements, want %d×%d", m.y.n, n, m.w.w.Rows)
		}
		wp[j], yp[j], rows[j] = uintptr(m.w.ptr), uintptr(m.y.ptr), m.w.w.Rows
	}
	return wp, yp, rows, nil
}

// mmtMin is the batch from which mat-muls of non-F32 weights run on tensor
// cores (mmt_* in kernels/matmul.cu). Smaller batches of the block types run
// mvb (kernels/fused.cu), each row exactly as a decode step computes it; of
// the float types, matmul8, which reads the weights once per 8 tokens in f32.
const mmtMin = 32

// mmtBlocks is the number of blocks a prefill mat-mul of fewer than half as
// many tiles is split along k to reach (kernels/matmul.cu): about eight per
// multiprocessor of an H100. (TinyLlama's FFN gate, 704 tiles, ran no
// faster split in two: 205 µs against 201.)
const mmtBlocks = 1024

// mmtPartialMax bounds a split-K prefill mat-mul's partial products (slices
// × tokens × rows f32, scratch the device keeps): a mat-mul whose slices
// would take more takes fewer, so that a prompt's scratch does not take the
// room of weights the GPU could hold. HYBRID_CUDA_MMT_PARTIALS sets it in
// MiB (0: no bound).
var mmtPartialMax = func() int64 {
	if v, err := strconv.Atoi(os.Getenv("HYBRID_CUDA_MMT_PARTIALS")); err == nil && v >= 0 {
		return int64(v) << 20
	}
	return 8 << 20
}()

// A/B switches: HYBRID_CUDA_MMT_NK=64 or 32 takes tiles of that many
// tokens; HYBRID_CUDA_MMT_SPLIT_MANY=0 splits only launches of one weight,
// as before the fifteenth session.
var (
	mmtNK, _     = strconv.Atoi(os.Getenv("HYBRID_CUDA_MMT_NK"))
	mmtSplitMany = os.Getenv("HYBRID_CUDA_MMT_SPLIT_MANY") != "0"
)

// mmtSlices is the most slices a split-K prefill mat-mul takes, each of at
// least one chunk of mmtChunk columns.
const mmtSlices = 16

// mmtChunk is the columns whose weight bytes an mmt block copies at a time
// (CH in kernels/matmul.cu): one K-quant super-block, eight 32-element blocks.
const mmtChunk = 256

// mmtSharedMax is the most dynamic shared memory an mmt block takes: 128
// tokens of F16 or BF16 weights, whose chunk rows are the longest (512 bytes).
const mmtSharedMax = 110 << 10

// mmtStages is the activation stages of an mmt block (AHEAD+1 in
// kernels/matmul.cu).
const mmtStages = 3

// mmtShared returns an mmt block's dynamic shared memory for tiles of nk
// tokens of a weight whose chunk rows take rs bytes: two stages of 64
// decoded rows and mmtStages of nk tokens, 40 halves each, and two chunks
// of 64 rows (kernels/matmul.cu).
func mmtShared(nk, rs int) int { return 2*64*40*2 + mmtStages*nk*40*2 + 2*64*rs }

// useMMQ runs the prefill mat-muls of mmqTypes on 8-bit tensor cores
// (HYBRID_CUDA_MMQ=1). It is off by default: on an H100 the 8-bit kernel
// measured 0.7-1.1× the f16 one (TestPrefillMatMul; bench/RESULTS.md), both
// bound by the latency of their per-step work at two to three blocks a
// multiprocessor rather than by the tensor cores (ncu: 9-18% of the tensor
// pipes busy), and its per-block scaling of every product costs it what
// the 8-bit rate saves.
var useMMQ = os.Getenv("HYBRID_CUDA_MMQ") == "1"

// mmqShared returns an mmq block's dynamic shared memory (kernels/mmq.cu):
// two stages of 64 decoded rows of 64 columns (80 bytes with padding) and
// their two blocks' scales (16 bytes a row), mmtStages of nk tokens the
// same, and two chunks of 64 rows.
func mmqShared(nk, rs int) int { return 2*64*(80+16) + mmtStages*nk*(80+16) + 2*64*rs }

// mmqStep is the columns an mmq block multiplies between two barriers (KT
// in kernels/mmq.cu): a mat-mul whose row length is not a multiple of it
// runs mmt.
const mmqStep = 64

// onMMQ reports whether a prefill mat-mul of w runs on 8-bit tensor cores.
func onMMQ(tk *typed, cols int) bool { return useMMQ && tk.mmq.fn != nil && cols%mmqStep == 0 }

// mmqPad is the multiple of tokens mmq's quantized activations are padded
// to: the widest tile, so that no tile reads past them.
const mmqPad = 128

// launchMMT runs a prefill mat-mul on tensor cores: x (n rows) times up to
// three weights of one type and row length (a layer's q, k and v; gate and
// up: fuseMMT), each into its y. Where cuBLAS loaded and the prompt is long
// enough (onBlas), each weight is decoded to f16 and multiplied by
// cublasGemmEx (blasMMT, blas_cuda.go); else in one launch of mmt whose
// 64-row tiles take the weights one after another. On f16 inputs (the
// activations rounded once by to_f16), f32 sums; or with useMMQ, for the
// types of mmqTypes, on 8-bit inputs (the activations quantized once by
// mmq_quant, s32 sums scaled per block). Tiles are of 64 rows × 128 tokens; a launch is split along k
// into slices summed by mmt_sum where the tiles are fewer than
// mmtBlocks/2 (a short prompt: TinyLlama's q, k and v at 64 tokens are 40
// tiles).
func (d *Device) launchMMT(tk *typed, ws []mvWeight, x *Buffer, n int) error {
	w := ws[0].w
	cols := w.w.Cols
	wp, yp, rows, err := weightsOf(ws, n)
	if err != nil {
		return err
	}
	rowTiles := 0
	for _, r := range rows {
		rowTiles += (r + 63) / 64
	}
	if x.n < n*cols {
		return fmt.Errorf("input of %d elements, want %d×%d", x.n, n, cols)
	}
	q8 := onMMQ(tk, cols)
	// Warps take 32 rows × 32 tokens: eight of them in a 128-token tile,
	// four in a 64-token one, two in a 32-token one; Q4_0's 128-token tiles
	// take four warps of 32 × 64 (mmt4w).
	k, nk, threads := tk.mmt, 128, 256
	switch {
	case q8:
		k = tk.mmq
	case tk.mmt4w.fn != nil:
		k, threads = tk.mmt4w, 128
	}
	// 128-token tiles at any length, split along k where they are few: on
	// an H100 they beat 64- and 32-token tiles for prompts of 64 to 512
	// tokens (TinyLlama Q4_0 and Llama-7B Q4_K_M, BenchmarkCUDAPrefillShapes
	// in runtime). HYBRID_CUDA_MMT_NK=64 or 32 takes the narrower ones.
	switch mmtNK {
	case 64:
		k, nk, threads = tk.mmt64, 64, 128
		if q8 {
			k = tk.mmq64
		}
	case 32:
		k, nk, threads = tk.mmt32, 32, 64
		if q8 {
			k = tk.mmq32
		}
	}
	cb, err := quant.RowBytes(w.typ, mmtChunk)
	if err != nil {
		return err
	}
	rs := (cb + 6 + 15) / 16 * 16 // a chunk row copied from its start rounded down to 4, in whole words
	shm := mmtShared(nk, rs)
	if q8 {
		shm = mmqShared(nk, rs)
	}
	if shm > mmtSharedMax {
		return fmt.Errorf("prefill mat-mul of %s needs %d bytes of shared memory, more than %d", w.typ, shm, mmtSharedMax)
	}
	total := int64(n) * int64(cols)
	npad := (n + mmqPad - 1) / mmqPad * mmqPad
	need := 2 * total
	if q8 {
		need = int64(npad)*int64(cols) + int64(npad)*int64(cols/32)*8
	}
	if need > d.nmmtX {
		if err := d.regrow(&d.mmtX, need); err != nil {
			return err
		}
		d.nmmtX = need
	}
	xd := uintptr(d.mmtX) + uintptr(npad)*uintptr(cols) // the blocks' scales, after the 8-bit rows
	if q8 {
		groups := int64(npad) * int64(cols/32) * 8
		err = launch(d.k.mmqQuant, int((groups+255)/256), 1, 256, d.args().ptr(uintptr(x.ptr)).ptr(uintptr(d.mmtX)).ptr(xd).i32(n).i32(npad).i32(cols))
	} else {
		err = launch(d.k.toF16, int((total/4+255)/256), 1, 256, d.args().ptr(uintptr(x.ptr)).ptr(uintptr(d.mmtX)).i64(total))
	}
	if err != nil {
		return err
	}
	if !q8 && d.onBlas(w.typ, rows[0]+rows[1]+rows[2], cols, n) {
		if ok, err := d.blasMMT(tk, ws, n); ok || err != nil {
			return err
		}
	}
	tt := (n + nk - 1) / nk
	tiles := rowTiles * tt
	chunks := (cols + mmtChunk - 1) / mmtChunk
	// Split along k where the tiles are few (a short prompt). Each weight's
	// slices take a region of d.mmtP of their own, slice z at z·n·rows of it
	// (kernels/matmul.cu), summed into the weight's output by mmt_sum.
	s, ks := 1, chunks*mmtChunk
	if tiles < mmtBlocks/2 && (len(ws) == 1 || mmtSplitMany) {
		s = min((mmtBlocks+tiles-1)/tiles, chunks, mmtSlices)
		all := 0
		for _, r := range rows {
			all += r
		}
		if one := int64(n) * int64(all) * 4; mmtPartialMax > 0 && int64(s)*one > mmtPartialMax {
			s = max(int(mmtPartialMax/one), 1)
		}
	}
	if s > 1 {
		ks = (chunks + s - 1) / s * mmtChunk
		s = (cols + ks - 1) / ks
	}
	var parts [3]uintptr
	if s > 1 {
		var need int64
		for j, r := range rows[:len(ws)] {
			parts[j] = uintptr(need)
			need += int64(s) * int64(n) * int64(r) * 4
		}
		if need > d.nmmtP {
			if err := d.regrow(&d.mmtP, need); err != nil {
				return err
			}
			d.nmmtP = need
		}
		for j := range ws {
			parts[j] += uintptr(d.mmtP)
		}
		yp = parts
	}
	a := d.args().ptr(wp[0]).ptr(wp[1]).ptr(wp[2]).i64(int64(w.rowBytes)).i32(cb).i32(rs).ptr(uintptr(d.mmtX))
	if q8 {
		a = a.ptr(xd).i32(npad)
	}
	a = a.ptr(yp[0]).ptr(yp[1]).ptr(yp[2]).i32(rows[0]).i32(rows[1]).i32(rows[2]).i32(cols).i32(n).i32(ks).i32(tt)
	if err := launchShared(k, rowTiles, tt*s, threads, shm, a); err != nil || s == 1 {
		return err
	}
	for j, m := range ws {
		outs := int64(n) * int64(rows[j])
		if err := launch(d.k.mmtSum, int((outs+255)/256), 1, 256, d.args().ptr(parts[j]).ptr(uintptr(m.y.ptr)).i64(outs).i32(s)); err != nil {
			return err
		}
	}
	return nil
}

// run launches op (device thread only).
func (d *Device) run(op *ops.Op, st ops.Step, w *weight, in []*Buffer, out *Buffer) error {
	const threads = 256
	blocks := func(n int) int { return (n + threads - 1) / threads }
	switch op.Kind {
	case ops.Embed:
		n, cols := len(st.Tokens), w.w.Cols
		if out.n < n*cols {
			return fmt.Errorf("%d tokens do not fit its output of %d", n, out.n)
		}
		if n == 0 {
			return nil
		}
		if n > d.ntok {
			return fmt.Errorf("%d tokens were not uploaded", n)
		}
		return launch(d.k.byType[w.typ].embed, n, 1, 128, d.args().ptr(uintptr(w.ptr)).i64(int64(w.rowBytes)).ptr(uintptr(d.tokens+4)).ptr(uintptr(out.ptr)).i32(cols))
	case ops.RMSNorm:
		// A per-head norm is the same kernel over rows of one head each:
		// Weight.Cols is the head size.
		cols := w.w.Cols
		rows := in[0].n / cols
		if rows == 0 {
			return nil
		}
		return launch(d.k.rmsNorm, rows, 1, threads, d.args().ptr(uintptr(in[0].ptr)).ptr(uintptr(w.ptr)).ptr(uintptr(out.ptr)).i32(cols).f32(op.Eps))
	case ops.MatMul:
		rows, cols := w.w.Rows, w.w.Cols
		n := in[0].n / cols
		if out.n < n*rows {
			return fmt.Errorf("output of %d elements, want %d×%d", out.n, n, rows)
		}
		if n == 0 {
			return nil
		}
		tk := d.k.byType[w.typ]
		a := d.args().ptr(uintptr(w.ptr)).i64(int64(w.rowBytes)).ptr(uintptr(in[0].ptr)).ptr(uintptr(out.ptr)).i32(rows).i32(cols).i32(n)
		const warps = 4 // rows per block
		if n < mmtMin && onQ8(w) {
			// Block types on 8-bit activations, as the fused decode
			// kernels compute them (kernels/q8.cuh); several rows
			// each as the decode step would.
			if n > 1 {
				return d.launchMVB(in[0], n, []mvWeight{{w, out}}, mvbPre{}, nil, nil)
			}
			return d.launchMV(in[0], 0, nil, 0, []mvWeight{{w, out}}, mvPlain, nil, nil, nil, q8None)
		}
		if n == 1 {
			return launch(tk.matvec, (rows+warps-1)/warps, 1, 32*warps, a)
		}
		if n >= mmtMin && w.typ != quant.F32 && cols%32 == 0 {
			return d.launchMMT(tk, []mvWeight{{w, out}}, in[0], n)
		}
		return launch(tk.matmul8, (rows+warps-1)/warps, (n+7)/8, 32*warps, a)
	case ops.RoPE:
		r := op.Rope
		rows := len(st.Tokens)
		if rows == 0 {
			return nil
		}
		freqs, err := d.freqsOf(r)
		if err != nil {
			return err
		}
		width := in[0].n / rows
		pairs := rows * (width / r.HeadDim) * (r.HeadDim / 2)
		return launch(d.k.rope, blocks(pairs), 1, threads, d.args().ptr(uintptr(in[0].ptr)).ptr(uintptr(out.ptr)).i32(rows).i32(width).i32(r.HeadDim).i32(r.Dims).f32(ropeScale(r)).ptr(uintptr(d.tokens)).
			i32(b2i(r.Neox)).ptr(uintptr(freqs)).ptr(d.rowsOf(st)))
	case ops.AddBias:
		n, cols := in[0].n, w.w.Cols
		if cols == 0 || n%cols != 0 || out.n < n {
			return fmt.Errorf("bias of %d on an input of %d into an output of %d", cols, n, out.n)
		}
		if n == 0 {
			return nil
		}
		return launch(d.k.addBias, blocks(n), 1, threads, d.args().ptr(uintptr(in[0].ptr)).ptr(uintptr(w.ptr)).ptr(uintptr(out.ptr)).i32(n).i32(cols))
	case ops.Attention:
		return d.attention(op, st, in, out)
	case ops.SiLUMul, ops.Add:
		n := out.n
		k := d.k.add
		if op.Kind == ops.SiLUMul {
			k = d.k.siluMul
		}
		if n == 0 {
			return nil
		}
		return launch(k, blocks(n), 1, threads, d.args().ptr(uintptr(in[0].ptr)).ptr(uintptr(in[1].ptr)).ptr(uintptr(out.ptr)).i32(n))
	case ops.LastRow:
		if out.n > in[0].n {
			return fmt.Errorf("last row of %d elements from %d", out.n, in[0].n)
		}
		src := in[0].ptr + dptr(4*(in[0].n-out.n))
		return d.stream.copyDtoD(uintptr(out.ptr), uintptr(src), 4*out.n)
	}
	return fmt.Errorf("%w kind", devices.ErrUnsupported)
}

// uploadStep writes the step's position and token ids to d.tokens (device
// thread only). The copy waits for the work queued before it, which may
// still read the last step's.
func (d *Device) uploadStep(pos int, toks []int32) error {
	if len(toks) > d.ntok {
		if err := d.regrowTokens(len(toks)); err != nil {
			return err
		}
	}
	s, err := d.staging(4 * (1 + len(toks)))
	if err != nil {
		return err
	}
	put := func(i int, t int32) {
		s[4*i], s[4*i+1], s[4*i+2], s[4*i+3] = byte(t), byte(t>>8), byte(t>>16), byte(t>>24)
	}
	put(0, int32(pos))
	for i, t := range toks {
		put(1+i, t)
	}
	return memcpyHtoD(d.tokens, d.stage, int64(len(s)))
}

// regrowTokens makes room for n token ids (and as many argmax results) in
// d.tokens; its contents are not kept.
func (d *Device) regrowTokens(n int) error {
	n = max(n, 512)
	if err := d.regrow(&d.tokens, 4*int64(1+2*n)); err != nil {
		return err
	}
	d.ntok = n
	return nil
}

// attention appends the step's keys and values to the layer's cache and
// launches the attention kernel (device thread only).
func (d *Device) attention(op *ops.Op, st ops.Step, in []*Buffer, out *Buffer) error {
	a := op.Attn
	n := len(st.Tokens)
	if err := st.CheckCells(a.Context); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if s := &d.kvs; s.op != "" && s.op == op.Name {
		// Its cache streamed in (StreamKV): the sequence's cells from 0.
		if st.Rows != nil || st.Pos != s.pos {
			return fmt.Errorf("a KV cache streamed for position %d, run at %d", s.pos, st.Pos)
		}
		s.op, s.n = "", n
		c := s.cache
		if err := launch(d.k.kvAppend, (n*c.dim+255)/256, 1, 256, d.args().ptr(uintptr(in[1].ptr)).ptr(uintptr(in[2].ptr)).ptr(uintptr(c.k)).ptr(uintptr(c.v)).
			i32(n*c.dim).i32(c.dim).ptr(uintptr(d.tokens)).ptr(0)); err != nil {
			return err
		}
		return d.attend(op, n, in[0], out, c)
	}
	base, err := d.kvFor(op)
	if err != nil {
		return err
	}
	if st.Rows != nil {
		// Each row a decode step of its own sequence: its position and
		// first cell from d.rowPos, the whole cache seen by every row.
		dim := base.dim
		if err := launch(d.k.kvAppend, (n*dim+255)/256, 1, 256, d.args().ptr(uintptr(in[1].ptr)).ptr(uintptr(in[2].ptr)).ptr(uintptr(base.k)).ptr(uintptr(base.v)).
			i32(n*dim).i32(dim).ptr(uintptr(d.tokens)).ptr(uintptr(d.rowPos))); err != nil {
			return err
		}
		return d.attendAt(op, n, in[0], out, base, uintptr(d.rowPos))
	}
	c := base.at(st.Base)
	// The kernels read the position from d.tokens (see flush).
	dim := c.dim
	if err := launch(d.k.kvAppend, (n*dim+255)/256, 1, 256, d.args().ptr(uintptr(in[1].ptr)).ptr(uintptr(in[2].ptr)).ptr(uintptr(c.k)).ptr(uintptr(c.v)).
		i32(n*dim).i32(dim).ptr(uintptr(d.tokens)).ptr(0)); err != nil {
		return err
	}
	return d.attend(op, n, in[0], out, c)
}

// at is the part of the cache from cell base on: a sequence's own cells,
// seen as a cache of its own.
func (c *kvCache) at(base int) *kvCache {
	if base == 0 {
		return c
	}
	off := dptr(2 * base * c.dim)
	return &kvCache{k: c.k + off, v: c.v + off, ctx: c.ctx - base, dim: c.dim}
}

// uploadRows writes a batched step's rows to d.rowPos (device thread only):
// each row's position in its sequence and the sequence's first cell, which
// its rope, cache append and attention read, so that one captured graph
// serves every step of that many rows.
func (d *Device) uploadRows(rows []ops.Row) error {
	if len(rows) > d.nrow {
		n := max(len(rows), 64)
		if err := d.regrow(&d.rowPos, 8*int64(n)); err != nil {
			return err
		}
		d.nrow = n
	}
	s, err := d.staging(8 * len(rows))
	if err != nil {
		return err
	}
	for i, r := range rows {
		binary.LittleEndian.PutUint32(s[8*i:], uint32(int32(r.Pos)))
		binary.LittleEndian.PutUint32(s[8*i+4:], uint32(int32(r.Base)))
	}
	return memcpyHtoD(d.rowPos, d.stage, int64(len(s)))
}

// regrow replaces the scratch allocation *p (none if 0) with a new one of
// n bytes (device thread only); its contents are not kept.
func (d *Device) regrow(p *dptr, n int64) error {
	q, err := d.alloc(n, memScratch)
	if err != nil {
		return err
	}
	if *p != 0 {
		if err := d.release(*p); err != nil {
			d.release(q)
			return err
		}
	}
	*p = q
	return nil
}

// rowsOf is the rows argument of the rope, cache-append and attention
// kernels for step st: d.rowPos for a batched step, else null.
func (d *Device) rowsOf(st ops.Step) uintptr {
	if st.Rows != nil {
		return uintptr(d.rowPos)
	}
	return 0
}

// kvFor returns op's layer cache, allocating it at first use (device thread only).
func (d *Device) kvFor(op *ops.Op) (*kvCache, error) {
	a := op.Attn
	dim := a.KVHeads * a.HeadDim
	c := d.kv[op.Layer]
	if c == nil || c.ctx < a.Context || c.dim != dim {
		if c != nil {
			// A replaced cache (a larger context) is freed first.
			delete(d.kv, op.Layer)
			if err := errors.Join(d.release(c.k), d.release(c.v)); err != nil {
				return nil, fmt.Errorf("KV cache: %w", err)
			}
		}
		k, err := d.alloc(2*int64(a.Context*dim), memKV)
		if err != nil {
			return nil, fmt.Errorf("KV cache: %w", err)
		}
		v, err := d.alloc(2*int64(a.Context*dim), memKV)
		if err != nil {
			return nil, fmt.Errorf("KV cache: %w", err)
		}
		c = &kvCache{k: k, v: v, ctx: a.Context, dim: dim}
		d.kv[op.Layer] = c
	}
	if err := d.attScratch(a); err != nil {
		return nil, err
	}
	return c, nil
}

// attScratch makes the split attention's scratch for a's heads (device
// thread only): with the caches, not at a launch that a decode step's
// graph capture may hold.
func (d *Device) attScratch(a ops.AttnParams) error {
	if need := int64(attSplitRows*a.Heads*max(attParts, attgParts)*(2+a.HeadDim)) * 4; need > d.nattP {
		if err := d.regrow(&d.attP, need); err != nil {
			return fmt.Errorf("attention scratch: %w", err)
		}
		d.nattP = need
	}
	if need := int64(attSplitRows*a.Heads) * 4; need > d.nattC {
		if err := d.regrow(&d.attC, need); err != nil {
			return fmt.Errorf("attention scratch: %w", err)
		}
		z, err := d.staging(int(need))
		if err != nil {
			return err
		}
		clear(z)
		if err := memcpyHtoD(d.attC, d.stage, need); err != nil {
			return fmt.Errorf("attention scratch: %w", err)
		}
		d.nattC = need
	}
	return nil
}

// attWarps is the attention kernel's warps per block (ATT_WARPS).
const attWarps = 16

// attParts is the most blocks a row's span is split over (ATT_PARTS in
// kernels/attention.cu), each part at least ATT_SPLIT (256) keys:
// flash-decoding, so that a decode step at depth has more than one block a
// head. Steps of up to attSplitRows rows split (decode, batched decode);
// longer ones have blocks enough.
const attParts, attSplitRows = 16, 32

// fattnMin is the fewest query rows of one sequence whose attention runs on
// tensor cores (fattn_d64, fattn_d128 in kernels/attention.cu): a block
// takes 64 rows, so fewer would leave most of its work padding.
const fattnMin = 16

// attend launches the attention kernel for n query rows q over cache c,
// whose keys and values for the step are already appended.
func (d *Device) attend(op *ops.Op, n int, q, out *Buffer, c *kvCache) error {
	a := op.Attn
	if k, ok := d.fattn(a); ok && n >= fattnMin {
		scale := 1 / float32(math.Sqrt(float64(a.HeadDim)))
		return launch(k, (n+63)/64, a.Heads, 128, d.args().ptr(uintptr(q.ptr)).ptr(uintptr(c.k)).ptr(uintptr(c.v)).ptr(uintptr(out.ptr)).
			i32(n).i32(a.Heads).i32(a.KVHeads).ptr(uintptr(d.tokens)).f32(scale))
	}
	return d.attendAt(op, n, q, out, c, 0)
}

// fattn returns the tensor-core prompt attention kernel for a's head size,
// if there is one.
func (d *Device) fattn(a ops.AttnParams) (kernel, bool) {
	if a.KVHeads <= 0 || a.Heads%a.KVHeads != 0 {
		return kernel{}, false
	}
	switch a.HeadDim {
	case 64:
		return d.k.fattnD64, true
	case 128:
		return d.k.fattnD128, true
	}
	return kernel{}, false
}

// attgWarps and attgParts are attention_g's warps per block (ATG_WARPS)
// and the most parts a row's span can be split over (ATG_PARTS), each at
// least 128 keys.
const attgWarps, attgParts = 4, 32

// noGQA turns attention_g off (HYBRID_CUDA_GQA=0): a few rows' attention
// then runs by query head (attention_t2, _t4), to measure the two.
var noGQA = os.Getenv("HYBRID_CUDA_GQA") == "0"

// gqaParts is HYBRID_CUDA_GQA_PARTS (1..attgParts), the most parts
// attention_g splits a span into whatever the heads, to measure others; 0
// when unset.
var gqaParts = func() int {
	if n, err := strconv.Atoi(os.Getenv("HYBRID_CUDA_GQA_PARTS")); err == nil && n >= 1 && n <= attgParts {
		return n
	}
	return 0
}()

// attgSplit is the most parts attention_g splits a span into for blocks
// (KV heads × blocks a KV head) a row: 32 where there are few (TinyLlama's
// 4: at depth 4096 12.3 µs a layer against 16.2 with 16 parts, on the
// H100), 16 where there are 32 or more (Llama-7B's 32: 32.3 against 37.4
// µs with 32 parts).
func attgSplit(blocks int) int {
	switch {
	case gqaParts > 0:
		return gqaParts
	case blocks >= 32:
		return 16
	}
	return attgParts
}

// gqaHeads is HYBRID_CUDA_GQA_HEADS (1, 2, 4 or 8), the most query heads
// a block of attention_g takes, to measure others; 0 when unset (attendG's
// own choice). A KV
// head's query heads then spread over more blocks, each reading its keys
// and values; each head's output is the same bit for bit.
var gqaHeads = func() int {
	switch n, _ := strconv.Atoi(os.Getenv("HYBRID_CUDA_GQA_HEADS")); n {
	case 1, 2, 4, 8:
		return n
	}
	return 0
}()

// attgMinBlocks is the fewest blocks a row of attention_g is spread over
// where a KV head's query heads allow it (attendG): TinyLlama's 4 KV heads
// of 8 query heads each on 16 blocks of two heads. Measured on an H200
// (TestDecodeAttention, µs a layer at depths 16 / 256 / 1024 / 4096): eight
// heads a block 5.73 / 10.17 / 10.86 / 12.17, four 4.42 / 8.11 / 8.99 /
// 10.64, two 3.57 / 9.01 / 9.48 / 10.71, one 3.33 / 7.09 / 9.38 / 15.24;
// TinyLlama's tg128 960 → 1028 tok/s from eight to two.
const attgMinBlocks = 16

// attgMinBlocksShort is attgMinBlocks while no row of the step sees more
// than attgShortKeys keys (d.span): TinyLlama's 32 query heads on 32
// blocks of one. On an H200 (thirty-sixth session, TestDecodeAttention, µs
// a layer at depths 16 / 256 / 512 / 1024 / 4096, two heads a block → one)
// 3.57 → 3.49, 6.67 → 6.66, 6.92 → 7.10, 7.73 → 8.14, 10.95 → 15.18: each
// block reads its KV head's keys and values, and past a few hundred keys
// those reads cost more than the blocks gain. tg128 from depth 0 with the
// bound at 1024: TinyLlama Q4_0 1809 → 1832 tok/s, Q4_K_M 1627 → 1657,
// Q8_0 1436 → 1463, Llama-7B unchanged (one query head a KV head); but
// from depth 896 Q4_0 1561 → 1535, hence 256.
const attgMinBlocksShort, attgShortKeys = 32, 256

// stepSpan is the most keys a row of st sees: its largest position plus one.
func stepSpan(st ops.Step) int {
	n := 0
	for i := range st.Tokens {
		n = max(n, st.PosOf(i)+1)
	}
	return n
}

// noShortSpans (HYBRID_CUDA_ATTG_SHORT=0) keeps attgMinBlocks at every
// span, to compare.
var noShortSpans = os.Getenv("HYBRID_CUDA_ATTG_SHORT") == "0"

// shortSpan reports whether the step being run (d.span) is known to have
// no row that sees more than attgShortKeys keys.
func (d *Device) shortSpan() bool { return !noShortSpans && d.span > 0 && d.span <= attgShortKeys }

// attendG returns attention_g's kernel for a, its blocks per KV head and
// whether it applies: head sizes 64 and 128, query heads a whole multiple
// of the KV heads. A block takes up to eight query heads, halved while a
// row has fewer than attgMinBlocks blocks (attgMinBlocksShort at short
// spans: shortSpan), or as many as gqaHeads or the test hook d.gqaHeads
// says.
func (d *Device) attendG(a ops.AttnParams) (kernel, int, bool) {
	if noGQA || a.KVHeads <= 0 || a.Heads%a.KVHeads != 0 || (a.HeadDim != 64 && a.HeadDim != 128) {
		return kernel{}, 0, false
	}
	g := a.Heads / a.KVHeads
	most, least := 8, attgMinBlocks
	if d.shortSpan() {
		least = attgMinBlocksShort
	}
	for most > 1 && a.KVHeads*((g+most-1)/most) < least {
		most /= 2
	}
	if d.gqaHeads > 0 {
		most = d.gqaHeads
	} else if gqaHeads > 0 {
		most = gqaHeads
	}
	gm := 0
	for 1<<gm < min(g, most) {
		gm++
	}
	return d.k.attentionG[a.HeadDim/128][gm], (g + 1<<gm - 1) >> gm, true
}

// attendAt is attend for a batched step's rows where rows is d.rowPos (each
// row's position and first cell), or for one sequence's n rows from the
// step's position where it is 0.
func (d *Device) attendAt(op *ops.Op, n int, q, out *Buffer, c *kvCache, rows uintptr) error {
	a := op.Attn
	scale := 1 / float32(math.Sqrt(float64(a.HeadDim)))
	if kg, groups, ok := d.attendG(a); ok && n <= attSplitRows {
		// The parts as the default eight heads a block has them, so that a
		// row's span is cut the same way (and summed in the same order)
		// whatever gqaHeads says. A grid of only the parts a step's span
		// needs (the others' blocks return at once; exact, as a part keeps
		// its least keys) measured no faster on an H200: tg128 TinyLlama
		// Q4_K_M 1414 → 1423, Llama-7B 487.1 → 487.5 tok/s.
		parts := attgSplit(a.KVHeads * ((a.Heads/a.KVHeads + 7) / 8))
		return launch(kg, a.KVHeads*groups, n*parts, 32*attgWarps, d.args().ptr(uintptr(q.ptr)).ptr(uintptr(c.k)).ptr(uintptr(c.v)).ptr(uintptr(out.ptr)).
			i32(a.Heads).i32(a.KVHeads).ptr(uintptr(d.tokens)).f32(scale).ptr(rows).ptr(uintptr(d.attP)).ptr(uintptr(d.attC)).i32(parts))
	}
	k := d.k.attention
	switch {
	case a.HeadDim <= 64:
		k = d.k.attentionT2
	case a.HeadDim <= 128:
		k = d.k.attentionT4
	}
	parts := 1
	if n <= attSplitRows {
		parts = attParts
	}
	return launch(k, a.Heads, n*parts, 32*attWarps, d.args().ptr(uintptr(q.ptr)).ptr(uintptr(c.k)).ptr(uintptr(c.v)).ptr(uintptr(out.ptr)).
		i32(a.Heads).i32(a.KVHeads).i32(a.HeadDim).ptr(uintptr(d.tokens)).f32(scale).ptr(rows).ptr(uintptr(d.attP)).ptr(uintptr(d.attC)).i32(parts))
}
