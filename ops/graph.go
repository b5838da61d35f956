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

// Producers returns, for every value, the ID of the op that writes it (0
// for a value no op writes).
func (g *Graph) Producers() []int {
	p := make([]int, len(g.Values))
	for _, op := range g.Ops {
		p[op.Out] = op.ID
	}
	return p
}

// Step is what changes between runs of the same graph shape: the tokens and the
// position of the first one.
//
// Several sequences (a server's slots) share one KV cache of
// AttnParams.Context cells, each a range of cells of its own: Base is the
// first cell of the step's sequence, and token i sits at position Pos+i
// (its rotation) in cell Base+Pos+i. With Rows set, the step is a batch of
// len(Tokens) sequences decoding one token each: Tokens[i] sits at position
// Rows[i].Pos of the sequence whose cells start at Rows[i].Base, and Pos and
// Base are unused. A device that cannot run such steps says so in
// devices.Info.Sequences.
//
// Chained marks a sequence's one-token step whose token is the greedy pick
// of its step before, which the device kept where its next step reads its
// token and position (devices.Chainer): the host has not read it yet, and
// Tokens holds a stand-in in the vocabulary that the device does not read.
type Step struct {
	Tokens  []int32
	Pos     int
	Base    int
	Rows    []Row
	Chained bool
}

// Row is one token of a batched step: its position in its sequence, and the
// first KV cache cell of that sequence.
type Row struct {
	Pos, Base int
}

// PosOf is token i's position in its sequence.
func (s Step) PosOf(i int) int {
	if s.Rows != nil {
		return s.Rows[i].Pos
	}
	return s.Pos + i
}

// CellOf is the KV cache cell of token i.
func (s Step) CellOf(i int) int {
	if s.Rows != nil {
		return s.Rows[i].Base + s.Rows[i].Pos
	}
	return s.Base + s.Pos + i
}

// Multi reports whether the step uses the cells of a sequence other than
// the first, or several sequences: what a device without
// devices.Info.Sequences refuses.
func (s Step) Multi() bool { return s.Rows != nil || s.Base != 0 }

// CheckCells checks that every token's cell lies in a cache of ctx cells
// and its position in its sequence's cells.
func (s Step) CheckCells(ctx int) error {
	if s.Rows != nil && len(s.Rows) != len(s.Tokens) {
		return fmt.Errorf("ops: a batched step of %d tokens has %d rows", len(s.Tokens), len(s.Rows))
	}
	for i := range s.Tokens {
		base, pos := s.Base, s.Pos+i
		if s.Rows != nil {
			base, pos = s.Rows[i].Base, s.Rows[i].Pos
		}
		if base < 0 || pos < 0 || base+pos >= ctx {
			return fmt.Errorf("ops: token %d at position %d of the sequence at cell %d is outside the cache of %d cells", i, pos, base, ctx)
		}
	}
	return nil
}
