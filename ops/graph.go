package ops

import (
	"fmt"
	"math"

	"hybrid/quant"
)

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
	// Freqs, when not nil, holds Dims/2 frequency factors, one per rotated
	// pair: the pair's angle is divided by its factor (llama.cpp's
	// freq_factors, which Llama 3.1+ files carry as rope_freqs.weight to
	// express their "llama3" rope scaling). Shared by every RoPE op of a
	// graph and never written.
	Freqs []float32
	// Neox pairs feature j of a head with feature j+Dims/2 instead of j+1
	// (llama.cpp's LLAMA_ROPE_TYPE_NEOX, used by Qwen2 and Qwen3). The
	// angles are the same: pair j turns by pos·base^(-2j/Dims).
	Neox bool
}

// Equal reports whether r and o rotate alike (RopeParams holds a slice,
// so == does not compile on it).
func (r RopeParams) Equal(o RopeParams) bool {
	if r.HeadDim != o.HeadDim || r.Dims != o.Dims || r.Base != o.Base || r.Neox != o.Neox || len(r.Freqs) != len(o.Freqs) || (r.Freqs == nil) != (o.Freqs == nil) {
		return false
	}
	for i, f := range r.Freqs {
		if math.Float32bits(f) != math.Float32bits(o.Freqs[i]) {
			return false
		}
	}
	return true
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
	// PerHead makes an RMSNorm normalise each head (Weight.Cols features)
	// of a row on its own.
	PerHead bool
	Rope    RopeParams
	Attn    AttnParams
	Cost    Cost
}

// String names the op for errors and tables.
func (o *Op) String() string { return fmt.Sprintf("%s (%s)", o.Name, o.Kind) }

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
