// Package ops defines the op graph of one forward step of a model: the op kinds,
// the f32 values they read and write, the weights they use, and the work each op
// does (FLOPs and bytes moved). Ops know nothing of devices: a device dispatches on
// Op.Kind, and the planner reads Op.Cost.
//
// Everything ops knows about a kind (its name, how many inputs it reads, whether
// it needs a weight, the shapes it accepts and what it costs) sits in one table
// in this file, so adding a kind is one row here and one case per device.
package ops

import "fmt"

// Kind is the kind of an op.
type Kind uint8

// The op kinds of a Llama-family forward step. Activations are f32 matrices of
// Rows tokens × Cols features, row-major.
const (
	// Embed gathers the rows of the token-embedding table (Weight) for the step's
	// tokens: out [n, d]. It has no value inputs.
	Embed Kind = iota + 1
	// RMSNorm normalises each row of In[0] by its root mean square and multiplies
	// by Weight (a [d] vector): out [n, d]. With Op.PerHead set, each head of a
	// row (Weight.Cols features, which divide the row) is normalised on its own
	// and multiplied by the same weight (Qwen3's norms of Q and K).
	RMSNorm
	// MatMul multiplies each row of In[0] [n, k] by the transposed weight matrix
	// (Weight: m rows of k elements, in any quant type): out [n, m].
	MatMul
	// RoPE rotates pairs of each head's features of In[0] by the token's
	// position: adjacent pairs (llama.cpp's "normal" rope mode), or with
	// Rope.Neox set, feature j with feature j+Dims/2 (its NEOX mode, which
	// Qwen models use): out has In[0]'s shape.
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
	// AddBias adds Weight (a [d] vector) to every row of In[0] [n, d]: the
	// biases of Qwen2's Q, K and V projections. out has In[0]'s shape.
	AddBias
)

// kindInfo is what ops knows of one kind.
type kindInfo struct {
	name   string // as policies and tables spell it
	inputs int    // value inputs, len(Op.In)
	weight bool   // whether Op.Weight must be set
	// check reports why op's shapes do not fit its kind, given that it has
	// the right number of inputs and, where needed, a weight.
	check func(op *Op, in []*Value, out *Value) error
	// cost is the work op does in a graph that validates.
	cost func(g *Graph, op *Op) Cost
}

// kinds is indexed by Kind; the zero row (no name) is no kind. Each row is
// name, inputs, weight, check, cost.
var kinds = [...]kindInfo{
	Embed:     {"embed", 0, true, checkEmbed, costEmbed},
	RMSNorm:   {"rms_norm", 1, true, checkRMSNorm, costRMSNorm},
	MatMul:    {"mat_mul", 1, true, checkMatMul, costMatMul},
	RoPE:      {"rope", 1, false, checkRoPE, costRoPE},
	Attention: {"attention", 3, false, checkAttention, costAttention},
	SiLUMul:   {"silu_mul", 2, false, checkElementwise, costSiLUMul},
	Add:       {"add", 2, false, checkElementwise, costAdd},
	LastRow:   {"last_row", 1, false, checkLastRow, costLastRow},
	AddBias:   {"add_bias", 1, true, checkAddBias, costAddBias},
}

// info returns k's row of the table, or nil if k is no kind.
func (k Kind) info() *kindInfo {
	if int(k) < len(kinds) && kinds[k].name != "" {
		return &kinds[k]
	}
	return nil
}

// Known reports whether k is one of the kinds Kinds lists.
func (k Kind) Known() bool { return k.info() != nil }

// String returns the kind's name as policies and tables spell it.
func (k Kind) String() string {
	if i := k.info(); i != nil {
		return i.name
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Inputs is the number of values an op of kind k reads (len(Op.In)), or -1 if
// k is no kind, so that no input count matches it.
func (k Kind) Inputs() int {
	if i := k.info(); i != nil {
		return i.inputs
	}
	return -1
}

// NeedsWeight reports whether an op of kind k reads a weight (Op.Weight).
func (k Kind) NeedsWeight() bool {
	i := k.info()
	return i != nil && i.weight
}

// Kinds lists every op kind in order.
func Kinds() []Kind {
	var ks []Kind
	for k := range kinds {
		if Kind(k).Known() {
			ks = append(ks, Kind(k))
		}
	}
	return ks
}

// ParseKind returns the kind named s.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds() {
		if k.String() == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("ops: unknown op kind %q", s)
}
