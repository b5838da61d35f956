// Package ops defines the op graph of one forward step of a model: the op kinds,
// the f32 values they read and write, the weights they use, and the work each op
// does (FLOPs and bytes moved). Ops know nothing of devices: a device dispatches on
// Op.Kind, and the planner reads Op.Cost.
package ops

import (
	"fmt"

	"hybrid/quant"
)

// Kind is the kind of an op.
type Kind uint8

// The op kinds of a Llama-family forward step. Activations are f32 matrices of
// Rows tokens × Cols features, row-major.
const (
	// Embed gathers the rows of the token-embedding table (Weight) for the step's
	// tokens: out [n, d]. It has no value inputs.
	Embed Kind = iota + 1
	// RMSNorm normalises each row of In[0] by its root mean square and multiplies
	// by Weight (a [d] vector): out [n, d].
	RMSNorm
	// MatMul multiplies each row of In[0] [n, k] by the transposed weight matrix
	// (Weight: m rows of k elements, in any quant type): out [n, m].
	MatMul
	// RoPE rotates adjacent pairs of each head's features of In[0] by the token's
	// position (llama.cpp's "normal" rope mode): out has In[0]'s shape.
	RoPE
	// Attention appends In[1] (keys) and In[2] (values) to the layer's KV cache at
	// the step's positions and computes causal, grouped-query softmax attention of
	// the queries In[0] over the cache: out [n, heads*headDim].
	Attention
	// SiLUMul computes silu(In[0]) * In[1] element-wise (the gated FFN).
	SiLUMul
	// Add adds In[0] and In[1] element-wise (the residual connections).
	Add
	// LastRow takes the last row of In[0]: out [1, d]. Prefill computes logits for
	// the last token only.
	LastRow
)

var kindNames = map[Kind]string{
	Embed: "embed", RMSNorm: "rms_norm", MatMul: "mat_mul", RoPE: "rope",
	Attention: "attention", SiLUMul: "silu_mul", Add: "add", LastRow: "last_row",
}

// String returns the kind's name as policies and tables spell it.
func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Kinds lists every op kind in order.
func Kinds() []Kind {
	return []Kind{Embed, RMSNorm, MatMul, RoPE, Attention, SiLUMul, Add, LastRow}
}

// ParseKind returns the kind named s.
func ParseKind(s string) (Kind, error) {
	for k, n := range kindNames {
		if n == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("ops: unknown op kind %q", s)
}

// Weight is a model tensor an op reads, in the quantized form the file stores.
// Rows × Cols is the matrix shape as the op uses it: for a GGUF tensor with dims
// [ne0, ne1], Cols = ne0 (the contiguous row) and Rows = ne1.
type Weight struct {
	Name string
	Type quant.Type
	Rows int
	Cols int
}

// Bytes is the weight's size at rest.
func (w *Weight) Bytes() int64 {
	rb, err := quant.RowBytes(w.Type, w.Cols)
	if err != nil {
		return 0
	}
	return int64(rb) * int64(w.Rows)
}

// RopeParams configures a RoPE op.
type RopeParams struct {
	HeadDim int     // features per head
	Dims    int     // rotated features per head (≤ HeadDim)
	Base    float32 // frequency base θ
}

// AttnParams configures an Attention op.
type AttnParams struct {
	Heads   int // query heads
	KVHeads int // key/value heads (grouped-query when < Heads)
	HeadDim int
	Context int // KV cache length in positions
}

// Op is one node of the graph.
type Op struct {
	ID     int
	Kind   Kind
	Name   string // e.g. "blk.3.attn_q"
	Layer  int    // block index, or -1 outside the blocks
	In     []int  // value ids read
	Out    int    // value id written
	Weight *Weight
	Eps    float32 // RMSNorm epsilon
	Rope   RopeParams
	Attn   AttnParams
	Cost   Cost
}

// String names the op for errors and tables.
func (o *Op) String() string { return fmt.Sprintf("%s (%s)", o.Name, o.Kind) }

// Cost is the work an op does in one step.
type Cost struct {
	FLOPs        int64
	BytesRead    int64 // weights, inputs and cache read
	BytesWritten int64 // outputs and cache written
}

// Value is an f32 activation matrix produced by one op.
type Value struct {
	ID   int
	Name string
	Rows int // tokens
	Cols int // features
}

// Elems is the number of f32 elements the value holds.
func (v *Value) Elems() int { return v.Rows * v.Cols }

// Bytes is the value's size in f32.
func (v *Value) Bytes() int64 { return 4 * int64(v.Elems()) }

// Graph is the op graph of one forward step of Tokens tokens that start at
// position Past; Ops are in topological order. Output is the value holding the
// logits.
type Graph struct {
	Tokens int
	Past   int
	Ops    []*Op
	Values []*Value
	Output int
}

// Step is what changes between runs of the same graph shape: the tokens and the
// position of the first one.
type Step struct {
	Tokens []int32
	Pos    int
}

// Validate checks the graph's structure: ids in range, inputs produced before
// they are read, and shapes consistent with each op's kind.
func (g *Graph) Validate() error {
	produced := make([]bool, len(g.Values))
	for i, op := range g.Ops {
		if op.ID != i {
			return fmt.Errorf("ops: op %d has id %d", i, op.ID)
		}
		for _, in := range op.In {
			if in < 0 || in >= len(g.Values) || !produced[in] {
				return fmt.Errorf("ops: %s reads value %d before it is produced", op, in)
			}
		}
		if op.Out < 0 || op.Out >= len(g.Values) || produced[op.Out] {
			return fmt.Errorf("ops: %s writes value %d twice or out of range", op, op.Out)
		}
		if err := g.checkShapes(op); err != nil {
			return err
		}
		produced[op.Out] = true
	}
	return nil
}

func (g *Graph) checkShapes(op *Op) error {
	out := g.Values[op.Out]
	in := func(i int) *Value { return g.Values[op.In[i]] }
	want := map[Kind]int{Embed: 0, RMSNorm: 1, MatMul: 1, RoPE: 1, Attention: 3, SiLUMul: 2, Add: 2, LastRow: 1}[op.Kind]
	if len(op.In) != want {
		return fmt.Errorf("ops: %s has %d inputs, want %d", op, len(op.In), want)
	}
	bad := func(what string) error { return fmt.Errorf("ops: %s: %s", op, what) }
	switch op.Kind {
	case Embed:
		if op.Weight == nil || out.Cols != op.Weight.Cols {
			return bad("embedding width does not match its table")
		}
	case RMSNorm:
		if op.Weight == nil || op.Weight.Cols != in(0).Cols || out.Rows != in(0).Rows || out.Cols != in(0).Cols {
			return bad("norm weight or output shape does not match input")
		}
	case MatMul:
		if op.Weight == nil || op.Weight.Cols != in(0).Cols || out.Rows != in(0).Rows || out.Cols != op.Weight.Rows {
			return bad(fmt.Sprintf("[%d,%d] × weight %d×%d → [%d,%d] does not fit", in(0).Rows, in(0).Cols, op.Weight.Rows, op.Weight.Cols, out.Rows, out.Cols))
		}
	case RoPE:
		r := op.Rope
		if r.HeadDim <= 0 || r.Dims <= 0 || r.Dims > r.HeadDim || r.Dims%2 != 0 || in(0).Cols%r.HeadDim != 0 || *out != (Value{ID: out.ID, Name: out.Name, Rows: in(0).Rows, Cols: in(0).Cols}) {
			return bad("rope dimensions do not fit the input")
		}
	case Attention:
		a := op.Attn
		if a.Heads <= 0 || a.KVHeads <= 0 || a.Heads%a.KVHeads != 0 || a.HeadDim <= 0 ||
			in(0).Cols != a.Heads*a.HeadDim || in(1).Cols != a.KVHeads*a.HeadDim || in(2).Cols != a.KVHeads*a.HeadDim ||
			in(1).Rows != in(0).Rows || in(2).Rows != in(0).Rows || out.Cols != in(0).Cols || out.Rows != in(0).Rows {
			return bad("head counts do not fit q, k, v")
		}
	case SiLUMul, Add:
		if in(0).Rows != in(1).Rows || in(0).Cols != in(1).Cols || out.Rows != in(0).Rows || out.Cols != in(0).Cols {
			return bad("operand shapes differ")
		}
	case LastRow:
		if out.Rows != 1 || out.Cols != in(0).Cols {
			return bad("output is not one row of the input")
		}
	default:
		return bad("unknown kind")
	}
	return nil
}
