package llama

import (
	"fmt"

	"hybrid/ops"
	"hybrid/quant"
)

// Build emits the op graph of one forward step of n tokens that start at position
// past, with a KV cache of ctx positions. types gives each weight's stored type.
// The graph ends in the logits of the last token.
func Build(c Config, types map[string]quant.Type, n, past, ctx int) (*ops.Graph, error) {
	return build(c, types, n, past, ctx, false)
}

// BuildRows emits the graph of a batched step: n tokens, each of its own
// sequence (ops.Step.Rows), in a KV cache of ctx cells. Every row runs the
// whole model and the graph ends in the logits of every row, n × vocab.
func BuildRows(c Config, types map[string]quant.Type, n, ctx int) (*ops.Graph, error) {
	return build(c, types, n, 0, ctx, true)
}

func build(c Config, types map[string]quant.Type, n, past, ctx int, allRows bool) (*ops.Graph, error) {
	if n <= 0 {
		return nil, fmt.Errorf("llama: a step needs at least one token")
	}
	if past < 0 || past+n > ctx {
		return nil, fmt.Errorf("llama: positions %d..%d do not fit the context of %d", past, past+n-1, ctx)
	}
	if c.HasRopeFreqs && len(c.RopeFreqs) != c.RopeDims/2 {
		// FromFile reads the factors; a config without them would rotate
		// as if the file had none.
		return nil, fmt.Errorf("llama: the model has %s but the config holds %d of its %d factors", RopeFreqsTensor, len(c.RopeFreqs), c.RopeDims/2)
	}
	b := &builder{g: &ops.Graph{Tokens: n, Past: past}, c: c, types: types}
	shapes := map[string]WeightShape{}
	for _, w := range c.Weights() {
		shapes[w.Name] = w
	}
	b.shapes = shapes

	kv, qd := c.KVHeads*c.HeadDim, c.QDim()
	var freqs []float32
	if c.HasRopeFreqs {
		freqs = c.RopeFreqs
	}
	x := b.op(ops.Embed, "token_embd", -1, nil, n, c.Dim, "token_embd.weight", nil)
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		h := b.op(ops.RMSNorm, p+"attn_norm", l, []int{x}, n, c.Dim, p+"attn_norm.weight", nil)
		q := b.mm(p+"attn_q", l, h, n, qd)
		k := b.mm(p+"attn_k", l, h, n, kv)
		v := b.mm(p+"attn_v", l, h, n, kv)
		if c.QKNorm {
			perHead := func(o *ops.Op) { o.PerHead = true }
			q = b.op(ops.RMSNorm, p+"attn_q_norm", l, []int{q}, n, qd, p+"attn_q_norm.weight", perHead)
			k = b.op(ops.RMSNorm, p+"attn_k_norm", l, []int{k}, n, kv, p+"attn_k_norm.weight", perHead)
		}
		rope := func(o *ops.Op) {
			o.Rope = ops.RopeParams{HeadDim: c.HeadDim, Dims: c.RopeDims, Base: c.RopeBase, Freqs: freqs, Neox: c.RopeNeox}
		}
		q = b.op(ops.RoPE, p+"rope_q", l, []int{q}, n, qd, "", rope)
		k = b.op(ops.RoPE, p+"rope_k", l, []int{k}, n, kv, "", rope)
		a := b.op(ops.Attention, p+"attn", l, []int{q, k, v}, n, qd, "", func(o *ops.Op) {
			o.Attn = ops.AttnParams{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, Context: ctx}
		})
		o := b.mm(p+"attn_output", l, a, n, c.Dim)
		rows := n
		if l == c.Layers-1 && n > 1 && !allRows {
			// Only the last token's logits are wanted, so the rest of the
			// last block runs on its row alone, as llama.cpp does (which
			// also makes its mat-muls decode-shaped there).
			o = b.op(ops.LastRow, "last_token", l, []int{o}, 1, c.Dim, "", nil)
			x = b.op(ops.LastRow, "last_token_residual", l, []int{x}, 1, c.Dim, "", nil)
			rows = 1
		}
		x = b.op(ops.Add, p+"attn_residual", l, []int{x, o}, rows, c.Dim, "", nil)
		h = b.op(ops.RMSNorm, p+"ffn_norm", l, []int{x}, rows, c.Dim, p+"ffn_norm.weight", nil)
		gate := b.mm(p+"ffn_gate", l, h, rows, c.FFN)
		up := b.mm(p+"ffn_up", l, h, rows, c.FFN)
		s := b.op(ops.SiLUMul, p+"ffn_silu_mul", l, []int{gate, up}, rows, c.FFN, "", nil)
		d := b.mm(p+"ffn_down", l, s, rows, c.Dim)
		x = b.op(ops.Add, p+"ffn_residual", l, []int{x, d}, rows, c.Dim, "", nil)
	}
	out := 1
	if allRows {
		out = n
	}
	x = b.op(ops.RMSNorm, "output_norm", -1, []int{x}, out, c.Dim, "output_norm.weight", nil)
	b.g.Output = b.op(ops.MatMul, "output", -1, []int{x}, out, c.Vocab, c.OutputWeight(), nil)
	if b.err != nil {
		return nil, b.err
	}
	if err := b.g.Validate(); err != nil {
		return nil, err
	}
	for _, op := range b.g.Ops {
		op.Cost = ops.CostOf(b.g, op)
	}
	return b.g, nil
}

type builder struct {
	g      *ops.Graph
	c      Config
	types  map[string]quant.Type
	shapes map[string]WeightShape
	err    error
}

// mm appends the projection by weight name+".weight" of value in, and the
// add of its bias where the model has one; it returns the value id.
func (b *builder) mm(name string, layer, in, rows, cols int) int {
	w := name + ".weight"
	x := b.op(ops.MatMul, name, layer, []int{in}, rows, cols, w, nil)
	if b.c.HasBias(w) {
		x = b.op(ops.AddBias, name+"_bias", layer, []int{x}, rows, cols, BiasOf(w), nil)
	}
	return x
}

// op appends an op that writes a new [rows, cols] value and returns the value id.
func (b *builder) op(kind ops.Kind, name string, layer int, in []int, rows, cols int, weight string, set func(*ops.Op)) int {
	g := b.g
	v := &ops.Value{ID: len(g.Values), Name: name, Rows: rows, Cols: cols}
	g.Values = append(g.Values, v)
	o := &ops.Op{ID: len(g.Ops), Kind: kind, Name: name, Layer: layer, In: in, Out: v.ID}
	if kind == ops.RMSNorm {
		o.Eps = b.c.Eps
	}
	if weight != "" {
		s, ok := b.shapes[weight]
		t, tok := b.types[weight]
		if !ok || !tok {
			if b.err == nil {
				b.err = fmt.Errorf("llama: op %s needs tensor %s, which the model lacks", name, weight)
			}
		}
		o.Weight = &ops.Weight{Name: weight, Type: t, Rows: s.Rows, Cols: s.Cols}
	}
	if set != nil {
		set(o)
	}
	g.Ops = append(g.Ops, o)
	return v.ID
}
