package metal

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"hybrid/devices"
	"hybrid/ops"
	"hybrid/quant"
)

// The dispatch plan is what the darwin device encodes for an op: kernel
// names, buffer bindings by role, constant params, grid and threadgroup
// sizes. It is plain data and needs no Mac, so it is built and tested on
// every system; devices/metal/harness_test.go runs the same plans on the CPU
// with the kernels' own source.
//
// Every dispatch of a plan must run after the previous one has finished
// writing (a compute encoder's default serial dispatch type guarantees it).

// Role says which buffer an argument slot binds.
type Role uint8

// The buffers a dispatch binds.
const (
	RoleWeight Role = iota + 1 // the op's weight, as the GGUF file stores it (uploaded unchanged)
	RoleIn0                    // the op's f32 inputs
	RoleIn1
	RoleIn2
	RoleOut    // the op's f32 output
	RoleKCache // the Attention op's per-layer caches (see CacheBytes)
	RoleVCache
	RoleTokens // int32 token ids of the step (Embed), filled by the device before the dispatch
)

var roleNames = map[Role]string{
	RoleWeight: "weight", RoleIn0: "in0", RoleIn1: "in1", RoleIn2: "in2", RoleOut: "out",
	RoleKCache: "kcache", RoleVCache: "vcache", RoleTokens: "tokens",
}

// String names the role for errors and tests.
func (r Role) String() string {
	if s, ok := roleNames[r]; ok {
		return s
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// Binding is one buffer argument of a dispatch.
//
// Alignment the kernels rely on, for the buffer's start plus its device
// offset plus Offset: weights 4 bytes (F32 rows are read as floats; every
// other type as halves and bytes), the f32 activations of mat-muls 16 bytes
// (read as float4), everything else 4 bytes. Plans only produce Offsets that
// keep a buffer's alignment.
type Binding struct {
	Role   Role
	Offset int64 // bytes into that buffer
}

// Dispatch is one compute-kernel launch.
type Dispatch struct {
	Kernel  string    // MSL function name in Source
	Buffers []Binding // bound at [[buffer(0)]], [[buffer(1)]], ... in order
	// Params is the kernel's constant params struct, little-endian, bound
	// with setBytes at [[buffer(len(Buffers))]]; nil if none.
	Params  []byte
	Groups  [3]int // threadgroups per grid (dispatchThreadgroups)
	Threads [3]int // threads per threadgroup
	// Shared is the threadgroup memory in bytes at [[threadgroup(0)]]
	// (setThreadgroupMemoryLength:atIndex:0), a multiple of 16; 0 if none.
	Shared int
}

// The layout constants of the kernels, as kernels/common.h defines them
// (the harness test checks they agree).
const (
	mvNR    = 4  // MV_NR: weight rows per simdgroup of matvec
	mvNSG   = 2  // MV_NSG: simdgroups per threadgroup of matvec
	mmBM    = 64 // MM_BM: weight rows per matmul tile
	mmBN    = 32 // MM_BN: tokens per matmul tile
	mmBK    = 32 // MM_BK: columns of k per matmul step
	mmNSG   = 4  // MM_NSG: simdgroups per threadgroup of matmul
	attNSG  = 4  // ATT_NSG: simdgroups per threadgroup of attention
	attMaxT = 8  // ATT_MAXT: head features per lane, so head_dim ≤ 256
	// ropeMaxPairs is ROPE_MAX_PAIRS: the most frequency factors (rotated
	// pairs per head) ropeParams carries.
	ropeMaxPairs = 128

	simdWidth = 32
	// eltThreads is the threadgroup size of the element-wise kernels.
	eltThreads = 256
	// mvMaxRows is the most input rows MatMul runs as mat-vec; more use the
	// tiled matmul, whose tile is MM_BN tokens.
	mvMaxRows = 3
	// mmShared is matmul's threadgroup memory: the weight and activation tiles.
	mmShared = (mmBK*mmBM + mmBN*mmBK) * 4
)

// The params structs, field for field the structs of kernels/common.h
// (int32_t and float, little-endian, padded to 16 bytes).

// matParams is MatParams: matvec_<type>, matmul_<type>.
type matParams struct {
	M        int32 // weight rows = output columns
	K        int32 // weight columns = input columns
	N        int32 // input rows (tokens)
	RowBytes int32 // bytes of one weight row
}

// embedParams is EmbedParams: embed_<type>.
type embedParams struct {
	Cols     int32
	RowBytes int32
	Vocab    int32
	N        int32
}

// normParams is NormParams: rms_norm_<type>.
type normParams struct {
	Cols int32
	Rows int32
	Eps  float32
	Pad0 int32
}

// ropeParams is RopeParams: rope.
type ropeParams struct {
	Rows     int32 // tokens; row i is at position Pos+i
	Width    int32 // features per row
	HeadDim  int32
	Dims     int32 // rotated features per head
	Pos      int32
	Scale    float32 // base^(-2/dims)
	Neox     int32   // 1: pair j is features j, j+Dims/2; 0: 2j, 2j+1
	HasFreqs int32   // 1: pair j's angle is divided by Freqs[j]
	Freqs    [ropeMaxPairs]float32
}

// biasParams is BiasParams: add_bias_<type>.
type biasParams struct {
	N          int32 // elements of the input
	Cols       int32 // bias length
	Pad0, Pad1 int32
}

// attnParams is AttnParams: kv_store, attention.
type attnParams struct {
	Heads   int32
	KVHeads int32
	HeadDim int32
	Pos     int32 // position of the step's first token
	N       int32 // the step's tokens
	Ctx     int32 // cache length in positions
	Scale   float32
	Pad0    int32
}

// eltParams is EltParams: add_f32, silu_mul, copy_f32.
type eltParams struct {
	N                int32 // elements
	Pad0, Pad1, Pad2 int32
}

func encode(p any) []byte {
	b, err := binary.Append(nil, binary.LittleEndian, p)
	if err != nil {
		panic(fmt.Sprintf("metal: params %T: %v", p, err)) // a fixed-size struct: cannot happen
	}
	return b
}

// weightKernels maps the weight types the mat-mul and embedding kernels
// decode to their kernel-name suffix.
var weightKernels = map[quant.Type]string{
	quant.F32: "f32", quant.F16: "f16", quant.BF16: "bf16",
	quant.Q4_0: "q4_0", quant.Q4_1: "q4_1", quant.Q5_0: "q5_0", quant.Q5_1: "q5_1", quant.Q8_0: "q8_0",
	quant.Q4_K: "q4_k", quant.Q5_K: "q5_k", quant.Q6_K: "q6_k",
}

// normKernels are the types rms_norm reads its scale vector in, and
// add_bias its bias.
var normKernels = map[quant.Type]string{quant.F32: "f32", quant.F16: "f16", quant.BF16: "bf16"}

func typeList(m map[quant.Type]string) string {
	var names []string
	for _, t := range quant.SupportedTypes() {
		if _, ok := m[t]; ok {
			names = append(names, t.String())
		}
	}
	return strings.Join(names, ", ")
}

// CacheType is the element type of the K and V caches: binary16, as
// devices/cpu and llama.cpp keep them.
const CacheType = quant.F16

// CacheBytes is the size of each of the K and V cache buffers an Attention
// op needs (its whole context): Context × KVHeads × HeadDim halves. It is 0
// for other ops.
func CacheBytes(op *ops.Op) int64 {
	if op.Kind != ops.Attention {
		return 0
	}
	a := op.Attn
	return int64(a.Context) * int64(a.KVHeads) * int64(a.HeadDim) * 2
}

// Supports returns nil if the Metal kernels can run op, else an error naming
// the op and why (wrapping devices.ErrUnsupported).
func Supports(op *ops.Op) error {
	unsupported := func(format string, args ...any) error {
		return fmt.Errorf("metal: op %s: %s: %w", op, fmt.Sprintf(format, args...), devices.ErrUnsupported)
	}
	if op.Kind.NeedsWeight() && op.Weight == nil {
		return fmt.Errorf("metal: op %s has no weight", op)
	}
	switch op.Kind {
	case ops.MatMul, ops.Embed:
		w := op.Weight
		if _, ok := weightKernels[w.Type]; !ok {
			return unsupported("weight %s type %s (the kernels decode %s)", w.Name, w.Type, typeList(weightKernels))
		}
		if op.Kind == ops.MatMul && w.Cols%mmBK != 0 {
			return unsupported("weight %s has %d columns, not a multiple of %d", w.Name, w.Cols, mmBK)
		}
		if w.Cols%8 != 0 || w.Cols <= 0 || w.Rows <= 0 {
			return unsupported("weight %s is %d×%d; rows are decoded 8 elements at a time", w.Name, w.Rows, w.Cols)
		}
		if _, err := quant.RowBytes(w.Type, w.Cols); err != nil {
			return fmt.Errorf("metal: op %s: %w", op, err)
		}
	case ops.RMSNorm:
		if _, ok := normKernels[op.Weight.Type]; !ok {
			return unsupported("norm weight %s type %s (rms_norm reads %s)", op.Weight.Name, op.Weight.Type, typeList(normKernels))
		}
		if op.Weight.Rows != 1 || op.Weight.Cols <= 0 {
			return unsupported("norm weight %s is %d×%d, not one row", op.Weight.Name, op.Weight.Rows, op.Weight.Cols)
		}
		// PerHead needs nothing more: the plan runs the same kernel over
		// rows of one head (see PlanSized).
	case ops.AddBias:
		w := op.Weight
		if _, ok := normKernels[w.Type]; !ok {
			return unsupported("bias %s type %s (add_bias reads %s)", w.Name, w.Type, typeList(normKernels))
		}
		if w.Rows != 1 || w.Cols <= 0 {
			return unsupported("bias %s is %d×%d, not one row", w.Name, w.Rows, w.Cols)
		}
	case ops.RoPE:
		r := op.Rope
		if r.HeadDim <= 0 || r.HeadDim%2 != 0 || r.Dims <= 0 || r.Dims%2 != 0 || r.Dims > r.HeadDim {
			return unsupported("rope of %d of %d features per head", r.Dims, r.HeadDim)
		}
		if r.Freqs != nil && len(r.Freqs) != r.Dims/2 {
			return unsupported("%d frequency factors for %d rotated pairs", len(r.Freqs), r.Dims/2)
		}
		if r.Freqs != nil && len(r.Freqs) > ropeMaxPairs {
			// The factors travel in the params struct, which has room for
			// ropeMaxPairs.
			return unsupported("%d frequency factors; the kernel's params hold %d", len(r.Freqs), ropeMaxPairs)
		}
	case ops.Attention:
		a := op.Attn
		if a.Heads <= 0 || a.KVHeads <= 0 || a.Heads%a.KVHeads != 0 || a.HeadDim <= 0 || a.Context <= 0 {
			return unsupported("%d heads on %d KV heads of %d, context %d", a.Heads, a.KVHeads, a.HeadDim, a.Context)
		}
		if a.HeadDim > simdWidth*attMaxT {
			return unsupported("head size %d exceeds the kernel's %d", a.HeadDim, simdWidth*attMaxT)
		}
	case ops.SiLUMul, ops.Add, ops.LastRow:
	default:
		return unsupported("kind %s", op.Kind)
	}
	return nil
}

// Plan returns, in order, the dispatches that run op at step st; rows is the
// number of rows of the op's first input (len(st.Tokens) for Embed). It
// serves the ops whose input width the op itself determines (Embed, RMSNorm
// but a per-head one, MatMul, Attention, AddBias); Add, SiLUMul, LastRow,
// RoPE and per-head RMSNorm need the lengths of their buffers: use
// PlanSized, which serves every op.
func Plan(op *ops.Op, st ops.Step, rows int) ([]Dispatch, error) {
	if err := Supports(op); err != nil {
		return nil, err
	}
	if rows <= 0 {
		return nil, fmt.Errorf("metal: op %s: %d input rows", op, rows)
	}
	var in []int
	out := 0
	switch op.Kind {
	case ops.Embed:
		if rows != len(st.Tokens) {
			return nil, fmt.Errorf("metal: op %s: %d rows for %d tokens", op, rows, len(st.Tokens))
		}
		out = rows * op.Weight.Cols
	case ops.RMSNorm, ops.AddBias:
		if op.Kind == ops.RMSNorm && op.PerHead {
			return nil, fmt.Errorf("metal: op %s: a per-head norm does not say its input's width: plan it with PlanSized", op)
		}
		in = []int{rows * op.Weight.Cols}
		out = in[0]
	case ops.MatMul:
		in = []int{rows * op.Weight.Cols}
		out = rows * op.Weight.Rows
	case ops.Attention:
		a := op.Attn
		q, kv := rows*a.Heads*a.HeadDim, rows*a.KVHeads*a.HeadDim
		in = []int{q, kv, kv}
		out = q
	default:
		return nil, fmt.Errorf("metal: op %s: a %s op does not say its input's width: plan it with PlanSized", op, op.Kind)
	}
	return PlanSized(op, st, in, out)
}

// PlanSized returns, in order, the dispatches that run op at step st, given
// the lengths in f32 elements of the op's input buffers (in, one per op
// input) and of its output buffer, as the device holds them. It derives the
// row count the way devices/cpu does (len(st.Tokens) for Embed, RoPE and
// Attention; input length over weight columns for RMSNorm, whose rows are
// heads when it is per-head, MatMul and AddBias) and
// checks every length against the op, so that a wrong buffer is an error here
// rather than a read past its end on the GPU.
func PlanSized(op *ops.Op, st ops.Step, in []int, out int) ([]Dispatch, error) {
	if err := Supports(op); err != nil {
		return nil, err
	}
	want := op.Kind.Inputs()
	if len(in) != want {
		return nil, fmt.Errorf("metal: op %s: %d input buffers, want %d", op, len(in), want)
	}
	for i, n := range in {
		if n <= 0 || n > math.MaxInt32 {
			return nil, fmt.Errorf("metal: op %s: input %d has %d elements", op, i, n)
		}
	}
	if out <= 0 || out > math.MaxInt32 {
		return nil, fmt.Errorf("metal: op %s: output has %d elements", op, out)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("metal: op %s: %s", op, fmt.Sprintf(format, args...))
	}
	switch op.Kind {
	case ops.Embed:
		return planEmbed(op, st, out, bad)
	case ops.RMSNorm:
		cols := op.Weight.Cols
		if in[0]%cols != 0 || out != in[0] {
			return nil, bad("input of %d and output of %d do not fit rows of %d", in[0], out, cols)
		}
		return planNorm(op, in[0]/cols), nil
	case ops.AddBias:
		cols := op.Weight.Cols
		if in[0]%cols != 0 || out != in[0] {
			return nil, bad("input of %d and output of %d do not fit rows of %d", in[0], out, cols)
		}
		d := eltwise("add_bias_"+normKernels[op.Weight.Type], []Binding{{RoleIn0, 0}, {RoleWeight, 0}, {RoleOut, 0}}, out)
		d.Params = encode(biasParams{N: int32(out), Cols: int32(cols)})
		return []Dispatch{d}, nil
	case ops.MatMul:
		w := op.Weight
		if in[0]%w.Cols != 0 || out != in[0]/w.Cols*w.Rows {
			return nil, bad("input of %d and output of %d do not fit a %d×%d weight", in[0], out, w.Rows, w.Cols)
		}
		return planMatMul(op, in[0]/w.Cols)
	case ops.RoPE:
		n := len(st.Tokens)
		if n == 0 || in[0]%n != 0 || in[0]/n%op.Rope.HeadDim != 0 || out != in[0] {
			return nil, bad("input of %d and output of %d are not %d rows of heads of %d", in[0], out, n, op.Rope.HeadDim)
		}
		return planRoPE(op, st, n, in[0]/n), nil
	case ops.Attention:
		return planAttention(op, st, in, out, bad)
	case ops.SiLUMul, ops.Add:
		if in[1] != in[0] || out != in[0] {
			return nil, bad("operands of %d and %d elements into an output of %d", in[0], in[1], out)
		}
		kernel := "add_f32"
		if op.Kind == ops.SiLUMul {
			kernel = "silu_mul"
		}
		return []Dispatch{eltwise(kernel, []Binding{{RoleIn0, 0}, {RoleIn1, 0}, {RoleOut, 0}}, out)}, nil
	case ops.LastRow:
		if in[0]%out != 0 {
			return nil, bad("input of %d elements is not rows of %d", in[0], out)
		}
		off := int64(in[0]-out) * 4
		return []Dispatch{eltwise("copy_f32", []Binding{{RoleIn0, off}, {RoleOut, 0}}, out)}, nil
	}
	return nil, bad("no plan for kind %s", op.Kind)
}

func groups(n, per int) int { return (n + per - 1) / per }

func roundUp(n, m int) int { return groups(n, m) * m }

func eltwise(kernel string, b []Binding, n int) Dispatch {
	return Dispatch{
		Kernel:  kernel,
		Buffers: b,
		Params:  encode(eltParams{N: int32(n)}),
		Groups:  [3]int{groups(n, eltThreads), 1, 1},
		Threads: [3]int{eltThreads, 1, 1},
	}
}

func planEmbed(op *ops.Op, st ops.Step, out int, bad func(string, ...any) error) ([]Dispatch, error) {
	w := op.Weight
	n := len(st.Tokens)
	if n == 0 || out != n*w.Cols {
		return nil, bad("%d tokens of %d into an output of %d", n, w.Cols, out)
	}
	for _, t := range st.Tokens {
		if t < 0 || int(t) >= w.Rows {
			return nil, bad("token id %d is outside the vocabulary of %d", t, w.Rows)
		}
	}
	rb, _ := quant.RowBytes(w.Type, w.Cols) // checked by Supports
	if int64(rb) > math.MaxInt32 {
		return nil, bad("rows of %d bytes", rb)
	}
	return []Dispatch{{
		Kernel:  "embed_" + weightKernels[w.Type],
		Buffers: []Binding{{RoleWeight, 0}, {RoleTokens, 0}, {RoleOut, 0}},
		Params:  encode(embedParams{Cols: int32(w.Cols), RowBytes: int32(rb), Vocab: int32(w.Rows), N: int32(n)}),
		Groups:  [3]int{n, 1, 1},
		Threads: [3]int{min(256, roundUp(w.Cols/8, simdWidth)), 1, 1},
	}}, nil
}

func planNorm(op *ops.Op, rows int) []Dispatch {
	cols := op.Weight.Cols
	threads := min(256, roundUp(cols, simdWidth))
	return []Dispatch{{
		Kernel:  "rms_norm_" + normKernels[op.Weight.Type],
		Buffers: []Binding{{RoleIn0, 0}, {RoleWeight, 0}, {RoleOut, 0}},
		Params:  encode(normParams{Cols: int32(cols), Rows: int32(rows), Eps: op.Eps}),
		Groups:  [3]int{rows, 1, 1},
		Threads: [3]int{threads, 1, 1},
		Shared:  roundUp(threads/simdWidth*4, 16),
	}}
}

func planMatMul(op *ops.Op, n int) ([]Dispatch, error) {
	w := op.Weight
	rb, _ := quant.RowBytes(w.Type, w.Cols) // checked by Supports
	if int64(rb) > math.MaxInt32 || int64(w.Rows) > math.MaxInt32 {
		return nil, fmt.Errorf("metal: op %s: weight of %d rows of %d bytes is too large", op, w.Rows, rb)
	}
	p := encode(matParams{M: int32(w.Rows), K: int32(w.Cols), N: int32(n), RowBytes: int32(rb)})
	b := []Binding{{RoleWeight, 0}, {RoleIn0, 0}, {RoleOut, 0}}
	name := weightKernels[w.Type]
	if n <= mvMaxRows {
		return []Dispatch{{
			Kernel:  "matvec_" + name,
			Buffers: b,
			Params:  p,
			Groups:  [3]int{groups(w.Rows, mvNR*mvNSG), n, 1},
			Threads: [3]int{simdWidth * mvNSG, 1, 1},
		}}, nil
	}
	return []Dispatch{{
		Kernel:  "matmul_" + name,
		Buffers: b,
		Params:  p,
		Groups:  [3]int{groups(w.Rows, mmBM), groups(n, mmBN), 1},
		Threads: [3]int{simdWidth * mmNSG, 1, 1},
		Shared:  mmShared,
	}}, nil
}

func planRoPE(op *ops.Op, st ops.Step, rows, width int) []Dispatch {
	r := op.Rope
	// base^(-2/dims) exactly as devices/cpu computes it, so that both step
	// θ from the same f32 value.
	scale := float32(math.Pow(float64(r.Base), float64(float32(-2)/float32(r.Dims))))
	total := rows * width / 2
	p := ropeParams{Rows: int32(rows), Width: int32(width), HeadDim: int32(r.HeadDim), Dims: int32(r.Dims),
		Pos: int32(st.Pos), Scale: scale}
	if r.Neox {
		p.Neox = 1
	}
	if r.Freqs != nil {
		p.HasFreqs = 1
		copy(p.Freqs[:], r.Freqs) // len checked by Supports
	}
	return []Dispatch{{
		Kernel:  "rope",
		Buffers: []Binding{{RoleIn0, 0}, {RoleOut, 0}},
		Params:  encode(p),
		Groups:  [3]int{groups(total, eltThreads), 1, 1},
		Threads: [3]int{eltThreads, 1, 1},
	}}
}

func planAttention(op *ops.Op, st ops.Step, in []int, out int, bad func(string, ...any) error) ([]Dispatch, error) {
	a := op.Attn
	n := len(st.Tokens)
	if n == 0 || st.Pos < 0 || st.Pos+n > a.Context {
		return nil, bad("positions %d..%d exceed the context of %d", st.Pos, st.Pos+n-1, a.Context)
	}
	dim := a.KVHeads * a.HeadDim
	q := n * a.Heads * a.HeadDim
	if in[0] != q || in[1] != n*dim || in[2] != n*dim || out != q {
		return nil, bad("q, k, v, out of %d, %d, %d, %d elements do not fit %d tokens of %d heads on %d KV heads of %d",
			in[0], in[1], in[2], out, n, a.Heads, a.KVHeads, a.HeadDim)
	}
	if CacheBytes(op)/2 > math.MaxInt32 {
		return nil, bad("a cache of %d bytes is too large", CacheBytes(op))
	}
	p := encode(attnParams{
		Heads: int32(a.Heads), KVHeads: int32(a.KVHeads), HeadDim: int32(a.HeadDim),
		Pos: int32(st.Pos), N: int32(n), Ctx: int32(a.Context),
		Scale: 1 / float32(math.Sqrt(float64(a.HeadDim))), // 1.0f/sqrtf(head_dim), as devices/cpu
	})
	return []Dispatch{
		{
			Kernel:  "kv_store",
			Buffers: []Binding{{RoleIn1, 0}, {RoleIn2, 0}, {RoleKCache, 0}, {RoleVCache, 0}},
			Params:  p,
			Groups:  [3]int{groups(n*dim, eltThreads), 1, 1},
			Threads: [3]int{eltThreads, 1, 1},
		},
		{
			Kernel:  "attention",
			Buffers: []Binding{{RoleIn0, 0}, {RoleKCache, 0}, {RoleVCache, 0}, {RoleOut, 0}},
			Params:  p,
			Groups:  [3]int{a.Heads, n, 1},
			Threads: [3]int{simdWidth * attNSG, 1, 1},
			Shared:  roundUp((2*attNSG+attNSG*a.HeadDim)*4, 16),
		},
	}, nil
}
