//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"os"

	"hybrid/ops"
	"hybrid/quant"
)

// Decode-step fusion. A decode step queues sixteen small launches per Llama
// block; at one token each is a few microseconds of mostly fixed cost, so
// flush looks for runs of queued ops that one kernel of kernels/fused.cu can
// do at once:
//
//	RMSNorm? MatMul{1,3}            norm, then up to three mat-vecs of its output (q, k, v)
//	RMSNorm? MatMul MatMul SiLUMul  norm, gate and up row by row, silu(gate)·up
//	RMSNorm? MatMul Add             the mat-vec and the residual add
//	RoPE RoPE Attention             rotate q and k and append k, v to the cache; then attention
//	RMSNorm? MatMul×3 RoPE RoPE Attention
//	                                the two above in two launches: the mat-vecs of q, k and v
//	                                also rotate q and k and append k and v (MV_ROPE); then attention
//
// which makes a Llama block five launches. The ropes may be of either mode,
// with or without frequency factors; a per-head RMSNorm (Qwen3) and AddBias
// (Qwen2) always run alone. A fused launch writes every value the
// ops it replaces write, and computes each exactly as they do (the kernels
// share kernels/common.cuh), so fusing changes no result and nothing outside
// the device can tell. Only decode steps (one token) are fused so, only ops
// queued back to back, and only where no output overlaps an input. Steps of
// 2..mmtMin-1 tokens (a batched decode step of several sequences, or a short
// prompt) fuse [RMSNorm|SiLUMul] MatMul{1,3} [Add] of one input: its rows
// made by the norm or SiLU·mul and quantized in one launch, then one mvb or
// mvt launch for the (up to) three weights, with the residual add after a
// lone weight (matchMVB); steps of more (a prompt)
// fuse MatMul{2,3} of one input into one tensor-core launch (launchMMT).
// HYBRID_CUDA_FUSE=0 turns it off.

var noFuse = os.Getenv("HYBRID_CUDA_FUSE") == "0"

// noMVRope leaves the RoPE and cache append out of the q, k, v mat-vecs
// (fuseMVRope), so that they run as rope_kv (fuseRope): HYBRID_CUDA_MVROPE=0.
var noMVRope = os.Getenv("HYBRID_CUDA_MVROPE") == "0"

// maxStage is the most shared memory a mat-vec block stages its input row in
// (48 KiB, the most a launch gets without opting in).
const maxStage = 48 << 10

// stageBytes is the shared memory the mat-vec kernel (kernels/fused.cu)
// stages a row of cols in for weights of type t: the row quantized to 8 bits
// with its block scales and sums for the block types (xqBytes in
// kernels/q8.cuh), f32 for the float types.
func stageBytes(t quant.Type, cols int) int {
	if chunk(t) == 32 {
		return (cols + 16*((cols+255)/256) + 12*(cols/32) + 15) &^ 15
	}
	return 4 * cols
}

// fusionWindow is the most ops one launch of a unit spans (a norm, three
// mat-vecs of its output and the RoPE of two of them): a launch's blocks
// read an input while others write outputs, so the executor must not give
// an output the buffer of a value read within that many ops before it
// (devices.Info.FusionWindow). disjoint checks it again before fusing.
const fusionWindow = 6

// fusion is how a unit is launched.
type fusion uint8

const (
	single     fusion = iota // one op, by run
	fuseMV                   // [RMSNorm] MatMul×1..3
	fuseSiLU                 // [RMSNorm] MatMul MatMul SiLUMul
	fuseAdd                  // [RMSNorm] MatMul Add
	fuseRope                 // RoPE RoPE Attention
	fuseMVB                  // MatMul×1..3 of one input of several rows (a batch under mmtMin)
	fuseMVRope               // [RMSNorm] MatMul×3 RoPE RoPE Attention: q, k, v, their RoPE and cache append; then attention
	fuseMMT                  // MatMul×1..3 of one input of mmtMin rows or more (a prompt): one tensor-core launch
)

// The fused mat-vec kernel's modes (MV_* in kernels/fused.cu).
const (
	mvPlain = 0
	mvSiLU  = 1
	mvAdd   = 2
	mvRope  = 3
)

// unit is one launch group of a batch: ops[0:n] of the queue, run as kind.
type unit struct {
	kind fusion
	ops  []pending
	q8   q8Link
}

// q8Link says whether a unit's launch makes the next one's input staged
// (q8Out: a fuseSiLU unit on mvwq_, which also writes its SiLU·mul's
// output quantized into d.xqs) or copies it (q8In: the down projection's
// fuseAdd or fuseMV unit after it, MV_QIN), instead of each of its blocks
// making it (q8Pair).
type q8Link uint8

const (
	q8None q8Link = iota
	q8Out
	q8In
)

// fuse splits batch b into units (device thread only).
func (d *Device) fuse(b []pending) []unit {
	us := d.units[:0]
	for i := 0; i < len(b); {
		u := d.match(b[i:])
		us = append(us, u)
		i += len(u.ops)
		if u.kind == single {
			d.stats.alone++
		} else {
			d.stats.fused++
		}
	}
	for i := 0; i+1 < len(us); i++ {
		if d.q8Pair(us[i], us[i+1]) {
			us[i].q8, us[i+1].q8 = q8Out, q8In
		}
	}
	d.units = us
	return us
}

// noSiLUQ8 is HYBRID_CUDA_SILU_Q8=0: the down projection's launch stages its
// input itself, every block, as before q8Pair, to compare.
var noSiLUQ8 = os.Getenv("HYBRID_CUDA_SILU_Q8") == "0"

// q8Pair reports whether unit p, a decode step's gate and up with their
// SiLU·mul, can make c's input staged once for all of c's blocks: c is the
// down projection's mat-vec (with or without its residual add) of p's
// output, with no norm; p's weights have a grouped kernel (mvwq_q4_0,
// mvwq_q8_0) and c's are Q4_0 or Q8_0 (staged in blocks of 32 alike); the
// row is whole groups of 32. The grouped launch takes more rows a warp
// where there are fewer groups than blocks in a wave (TinyLlama's 176
// groups: four rows a warp, not mvsp_q4_0's two), and still measured
// faster (bench/cuda/siluq8-ab.sh).
func (d *Device) q8Pair(p, c unit) bool {
	if noSiLUQ8 || p.kind != fuseSiLU || (c.kind != fuseAdd && c.kind != fuseMV) || !d.k.pdl || d.mvWarps() == 8 {
		return false
	}
	_, _, _, _, pq := normOf(p.ops)
	_, _, cnw, _, cq := normOf(c.ops)
	if cnw != 0 || (c.kind == fuseMV && len(cq) != 1) {
		return false
	}
	s, g, w := pq[2].out, pq[0].w, cq[0].w
	return d.k.byType[g.typ].mvwq.fn != nil && (w.typ == quant.Q4_0 || w.typ == quant.Q8_0) && same(cq[0].ins[0], s) &&
		s.n%32 == 0 && w.w.Cols == s.n && stageBytes(w.typ, s.n) <= maxStage
}

// mvShared is a decode mat-vec launch's shared memory for weights of type t
// and rows of cols, with a norm or not, and the flags it sets: the staged
// row, and the norm weight after it where the kernel copies it before its
// wait (MV_NW_EARLY).
func mvShared(t quant.Type, cols int, norm bool) (shmem, flags int) {
	shmem = stageBytes(t, cols)
	if norm && !noNWEarly && chunk(t) == 32 && cols%8 == 0 && cols <= mvNormCols && shmem+4*cols <= maxStage {
		flags |= mvNWEarly
		shmem += 4 * cols
	}
	return shmem, flags
}

// match returns the unit that starts at q[0]: the longest fusion that
// applies, else q[0] alone.
func (d *Device) match(q []pending) unit {
	one := unit{kind: single, ops: q[:1]}
	if noFuse || d.noFuse {
		return one
	}
	if n := len(q[0].st.Tokens); n > 1 && n < mmtMin {
		if q[0].st.Rows != nil {
			// A batched decode step's rows: their RoPE and cache
			// append in one launch (rope_kv by rows), then attention.
			if u, ok := matchRope(q, n); ok && !noMVBFuse && d.kvs.op != q[2].op.Name {
				return u
			}
		}
		return d.matchMVB(q)
	}
	if len(q[0].st.Tokens) >= mmtMin {
		return matchMMT(q)
	}
	if len(q[0].st.Tokens) != 1 || q[0].st.Rows != nil {
		return one
	}
	if u, ok := matchRope(q, 1); ok {
		return u
	}
	norm := q[0].op.Kind == ops.RMSNorm
	i := 0
	var x *Buffer
	if norm {
		// A per-head norm (Qwen3's of q and k) normalises heads, not the
		// row the fused kernel normalises: it runs alone.
		if q[0].op.PerHead || q[0].w == nil || q[0].n != 1 || q[0].ins[0].n != q[0].w.w.Cols {
			return one
		}
		i, x = 1, q[0].out
	} else if q[0].op.Kind == ops.MatMul && q[0].n == 1 {
		x = q[0].ins[0]
	} else {
		return one
	}
	// The mat-vecs of x: same type and row length, at most three.
	first := i
	for ; i < len(q) && i-first < 3; i++ {
		p := q[i]
		if p.op.Kind != ops.MatMul || p.n != 1 || !same(p.ins[0], x) || !fusable(p) {
			break
		}
		if i > first && (p.w.typ != q[first].w.typ || p.w.w.Cols != q[first].w.w.Cols) {
			break
		}
	}
	mm := q[first:i]
	if len(mm) == 0 {
		return one
	}
	u := unit{kind: fuseMV, ops: q[:i]}
	if r, ok := matchRope(q[i:], 1); ok && len(mm) == 3 && ropesOf(mm, r) && !noMVRope {
		u = unit{kind: fuseMVRope, ops: q[:i+3]}
		if disjoint(u) {
			return u
		}
		u = unit{kind: fuseMV, ops: q[:i]}
	}
	// q and k of one type, v of another whose activations are quantized
	// alike (mixedRope): still one launch with the RoPE and cache append.
	if len(mm) == 2 && i < len(q) && !noMVRope {
		v := q[i]
		if v.op.Kind == ops.MatMul && v.n == 1 && same(v.ins[0], x) && fusable(v) && v.w.w.Cols == mm[0].w.w.Cols &&
			mixedRope[[2]quant.Type{mm[0].w.typ, v.w.typ}] {
			if r, ok := matchRope(q[i+1:], 1); ok && ropesOf(q[first:i+1], r) {
				if m := (unit{kind: fuseMVRope, ops: q[:i+4]}); disjoint(m) {
					return m
				}
			}
		}
	}
	switch {
	case len(mm) == 2 && i < len(q) && q[i].op.Kind == ops.SiLUMul && q[i].n == 2 &&
		same(q[i].ins[0], mm[0].out) && same(q[i].ins[1], mm[1].out) && mm[0].w.w.Rows == mm[1].w.w.Rows && q[i].out.n == mm[0].w.w.Rows:
		u = unit{kind: fuseSiLU, ops: q[:i+1]}
	case len(mm) == 1 && i < len(q) && q[i].op.Kind == ops.Add && q[i].n == 2 && q[i].out.n == mm[0].w.w.Rows &&
		(same(q[i].ins[1], mm[0].out) && q[i].ins[0].n == mm[0].w.w.Rows || same(q[i].ins[0], mm[0].out) && q[i].ins[1].n == mm[0].w.w.Rows):
		u = unit{kind: fuseAdd, ops: q[:i+1]}
	}
	if !disjoint(u) {
		return one
	}
	return u
}

// matchMVB matches the mat-vecs of one input of several rows by weights of
// one type and row length, at most three (a layer's q, k and v; gate and
// up): one quantization of the input and one launch of mvb or mvt. The op
// that makes that input joins the quantization's launch where it is an
// RMSNorm of whole rows or a SiLUMul (xq_<type> does it first), and the
// residual Add after a lone weight joins mvt's (its epilogue). With the
// rows' RoPE and cache append in one launch (matchRope), a batched step's
// Llama block is ten launches instead of seventeen, and computes what the
// ops one by one compute, bit for bit.
func (d *Device) matchMVB(q []pending) unit {
	one := unit{kind: single, ops: q[:1]}
	n := len(q[0].st.Tokens)
	i := 0
	if len(q) > 1 && !noMVBFuse && makesRows(q[0], q[1], n) {
		i = 1
	}
	p0 := q[i]
	if p0.op.Kind != ops.MatMul || p0.n != 1 || p0.w == nil || !onQ8(p0.w) {
		return one
	}
	k := sameInput(q[i:])
	if k == 0 {
		return one
	}
	end := i + k
	if k == 1 && end < len(q) && !noMVBFuse && d.mvtFor(p0.w.typ, n).fn != nil && residual(q[end], p0, n) {
		end++
	}
	// The widest unit whose outputs overlap none of its inputs; where
	// none with the pre-op is, it runs alone, and the mat-vecs match next.
	if u := (unit{kind: fuseMVB, ops: q[:end]}); disjoint(u) {
		return u
	}
	if u := (unit{kind: fuseMVB, ops: q[:i+k]}); disjoint(u) {
		return u
	}
	return one
}

// noMVBFuse (HYBRID_CUDA_MVB_FUSE=0) leaves a batched step's RMSNorm,
// SiLUMul and residual Add out of its mat-vecs' launches, for comparison.
var noMVBFuse = os.Getenv("HYBRID_CUDA_MVB_FUSE") == "0"

// makesRows reports whether p, an RMSNorm of whole rows or a SiLUMul of n
// rows, makes the input of mm, a mat-mul of n rows, so that xq_<type> can
// do it as it quantizes mm's input.
func makesRows(p, mm pending, n int) bool {
	if mm.op.Kind != ops.MatMul || mm.w == nil || !same(mm.ins[0], p.out) {
		return false
	}
	cols := mm.w.w.Cols
	if p.out.n != n*cols || p.ins[0].n != n*cols {
		return false
	}
	switch p.op.Kind {
	case ops.RMSNorm:
		return !p.op.PerHead && p.w != nil && p.n == 1 && p.w.w.Cols == cols
	case ops.SiLUMul:
		return p.n == 2 && p.ins[1].n == n*cols
	}
	return false
}

// residual reports whether a is the residual Add of mm's product (n rows):
// the other input and the output of just that size.
func residual(a, mm pending, n int) bool {
	rows := mm.w.w.Rows
	if a.op.Kind != ops.Add || a.n != 2 || a.out.n != n*rows || mm.out.n != n*rows {
		return false
	}
	return same(a.ins[0], mm.out) && a.ins[1].n == n*rows || same(a.ins[1], mm.out) && a.ins[0].n == n*rows
}

// sameInput counts the mat-muls at the start of q (at most three) of
// q[0]'s input by weights of q[0]'s type and row length, over the step's
// rows.
func sameInput(q []pending) int {
	p0 := q[0]
	n := len(p0.st.Tokens)
	i := 0
	for ; i < len(q) && i < 3; i++ {
		p := q[i]
		if p.op.Kind != ops.MatMul || p.n != 1 || !same(p.ins[0], p0.ins[0]) || p.w == nil || p.w.typ != p0.w.typ ||
			p.w.w.Cols != p0.w.w.Cols || p.ins[0].n != n*p.w.w.Cols || p.out.n < n*p.w.w.Rows {
			break
		}
	}
	return i
}

// matchMMT matches a prompt's mat-muls of one input by weights of one type
// and row length on the tensor cores, at most three (a layer's q, k and v;
// gate and up): the input rounded to f16 once and one launch of mmt, whose
// tiles take the weights one after another (launchMMT).
func matchMMT(q []pending) unit {
	one := unit{kind: single, ops: q[:1]}
	p0 := q[0]
	if p0.op.Kind != ops.MatMul || p0.n != 1 || p0.w == nil || p0.w.typ == quant.F32 || p0.w.w.Cols%32 != 0 {
		return one
	}
	i := sameInput(q)
	if i < 2 {
		return one
	}
	u := unit{kind: fuseMMT, ops: q[:i]}
	if !disjoint(u) {
		return one
	}
	return u
}

// onQ8 reports whether the mat-vecs of w run on 8-bit activations
// (kernels/q8.cuh): the block types whose row the decode kernel can stage.
func onQ8(w *weight) bool { return chunk(w.typ) == 32 && stageBytes(w.typ, w.w.Cols) <= maxStage }

// fusable reports whether a decode mat-vec can run in the fused kernel.
func fusable(p pending) bool {
	w := p.w
	return w != nil && stageBytes(w.typ, w.w.Cols) <= maxStage && w.w.Cols%8 == 0 && p.ins[0].n == w.w.Cols && p.out.n >= w.w.Rows
}

// matchRope matches RoPE(q) RoPE(k) Attention(q, k, v) of n tokens: one, or
// the rows of a batched step.
func matchRope(q []pending, n int) (unit, bool) {
	if len(q) < 3 || q[0].op.Kind != ops.RoPE || q[1].op.Kind != ops.RoPE || q[2].op.Kind != ops.Attention || q[2].n != 3 {
		return unit{}, false
	}
	rq, rk, at := q[0], q[1], q[2]
	a := at.op.Attn
	if !rq.op.Rope.Equal(rk.op.Rope) || rq.op.Rope.HeadDim != a.HeadDim || a.HeadDim%2 != 0 ||
		!same(at.ins[0], rq.out) || !same(at.ins[1], rk.out) ||
		rq.ins[0].n != n*a.Heads*a.HeadDim || rk.ins[0].n != n*a.KVHeads*a.HeadDim || at.ins[2].n != n*a.KVHeads*a.HeadDim ||
		rq.out.n != rq.ins[0].n || rk.out.n != rk.ins[0].n {
		return unit{}, false
	}
	u := unit{kind: fuseRope, ops: q[:3]}
	return u, disjoint(u)
}

// ropesOf reports whether the RoPE-and-attention unit r turns and appends
// exactly the products of the mat-vecs mm (q, k, v), so that the mat-vec
// launch can do r's RoPE and cache append (MV_ROPE).
func ropesOf(mm []pending, r unit) bool {
	rq, rk, at := r.ops[0], r.ops[1], r.ops[2]
	h := rq.op.Rope.HeadDim
	return same(rq.ins[0], mm[0].out) && same(rk.ins[0], mm[1].out) && same(at.ins[2], mm[2].out) &&
		mm[0].w.w.Rows == rq.ins[0].n && mm[1].w.w.Rows == rk.ins[0].n && mm[2].w.w.Rows == at.ins[2].n &&
		h < 1<<12 && rq.op.Rope.Dims < 1<<12 && rq.op.Rope.Dims <= h
}

// same reports whether a and b are the same value's buffer.
func same(a, b *Buffer) bool { return a != nil && b != nil && a.ptr == b.ptr && a.n == b.n }

// overlap reports whether a and b share memory.
func overlap(a, b *Buffer) bool {
	return a != nil && b != nil && a.ptr < b.ptr+dptr(4*b.n) && b.ptr < a.ptr+dptr(4*a.n)
}

// disjoint reports whether no output of u overlaps an input that u reads
// from outside, or another output: a fused kernel reads its inputs while
// other blocks write, which the ops one by one never do.
func disjoint(u unit) bool {
	var ins, outs []*Buffer
	written := func(b *Buffer) bool {
		for _, o := range outs {
			if o == b || same(o, b) {
				return true
			}
		}
		return false
	}
	for _, p := range u.ops {
		for _, in := range p.ins[:p.n] {
			if !written(in) {
				ins = append(ins, in)
			}
		}
		outs = append(outs, p.out)
	}
	for i, o := range outs {
		for _, in := range ins {
			if overlap(o, in) {
				return false
			}
		}
		for _, o2 := range outs[:i] {
			if overlap(o, o2) {
				return false
			}
		}
	}
	return true
}

// runUnit launches u (device thread only).
func (d *Device) runUnit(u unit) error {
	switch u.kind {
	case fuseMV, fuseSiLU, fuseAdd:
		if err := d.runMV(u); err != nil {
			return opErr(u.ops[0], err)
		}
		return nil
	case fuseRope:
		if err := d.runRope(u); err != nil {
			return opErr(u.ops[2], err)
		}
		return nil
	case fuseMVRope:
		if err := d.runMVRope(u); err != nil {
			return opErr(u.ops[len(u.ops)-1], err)
		}
		return nil
	case fuseMVB:
		if err := d.runMVB(u); err != nil {
			return opErr(u.ops[0], err)
		}
		return nil
	case fuseMMT:
		var ws [3]mvWeight
		for j, p := range u.ops {
			ws[j] = mvWeight{p.w, p.out}
		}
		if err := d.launchMMT(d.k.byType[ws[0].w.typ], ws[:len(u.ops)], u.ops[0].ins[0], len(u.ops[0].st.Tokens)); err != nil {
			return opErr(u.ops[0], err)
		}
		return nil
	}
	for _, p := range u.ops {
		if err := d.runOp(p); err != nil {
			return err
		}
	}
	return nil
}

// runMVB launches a fuseMVB unit: [RMSNorm or SiLUMul] MatMul×1..3 [Add]
// (matchMVB).
func (d *Device) runMVB(u unit) error {
	q := u.ops
	x := q[0].ins[0]
	var pre mvbPre
	switch q[0].op.Kind {
	case ops.RMSNorm:
		pre = mvbPre{nw: uintptr(q[0].w.ptr), eps: q[0].op.Eps, y: q[0].out}
		q = q[1:]
	case ops.SiLUMul:
		pre = mvbPre{u: uintptr(q[0].ins[1].ptr), y: q[0].out}
		q = q[1:]
	}
	var res, sum *Buffer
	if a := q[len(q)-1]; a.op.Kind == ops.Add {
		res, sum = a.ins[0], a.out
		if same(res, q[0].out) {
			res = a.ins[1]
		}
		q = q[:len(q)-1]
	}
	if len(q) < len(u.ops) {
		d.stats.batchJoined++
	}
	var ws [3]mvWeight
	for j, p := range q {
		ws[j] = mvWeight{p.w, p.out}
	}
	return d.launchMVB(x, len(q[0].st.Tokens), ws[:len(q)], pre, res, sum)
}

// mvbPre is the op that xq_<type> does before it quantizes a batched
// mat-vec's input rows: none, an RMSNorm by nw and eps, or a SiLUMul of the
// rows (the gate) and u (the up rows), writing its output y.
type mvbPre struct {
	nw, u uintptr
	eps   float32
	y     *Buffer
}

// runMV launches the fused mat-vec for a fuseMV, fuseSiLU or fuseAdd unit.
func (d *Device) runMV(u unit) error {
	x, nout, nw, eps, q := normOf(u.ops)
	mode := mvPlain
	var res, sum *Buffer
	switch u.kind {
	case fuseSiLU:
		mode, sum = mvSiLU, q[2].out
		q = q[:2]
	case fuseAdd:
		add := q[1]
		mode, sum, res = mvAdd, add.out, add.ins[0]
		if same(res, q[0].out) {
			res = add.ins[1]
		}
		q = q[:1]
	}
	var ws [3]mvWeight
	for j, p := range q {
		ws[j] = mvWeight{p.w, p.out}
	}
	if u.q8 != q8None {
		// The down projection's input, staged once (q8Pair).
		n := sum.n
		if u.q8 == q8In {
			n = x.n
		}
		if need := int64(stageBytes(quant.Q8_0, n)); need > d.nxqs {
			if err := d.regrow(&d.xqs, need); err != nil {
				return err
			}
			d.nxqs = need
		}
		if u.q8 == q8In {
			x = &Buffer{dev: d, ptr: d.xqs, n: int(d.nxqs / 4)}
		}
	}
	return d.launchMV(x, nw, nout, eps, ws[:len(q)], mode, res, sum, nil, u.q8)
}

// normOf splits a mat-vec unit's ops into its RMSNorm, if it starts with
// one (the mat-vecs then read its output: x is its input, nout its output,
// nw and eps its weight and epsilon), and the ops after it; without one, x
// is the first mat-vec's input.
func normOf(q []pending) (x, nout *Buffer, nw uintptr, eps float32, rest []pending) {
	if q[0].op.Kind == ops.RMSNorm {
		return q[0].ins[0], q[0].out, uintptr(q[0].w.ptr), q[0].op.Eps, q[1:]
	}
	return q[0].ins[0], nil, 0, 0, q
}

// ropeArgs are an MV_ROPE launch's RoPE and cache: rope_kv's parameters.
type ropeArgs struct {
	qo, ko *Buffer
	kc, vc dptr
	rope   ops.RopeParams
	freqs  dptr
}

// runMVRope launches a fuseMVRope unit: the mat-vecs of q, k and v with
// their RoPE and the cache append (MV_ROPE), then attention, which is what
// runMV and runRope launch for its two halves, in two launches instead of
// three.
func (d *Device) runMVRope(u unit) error {
	x, nout, nw, eps, q := normOf(u.ops)
	rq, rk, at := q[3], q[4], q[5]
	c, err := d.kvFor(at.op)
	if err != nil {
		return err
	}
	c = c.at(at.st.Base)
	freqs, err := d.freqsOf(rq.op.Rope)
	if err != nil {
		return err
	}
	ws := []mvWeight{{q[0].w, q[0].out}, {q[1].w, q[1].out}, {q[2].w, q[2].out}}
	ra := &ropeArgs{qo: rq.out, ko: rk.out, kc: c.k, vc: c.v, rope: rq.op.Rope, freqs: freqs}
	d.stats.mvRopes++
	if err := d.launchMV(x, nw, nout, eps, ws, mvRope, nil, nil, ra, q8None); err != nil {
		return err
	}
	return d.attend(at.op, 1, at.ins[0], at.out, c)
}

// ropeVPairs is HYBRID_CUDA_ROPE_VPAIRS=1: an MV_ROPE launch takes v's rows
// two a unit, as q's and k's, instead of one (rope_rows in
// kernels/fused.cu), to measure the two.
var ropeVPairs = os.Getenv("HYBRID_CUDA_ROPE_VPAIRS") == "1"

// ropePair2 is not HYBRID_CUDA_ROPE_PAIR2=0: an MV_ROPE launch of Q4_0,
// Q8_0 or (in its own kernel, ropeKernels) Q4_K takes a pair of q's or k's
// rows with both rows' loads at once (rope_rows in kernels/fused.cu).
var ropePair2 = os.Getenv("HYBRID_CUDA_ROPE_PAIR2") != "0"

// mvWeight is one weight of a mat-vec launch and the buffer of its product.
type mvWeight struct {
	w *weight
	y *Buffer
}

// launchMV launches the mat-vec kernel of kernels/fused.cu: x (normalised
// with nw and eps into nout first, if nw is set) times up to three weights of
// one type and row length, each into its y, with mode's SiLU·mul or residual
// add into sum. With one weight, no norm and mvPlain it is the decode step's
// plain mat-vec, so fused and unfused decode compute alike. With q8 q8Out
// (an mvSiLU launch) it also writes sum staged into d.xqs, by whole groups
// of 32 rows a block (mvwq_); with q8In, x is d.xqs, copied in, not made
// (MV_QIN).
func (d *Device) launchMV(x *Buffer, nw uintptr, nout *Buffer, eps float32, ws []mvWeight, mode int, res, sum *Buffer, ra *ropeArgs, q8 q8Link) error {
	w0 := ws[0].w
	cols := w0.w.Cols
	var wp, yp [3]uintptr
	var rows [3]int
	total := 0
	for j, m := range ws {
		wp[j], yp[j], rows[j] = uintptr(m.w.ptr), uintptr(m.y.ptr), m.w.w.Rows
		total += rows[j]
	}
	switch mode {
	case mvSiLU:
		total = rows[0]
	case mvRope:
		// A unit is two rows of q or k (the pair RoPE turns), and one of
		// v, or two where ropeVPairs (rope_rows).
		total = (rows[0]+rows[1])/2 + rows[2]
		if ropeVPairs {
			total = (rows[0] + rows[1] + rows[2]) / 2
		}
	}
	ptr := func(b *Buffer) uintptr {
		if b == nil {
			return 0
		}
		return uintptr(b.ptr)
	}
	a := d.args().ptr(uintptr(x.ptr)).ptr(nw).ptr(ptr(nout)).f32(eps).i32(cols).
		ptr(wp[0]).ptr(wp[1]).ptr(wp[2]).i64(int64(w0.rowBytes)).
		ptr(yp[0]).ptr(yp[1]).ptr(yp[2]).i32(rows[0]).i32(rows[1]).i32(rows[2]).
		i32(mode).ptr(ptr(res)).ptr(ptr(sum))
	switch {
	case ra != nil:
		r := ra.rope
		a.ptr(uintptr(ra.qo.ptr)).ptr(uintptr(ra.ko.ptr)).ptr(uintptr(ra.kc)).ptr(uintptr(ra.vc)).
			i32(r.HeadDim | r.Dims<<12 | b2i(r.Neox)<<24 | b2i(ropeVPairs)<<25 | b2i(ropePair2)<<26).f32(ropeScale(r)).ptr(uintptr(d.tokens)).ptr(uintptr(ra.freqs))
	case q8 == q8Out:
		a.ptr(uintptr(d.xqs)).ptr(0).ptr(0).ptr(0).i32(0).f32(0).ptr(0).ptr(0) // qo: where mvwq_ writes the staged rows
	default:
		a.ptr(0).ptr(0).ptr(0).ptr(0).i32(0).f32(0).ptr(0).ptr(0)
	}
	tk := d.k.byType[w0.typ]
	k, wide := tk.mv, false // MV_THREADS: eight warps
	if tk.mvw.fn != nil && d.mvWarps() != 8 {
		k, wide = tk.mvw, true
	}
	rb2 := w0.rowBytes
	var ropePre kernel // mvrp_, where the pair has one
	if mode == mvRope {
		if mk, ok := d.k.mvRope[[2]quant.Type{w0.typ, ws[2].w.typ}]; ok {
			k, rb2 = mk[0], ws[2].w.rowBytes
			if wide {
				k, ropePre = mk[1], mk[2]
			}
		} else if wide && ws[2].w.typ == w0.typ {
			ropePre = tk.mvrp // Q8_0's (mvrp_q8_0_q8_0)
		}
	}
	warps := 8
	if wide {
		warps = k.threads / 32
	}
	need := (total + warps - 1) / warps // blocks, one row (unit) a warp
	if wide {
		if k == tk.mvw && tk.mvw2.fn != nil && d.twoBlocks(need) {
			k = tk.mvw2
		}
		// A launch of at most one block a multiprocessor, as programmatic
		// dependent launches: each warp's first row's loads go out before
		// it waits for the launch before (mvp_ in kernels/fused.cu); for
		// MV_ROPE, Q4_0's, Q4_K's (mvrp_q4_k_q4_k, v of Q4_K) and Q8_0's
		// (mvrp_q8_0_q8_0), whose pairs of rows go at once (pair_dots).
		pre := mode == mvPlain || mode == mvAdd || mode == mvRope && w0.typ == quant.Q4_0 && ropePair2 && !noPreRope
		fits := d.k.pdl && !noPre && need <= d.sms
		if k == tk.mvw && tk.mvp.fn != nil && pre && fits {
			k = tk.mvp
			d.stats.mvPre++
		} else if q8 == q8Out {
			k = tk.mvwq // whole groups of 32 rows a block (q8Pair chose it)
			need = total / 32
			d.stats.siluQ8++
		} else if k == tk.mvw && mode == mvSiLU && tk.mvsp.fn != nil && d.k.pdl && !noPre && !noPreSiLU {
			// Q4_0's gate and up at two blocks a multiprocessor: the first
			// unit's two rows' first trip each (mvsp_q4_0).
			k = tk.mvsp
			d.stats.mvPre++
		} else if mode == mvRope && ropePre.fn != nil && ropePair2 && !noPreRope && fits {
			k = ropePre
			d.stats.mvPre++
		}
	}
	a.i64(int64(rb2))
	// The norm weight copied to shared memory before the wait (MV_NW_EARLY
	// in kernels/fused.cu), after the staged row, where it fits.
	shmem, flags := mvShared(w0.typ, cols, nw != 0)
	if resLate {
		flags |= mvResLate
	}
	if q8 == q8In {
		flags |= mvQIn
	}
	a.i32(flags)
	if q8 == q8Out && k.fn != tk.mvwq.fn {
		return fmt.Errorf("a gate and up launch asked to stage the down projection's input, on %s", k.name)
	}
	blocks, err := mvBlocks(d, k, need, 32*warps, shmem)
	if err != nil {
		return err
	}
	k.pdl = d.k.pdl
	return launchShared(k, blocks, 1, 32*warps, shmem, a)
}

// mvNWEarly, mvResLate and mvQIn are MV_NW_EARLY, MV_RES_LATE and MV_QIN,
// bits of the mat-vec kernel's flags; mvNormCols is the longest row the kernel
// normalises in registers (8·MV_THREADS·RP in mv), the only path that
// reads the norm weight copied early.
const (
	mvNWEarly  = 1
	mvResLate  = 2
	mvQIn      = 4
	mvNormCols = 8 * 256 * 4
)

// resLate is HYBRID_CUDA_RES_LATE=1: MV_ADD launches read the residual
// after each row's product, as before, to measure MV_RES_LATE.
var resLate = os.Getenv("HYBRID_CUDA_RES_LATE") == "1"

// noNWEarly is HYBRID_CUDA_NW_EARLY=0: the norm weight read where it is
// used, after the sum of squares, to measure MV_NW_EARLY.
var noNWEarly = os.Getenv("HYBRID_CUDA_NW_EARLY") == "0"

// noPre is HYBRID_CUDA_PRE=0: no mvp_ launches, to measure them;
// noPreRope is HYBRID_CUDA_PRE_ROPE=0: none for MV_ROPE; noPreSiLU is
// HYBRID_CUDA_PRE_SILU=0: no mvsp_ for MV_SILU.
var (
	noPre     = os.Getenv("HYBRID_CUDA_PRE") == "0"
	noPreRope = os.Getenv("HYBRID_CUDA_PRE_ROPE") == "0"
	noPreSiLU = os.Getenv("HYBRID_CUDA_PRE_SILU") == "0"
)

// mixedRope are the pairs of q's and k's type and v's type with an MV_ROPE
// launch (mvr_ and mvrw_ in kernels/fused.cu): v's activation row is
// quantized as q's, so one staged row serves the three. llama-quantize's
// Q4_K_M and Q5_K_M give half of a model's layers a Q6_K attn_v (Q8_0 under
// Q5_0 where a row is no whole number of 256-blocks); a layer is then one
// launch and not three (q and k; v; rope_kv).
var mixedRope = map[[2]quant.Type]bool{{quant.Q4_K, quant.Q6_K}: true, {quant.Q5_K, quant.Q6_K}: true, {quant.Q5_0, quant.Q8_0}: true}

// ropeKernels are the pairs of q's and k's type and v's type with an MV_ROPE
// kernel of their own (mvr_ and mvrw_ in kernels/fused.cu): mixedRope's, and
// Q4_K alone, whose q and k rows there take both rows' loads at once
// (rope_rows) where in mvw_q4_k, which also runs SiLU·mul's two rows at
// once, they would spill.
var ropeKernels = func() [][2]quant.Type {
	ks := [][2]quant.Type{{quant.Q4_K, quant.Q4_K}}
	for p := range mixedRope {
		ks = append(ks, p)
	}
	return ks
}()

// mvwTypes are the types with a decode mat-vec of sixteen warps a block
// (mvw_<type> in kernels/fused.cu).
var mvwTypes = map[quant.Type]bool{quant.Q4_0: true, quant.Q8_0: true, quant.Q4_K: true, quant.Q5_K: true, quant.Q6_K: true}

// mvWarpsEnv is HYBRID_CUDA_MV_WARPS: 8 runs the decode mat-vecs of
// mvwTypes on eight warps a block, as the other types.
var mvWarpsEnv = os.Getenv("HYBRID_CUDA_MV_WARPS")

// mvWarps is the warps a block of a decode mat-vec takes where its type
// has mvw_<type>: 8 where the test hook SetMVWarps or HYBRID_CUDA_MV_WARPS
// says 8, else the wide kernel's own (its launch bound, kernel.threads: 16
// as built). A multiprocessor then normalises and quantizes x for half as
// many blocks. Measured on an H200 (TestDecodeMatVec, µs a mat-vec, 8
// warps → 16): Llama-7B's Q4_K q,k,v 14.54 → 14.04, gate+up 22.08 → 20.81,
// down 17.69 → 15.29 (Q6_K 24.57 → 22.41), o 8.11 → 7.26; TinyLlama's Q4_0
// q,k,v 5.60 → 4.97, down 7.82 → 7.16, gate+up 8.98 → 9.70; decode
// (tg128) 7B 375/373 → 388/389 tok/s, TinyLlama 1090/1082 → 1094/1063.
func (d *Device) mvWarps() int {
	if d.mvWarpsSet > 0 {
		return d.mvWarpsSet
	}
	if mvWarpsEnv == "8" {
		return 8
	}
	return 16
}

// mvw2Env is HYBRID_CUDA_MVW2: 0 never takes mvw2_<type>, 1 always, to
// measure them; else twoBlocks's rule.
var mvw2Env = os.Getenv("HYBRID_CUDA_MVW2")

// twoBlocks says whether a wide decode mat-vec of need blocks runs as
// mvw2_<type> (two blocks a multiprocessor, 64 registers) rather than
// mvw_<type> (one, more registers): where its rows fill more than one block
// a multiprocessor, or always where the test hook SetTwoBlocks says so.
func (d *Device) twoBlocks(need int) bool {
	switch {
	case d.twoSet || mvw2Env == "1":
		return true
	case mvw2Env == "0":
		return false
	}
	return need > d.sms
}

// mvWave limits a mat-vec launch to one wave (mvBlocks); tests turn it off
// to measure a block for every eight rows.
var mvWave = true

// mvBlocks is the grid of a mat-vec launch that needs need blocks of eight
// rows (bx threads and shmem bytes each): at most one wave of k, each warp
// then taking rows a grid's warps apart, spread so that every warp takes as
// many as the busiest (a block stages its input once for all of its rows).
func mvBlocks(d *Device, k kernel, need, bx, shmem int) (int, error) {
	if !mvWave {
		return need, nil
	}
	w, err := d.wave(k, bx, shmem)
	if err != nil {
		return 0, err
	}
	per := (need + w - 1) / w // rows of each warp
	return (need + per - 1) / per, nil
}

// mvbShared is the most shared memory an mvb block stages activation rows
// in: at most two blocks' worth per multiprocessor (sm_80 and later have
// 164 KiB and up), so that two blocks of eight warps each fit.
const mvbShared = 80 << 10

// mvbRows is mvb's most activation rows per block (MVB_NR in
// kernels/fused.cu).
const mvbRows = 8

// mvbWarpRows is the weight rows each warp of mvb takes: more share each
// block's staged activations among more rows, fewer put more warps in
// flight. Measured on an H100 at 5632×2048 (TestBandwidth), 1, 2 and 4 were
// within 10% of each other from 4 rows up; 4 was 15–25% slower at 2 rows.
const mvbWarpRows = 2

// launchMVB launches the batched mat-vec of kernels/fused.cu: the n rows of
// x (after pre, where it has an op), quantized to 8 bits into d.xq as the
// decode mat-vec quantizes its row (xq_<type>), times up to three weights of
// one block type and row length, each into its y, each product exactly the
// decode mat-vec's of that row; with sum set, a lone weight's product plus
// res into sum (the residual add).
func (d *Device) launchMVB(x *Buffer, n int, ws []mvWeight, pre mvbPre, res, sum *Buffer) error {
	w0 := ws[0].w
	cols := w0.w.Cols
	if x.n < n*cols {
		return fmt.Errorf("input of %d elements, want %d×%d", x.n, n, cols)
	}
	stride := (stageBytes(w0.typ, cols) + 15) &^ 15
	if need := int64(n) * int64(stride); need > d.nxq {
		need = max(need, mmtMin*int64(stride))
		if err := d.regrow(&d.xq, need); err != nil {
			return err
		}
		d.nxq = need
	}
	tk := d.k.byType[w0.typ]
	var y uintptr
	if pre.y != nil {
		y = uintptr(pre.y.ptr)
	}
	if err := launch(tk.xq, n, (cols+xqChunk-1)/xqChunk, 256, d.args().ptr(uintptr(x.ptr)).ptr(pre.nw).ptr(pre.u).ptr(y).f32(pre.eps).ptr(uintptr(d.xq)).i32(cols).i64(int64(stride))); err != nil {
		return err
	}
	wp, yp, rows, err := weightsOf(ws, n)
	if err != nil {
		return err
	}
	total := rows[0] + rows[1] + rows[2]
	// Eight weight rows a block, on tensor cores.
	var rp, sp uintptr
	if sum != nil {
		if len(ws) != 1 {
			return fmt.Errorf("a residual add after %d weights", len(ws))
		}
		rp, sp = uintptr(res.ptr), uintptr(sum.ptr)
	}
	if k := d.mvtFor(w0.typ, n); k.fn != nil {
		stage := mvtStage(w0.typ, w0.rowBytes)
		a := d.args().ptr(uintptr(d.xq)).i32(stride).i32(n).i32(cols).
			ptr(wp[0]).ptr(wp[1]).ptr(wp[2]).i64(int64(w0.rowBytes)).
			ptr(yp[0]).ptr(yp[1]).ptr(yp[2]).i32(rows[0]).i32(rows[1]).i32(rows[2]).i32(stage).ptr(rp).ptr(sp)
		shmem := 0
		if stage > 0 {
			shmem = 8 * (stage + 16)
		}
		return launchShared(k, (total+7)/8, 1, 32*mvtWarps(w0.typ), shmem, a)
	}
	if sum != nil {
		return fmt.Errorf("a residual add with no tensor-core mat-vec for %s at %d rows", w0.typ, n)
	}
	// Activation rows per block: as many as fit the shared memory, at
	// most mvbRows, spread evenly over the groups.
	nr := max(1, min(mvbRows, n, mvbShared/stride))
	groups := (n + nr - 1) / nr
	nr = (n + groups - 1) / groups
	a := d.args().ptr(uintptr(d.xq)).i32(stride).i32(n).i32(nr).i32(mvbWarpRows).i32(cols).
		ptr(wp[0]).ptr(wp[1]).ptr(wp[2]).i64(int64(w0.rowBytes)).
		ptr(yp[0]).ptr(yp[1]).ptr(yp[2]).i32(rows[0]).i32(rows[1]).i32(rows[2])
	const warps = 8 // MV_THREADS / 32
	per := warps * mvbWarpRows
	return launchShared(tk.mvb, groups, (total+per-1)/per, 32*warps, nr*stride, a)
}

// xqChunk is the elements of a row that a block of xq_<type> quantizes:
// 256 threads, a piece of eight each.
const xqChunk = 2048

// mvtTypes are the weight types whose batched mat-vecs run on 8-bit tensor
// cores (mvt_<type> in kernels/fused.cu), each row's product still exactly
// its decode step's, and the fewest rows they do so from. Measured on an
// H100 at 5632×2048 (TestBandwidth, GPU time): against mvb, Q4_0 2 rows
// 17.2 µs against 14.0, 4 rows 17.9 against 19.3, 16 rows 22.2 against 53.0;
// Q8_0, Q4_K and Q6_K as fast or faster from 2 rows (16 rows: 22.7 against
// 75.7, 16.1 against 35.4, 19.8 against 55.6).
var mvtTypes = map[quant.Type]int{quant.Q4_0: 4, quant.Q8_0: 2, quant.Q4_K: 2, quant.Q6_K: 2}

// useMVT runs mvtTypes' batched mat-vecs on tensor cores; HYBRID_CUDA_MVT=0
// runs them on mvb (dp4a), for comparison.
var useMVT = os.Getenv("HYBRID_CUDA_MVT") != "0"

// mvtStage is the stage argument of mvt for weight rows of type t and rb
// bytes: rb where a block's eight rows are copied to shared memory before
// its sums (mvtStaged types, rows of a whole number of 16 bytes, eight of
// them with their padding in what the block's own shared memory leaves of
// mvtShared), else 0 (read where they are). HYBRID_CUDA_MVT_STAGE=0 turns
// it off, for comparison.
func mvtStage(t quant.Type, rb int) int {
	// A block's own: its warps' partial sums of two tiles (1 KiB a warp),
	// counted as at least 8 KiB.
	limit := mvtShared - max(8, mvtWarps(t))<<10
	if noMVTStage || !mvtStaged[t] || rb%16 != 0 || 8*(rb+16) > limit {
		return 0
	}
	return rb
}

// mvtStaged are the types whose batched mat-vecs stage their weight rows.
// Measured on an H100 at 5632×2048 (TestBandwidth, GPU time, staged against
// not): Q4_0 4 rows 13.3 µs against 18.6, 16 rows 16.9 against 22.7; Q8_0
// 15.2 against 17.7 and 19.2 against 21.2; Q4_K and Q6_K 2–6% slower
// staged (12.8 against 12.5, 15.8 against 15.4 at 4 rows), their lanes
// reading their rows in longer pieces already.
var mvtStaged = map[quant.Type]bool{quant.Q4_0: true, quant.Q8_0: true}

// mvtShared is the shared memory an mvt block has, its staged rows and its
// own: the 48 KiB a block has without asking.
const mvtShared = 48 << 10

// noMVTStage is HYBRID_CUDA_MVT_STAGE=0: mvtStage stages nothing.
var noMVTStage = os.Getenv("HYBRID_CUDA_MVT_STAGE") == "0"

// mvtWarps is an mvt block's warps for weights of type t: the decode's
// lane groups split W ways, on the same eight weight rows (mvt_, mvtw_ and
// mvtx_<type>: 4, 8 and 16 warps). Q4_0 takes 8: its 32 lane groups (one
// a lane) keep eight running sums a warp at four, and its narrow matrices
// (256 blocks for TinyLlama's 2048-row attention output and down
// projection) leave most warp slots of the multiprocessors empty. Measured
// on an H200 (BenchmarkCUDARows, synthetic TinyLlama Q4_0, two runs): 4
// rows 2,150 / 2,102 tok/s against 2,019 / 2,021 with four warps, 16 rows
// 6,694 / 6,781 against 6,399 / 6,445. Llama-7B's Q4_K and Q6_K (8 lane
// groups) were slower with eight: 4 rows 683 against 703 tok/s.
// HYBRID_CUDA_MVT_WARPS=4, 8 or 16 sets it for every type that has it.
func mvtWarps(t quant.Type) int {
	switch mvtWarpsEnv {
	case "4":
		return 4
	case "8":
		return 8
	case "16":
		if t == quant.Q4_0 || t == quant.Q8_0 {
			return 16
		}
		return 4
	}
	if t == quant.Q4_0 {
		return 8
	}
	return 4
}

var mvtWarpsEnv = os.Getenv("HYBRID_CUDA_MVT_WARPS")

// mvtFor returns the tensor-core batched mat-vec of type t for n activation
// rows (one tile of 16, or two); none where the type has none, n is under
// its mvtTypes minimum or over 32, or useMVT is off.
func (d *Device) mvtFor(t quant.Type, n int) kernel {
	tk := d.k.byType[t]
	if !useMVT || n > 32 || n < mvtTypes[t] || tk == nil {
		return kernel{}
	}
	k := [2]kernel{tk.mvt, tk.mvt2}
	switch mvtWarps(t) {
	case 8:
		k = [2]kernel{tk.mvtw, tk.mvtw2}
	case 16:
		k = [2]kernel{tk.mvtx, tk.mvtx2}
	}
	if n <= 16 {
		return k[0]
	}
	return k[1]
}

// runRope launches RoPE of q and k with the cache append, then attention:
// for one token, or for each row of a batched step.
func (d *Device) runRope(u unit) error {
	rq, rk, at := u.ops[0], u.ops[1], u.ops[2]
	c, err := d.kvFor(at.op)
	if err != nil {
		return err
	}
	n, rows := 1, uintptr(0)
	if at.st.Rows != nil {
		// Each row's position and first cell from d.rowPos; the whole
		// cache, as the attention op's rows see it.
		n, rows = len(at.st.Rows), uintptr(d.rowPos)
	} else {
		c = c.at(at.st.Base)
	}
	r := rq.op.Rope
	freqs, err := d.freqsOf(r) // the same for rk: matchRope checked the two ropes are Equal
	if err != nil {
		return err
	}
	qw, kw := rq.ins[0].n/n, rk.ins[0].n/n
	threads := qw/2 + kw
	a := d.args().ptr(uintptr(rq.ins[0].ptr)).ptr(uintptr(rk.ins[0].ptr)).ptr(uintptr(at.ins[2].ptr)).
		ptr(uintptr(rq.out.ptr)).ptr(uintptr(rk.out.ptr)).ptr(uintptr(c.k)).ptr(uintptr(c.v)).
		i32(qw).i32(kw).i32(r.HeadDim).i32(r.Dims).f32(ropeScale(r)).ptr(uintptr(d.tokens)).i32(b2i(r.Neox)).ptr(uintptr(freqs)).ptr(rows)
	if err := launch(d.k.ropeKV, (threads+255)/256, n, 256, a); err != nil {
		return err
	}
	if rows != 0 {
		d.stats.batchJoined++
		return d.attendAt(at.op, n, at.ins[0], at.out, c, rows)
	}
	return d.attend(at.op, 1, at.ins[0], at.out, c)
}

// ropeScale is the per-pair angle factor base^(-2/dims), rounded to f32 as
// the CPU device rounds it.
func ropeScale(r ops.RopeParams) float32 {
	return float32(math.Pow(float64(r.Base), float64(float32(-2)/float32(r.Dims))))
}
