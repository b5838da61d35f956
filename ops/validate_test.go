package ops

import (
	"fmt"
	"strings"
	"testing"

	"hybrid/quant"
)

// testGraph returns a small valid graph with one op of every kind: two tokens
// at position 3, width 8, two heads of 4 on one KV head.
//
//	0 emb  = embed                 [2,8]
//	1 norm = rms_norm(emb)         [2,8]
//	2 q    = mat_mul(norm)         [2,8]
//	3 k    = mat_mul(norm)         [2,4]
//	4 v    = mat_mul(norm)         [2,4]
//	5 rq   = rope(q)               [2,8]
//	6 rk   = rope(k)               [2,4]
//	7 attn = attention(rq, rk, v)  [2,8]
//	8 gate = silu_mul(q, attn)     [2,8]
//	9 res  = add(emb, gate)        [2,8]
//	10 last = last_row(res)        [1,8]
func testGraph() *Graph {
	g := &Graph{Tokens: 2, Past: 3}
	w := func(name string, t quant.Type, rows, cols int) *Weight {
		return &Weight{Name: name, Type: t, Rows: rows, Cols: cols}
	}
	rope := RopeParams{HeadDim: 4, Dims: 4, Base: 1e4}
	for _, o := range []struct {
		op   Op
		rows int
		cols int
	}{
		{Op{Kind: Embed, Name: "emb", Weight: w("token_embd", quant.F16, 10, 8)}, 2, 8},
		{Op{Kind: RMSNorm, Name: "norm", In: []int{0}, Weight: w("norm", quant.F32, 1, 8), Eps: 1e-5}, 2, 8},
		{Op{Kind: MatMul, Name: "q", In: []int{1}, Weight: w("wq", quant.F16, 8, 8)}, 2, 8},
		{Op{Kind: MatMul, Name: "k", In: []int{1}, Weight: w("wk", quant.F16, 4, 8)}, 2, 4},
		{Op{Kind: MatMul, Name: "v", In: []int{1}, Weight: w("wv", quant.F16, 4, 8)}, 2, 4},
		{Op{Kind: RoPE, Name: "rq", In: []int{2}, Rope: rope}, 2, 8},
		{Op{Kind: RoPE, Name: "rk", In: []int{3}, Rope: rope}, 2, 4},
		{Op{Kind: Attention, Name: "attn", In: []int{5, 6, 4}, Attn: AttnParams{Heads: 2, KVHeads: 1, HeadDim: 4, Context: 16}}, 2, 8},
		{Op{Kind: SiLUMul, Name: "gate", In: []int{2, 7}}, 2, 8},
		{Op{Kind: Add, Name: "res", In: []int{0, 8}}, 2, 8},
		{Op{Kind: LastRow, Name: "last", In: []int{9}}, 1, 8},
		{Op{Kind: AddBias, Name: "bias", In: []int{10}, Weight: w("bias", quant.F32, 1, 8)}, 1, 8},
	} {
		op := o.op
		op.ID, op.Out, op.Layer = len(g.Ops), len(g.Values), 0
		g.Ops = append(g.Ops, &op)
		g.Values = append(g.Values, &Value{ID: op.Out, Name: op.Name, Rows: o.rows, Cols: o.cols})
	}
	g.Output = len(g.Values) - 1
	return g
}

// shape is a value's [rows, cols].
type shape [2]int

// alone returns a graph in which embed ops make op's inputs at the shapes in
// (an embed checks only its width), so that only op's own check decides.
func alone(op Op, out shape, in ...shape) *Graph {
	g := &Graph{Tokens: 2}
	add := func(o *Op, s shape) {
		o.ID, o.Out = len(g.Ops), len(g.Values)
		g.Ops = append(g.Ops, o)
		g.Values = append(g.Values, &Value{ID: o.Out, Name: o.Name, Rows: s[0], Cols: s[1]})
	}
	op.In = nil
	for i, s := range in {
		e := &Op{Kind: Embed, Name: fmt.Sprint("in", i), Weight: &Weight{Name: "t", Type: quant.F32, Rows: 10, Cols: s[1]}}
		add(e, s)
		op.In = append(op.In, e.Out)
	}
	add(&op, out)
	g.Output = op.Out
	return g
}

// byName returns g's op named name.
func byName(g *Graph, name string) *Op {
	for _, op := range g.Ops {
		if op.Name == name {
			return op
		}
	}
	panic("no op " + name)
}

func TestValidateGood(t *testing.T) {
	if err := testGraph().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, g := range goodAlone() {
		t.Run(name, func(t *testing.T) {
			if err := g.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func wt(rows, cols int) *Weight { return &Weight{Name: "w", Type: quant.F32, Rows: rows, Cols: cols} }

func rp(headDim, dims int) RopeParams { return RopeParams{HeadDim: headDim, Dims: dims, Base: 1e4} }

func attp(heads, kv, hd int) AttnParams {
	return AttnParams{Heads: heads, KVHeads: kv, HeadDim: hd, Context: 16}
}

// goodAlone is, for each kind, a graph that validates and that the shape
// cases of TestValidateBad change in one place.
func goodAlone() map[string]*Graph {
	return map[string]*Graph{
		"embed":     alone(Op{Kind: Embed, Name: "x", Weight: wt(10, 8)}, shape{2, 8}),
		"rms_norm":  alone(Op{Kind: RMSNorm, Name: "x", Weight: wt(1, 8)}, shape{2, 8}, shape{2, 8}),
		"mat_mul":   alone(Op{Kind: MatMul, Name: "x", Weight: wt(6, 8)}, shape{2, 6}, shape{2, 8}),
		"rope":      alone(Op{Kind: RoPE, Name: "x", Rope: rp(4, 2)}, shape{2, 8}, shape{2, 8}),
		"attention": alone(Op{Kind: Attention, Name: "x", Attn: attp(4, 2, 4)}, shape{2, 16}, shape{2, 16}, shape{2, 8}, shape{2, 8}),
		"silu_mul":  alone(Op{Kind: SiLUMul, Name: "x"}, shape{2, 8}, shape{2, 8}, shape{2, 8}),
		"add":       alone(Op{Kind: Add, Name: "x"}, shape{2, 8}, shape{2, 8}, shape{2, 8}),
		"last_row":  alone(Op{Kind: LastRow, Name: "x"}, shape{1, 8}, shape{2, 8}),
		"add_bias":  alone(Op{Kind: AddBias, Name: "x", Weight: wt(1, 8)}, shape{2, 8}, shape{2, 8}),
		"per-head":  alone(Op{Kind: RMSNorm, Name: "x", Weight: wt(1, 4), PerHead: true}, shape{2, 8}, shape{2, 8}),
	}
}

func TestValidateBad(t *testing.T) {
	type badCase struct {
		name string
		g    *Graph
		op   string // the op the error must name (Op.String), or "" for the graph
		say  string // and a phrase it must contain
	}
	edit := func(f func(g *Graph)) *Graph {
		g := testGraph()
		f(g)
		return g
	}
	var cases []badCase

	// Arity and weight, for every kind from the table.
	weighted := 0
	for _, k := range Kinds() {
		var name string
		for _, op := range testGraph().Ops {
			if op.Kind == k {
				name = op.Name
				break
			}
		}
		if name == "" {
			t.Fatalf("testGraph has no %s op", k)
		}
		who := fmt.Sprintf("%s (%s)", name, k)
		if k.Inputs() > 0 {
			cases = append(cases, badCase{k.String() + " too few inputs", edit(func(g *Graph) {
				op := byName(g, name)
				op.In = op.In[:len(op.In)-1]
			}), who, fmt.Sprintf("%d inputs, want %d", k.Inputs()-1, k.Inputs())})
		}
		cases = append(cases, badCase{k.String() + " too many inputs", edit(func(g *Graph) {
			op := byName(g, name)
			op.In = append(op.In, 0)
		}), who, fmt.Sprintf("%d inputs, want %d", k.Inputs()+1, k.Inputs())})
		if k.NeedsWeight() {
			weighted++
			cases = append(cases, badCase{k.String() + " no weight", edit(func(g *Graph) {
				byName(g, name).Weight = nil
			}), who, "has no weight"})
		}
	}
	if weighted != 4 {
		t.Errorf("%d kinds need a weight, want 4 (embed, rms_norm, mat_mul, add_bias)", weighted)
	}

	// Shapes: each case differs from goodAlone's graph of its kind in one place.
	shapeCases := []struct {
		name, kind string
		g          *Graph
		say        string
	}{
		{"embed width not the table's", "embed", alone(Op{Kind: Embed, Name: "x", Weight: wt(10, 6)}, shape{2, 8}), "embedding width"},
		{"norm weight width", "rms_norm", alone(Op{Kind: RMSNorm, Name: "x", Weight: wt(1, 6)}, shape{2, 8}, shape{2, 8}), "norm weight"},
		{"norm weight of two rows", "rms_norm", alone(Op{Kind: RMSNorm, Name: "x", Weight: wt(2, 8)}, shape{2, 8}, shape{2, 8}), "norm weight"},
		{"per-head norm not dividing", "rms_norm", alone(Op{Kind: RMSNorm, Name: "x", Weight: wt(1, 3), PerHead: true}, shape{2, 8}, shape{2, 8}), "per-head norm weight of 3 does not divide rows of 8"},
		{"per-head norm output shape", "rms_norm", alone(Op{Kind: RMSNorm, Name: "x", Weight: wt(1, 4), PerHead: true}, shape{1, 8}, shape{2, 8}), "output shape"},
		{"bias width", "add_bias", alone(Op{Kind: AddBias, Name: "x", Weight: wt(1, 6)}, shape{2, 8}, shape{2, 8}), "bias 1×6 does not fit rows of 8"},
		{"bias of two rows", "add_bias", alone(Op{Kind: AddBias, Name: "x", Weight: wt(2, 8)}, shape{2, 8}, shape{2, 8}), "bias 2×8"},
		{"bias output shape", "add_bias", alone(Op{Kind: AddBias, Name: "x", Weight: wt(1, 8)}, shape{1, 8}, shape{2, 8}), "does not fit"},
		{"norm output shape", "rms_norm", alone(Op{Kind: RMSNorm, Name: "x", Weight: wt(1, 8)}, shape{1, 8}, shape{2, 8}), "output shape"},
		{"matmul weight cols not input cols", "mat_mul", alone(Op{Kind: MatMul, Name: "x", Weight: wt(6, 8)}, shape{2, 6}, shape{2, 7}), "[2,7] × weight 6×8 → [2,6]"},
		{"matmul output cols not weight rows", "mat_mul", alone(Op{Kind: MatMul, Name: "x", Weight: wt(6, 8)}, shape{2, 5}, shape{2, 8}), "does not fit"},
		{"matmul output rows", "mat_mul", alone(Op{Kind: MatMul, Name: "x", Weight: wt(6, 8)}, shape{1, 6}, shape{2, 8}), "does not fit"},
		{"rope dims odd", "rope", alone(Op{Kind: RoPE, Name: "x", Rope: rp(4, 3)}, shape{2, 8}, shape{2, 8}), "rope dimensions"},
		{"rope dims over head dim", "rope", alone(Op{Kind: RoPE, Name: "x", Rope: rp(4, 6)}, shape{2, 8}, shape{2, 8}), "rope dimensions"},
		{"rope zero head dim", "rope", alone(Op{Kind: RoPE, Name: "x", Rope: rp(0, 2)}, shape{2, 8}, shape{2, 8}), "rope dimensions"},
		{"rope head dim not dividing width", "rope", alone(Op{Kind: RoPE, Name: "x", Rope: rp(4, 2)}, shape{2, 10}, shape{2, 10}), "rope dimensions"},
		{"rope output shape", "rope", alone(Op{Kind: RoPE, Name: "x", Rope: rp(4, 2)}, shape{2, 4}, shape{2, 8}), "rope dimensions"},
		{"rope factors short", "rope", alone(Op{Kind: RoPE, Name: "x", Rope: RopeParams{HeadDim: 4, Dims: 4, Base: 1e4, Freqs: []float32{1}}}, shape{2, 8}, shape{2, 8}), "1 frequency factors for 2 rotated pairs"},
		{"attention heads not a multiple of kv heads", "attention", alone(Op{Kind: Attention, Name: "x", Attn: attp(3, 2, 4)}, shape{2, 12}, shape{2, 12}, shape{2, 8}, shape{2, 8}), "head counts"},
		{"attention zero kv heads", "attention", alone(Op{Kind: Attention, Name: "x", Attn: attp(4, 0, 4)}, shape{2, 16}, shape{2, 16}, shape{2, 8}, shape{2, 8}), "head counts"},
		{"attention q width", "attention", alone(Op{Kind: Attention, Name: "x", Attn: attp(4, 2, 4)}, shape{2, 16}, shape{2, 12}, shape{2, 8}, shape{2, 8}), "head counts"},
		{"attention v width", "attention", alone(Op{Kind: Attention, Name: "x", Attn: attp(4, 2, 4)}, shape{2, 16}, shape{2, 16}, shape{2, 8}, shape{2, 4}), "head counts"},
		{"attention k rows", "attention", alone(Op{Kind: Attention, Name: "x", Attn: attp(4, 2, 4)}, shape{2, 16}, shape{2, 16}, shape{1, 8}, shape{2, 8}), "head counts"},
		{"attention output shape", "attention", alone(Op{Kind: Attention, Name: "x", Attn: attp(4, 2, 4)}, shape{2, 8}, shape{2, 16}, shape{2, 8}, shape{2, 8}), "head counts"},
		{"silu_mul operands differ", "silu_mul", alone(Op{Kind: SiLUMul, Name: "x"}, shape{2, 8}, shape{2, 8}, shape{2, 6}), "operand shapes differ"},
		{"add operands differ", "add", alone(Op{Kind: Add, Name: "x"}, shape{2, 8}, shape{1, 8}, shape{2, 8}), "operand shapes differ"},
		{"add output differs", "add", alone(Op{Kind: Add, Name: "x"}, shape{2, 6}, shape{2, 8}, shape{2, 8}), "operand shapes differ"},
		{"last_row output two rows", "last_row", alone(Op{Kind: LastRow, Name: "x"}, shape{2, 8}, shape{2, 8}), "not one row"},
		{"last_row output width", "last_row", alone(Op{Kind: LastRow, Name: "x"}, shape{1, 6}, shape{2, 8}), "not one row"},
	}
	for _, c := range shapeCases {
		cases = append(cases, badCase{c.name, c.g, "x (" + c.kind + ")", c.say})
	}

	// Structure.
	cases = append(cases,
		badCase{"unknown kind", edit(func(g *Graph) { byName(g, "gate").Kind = 99 }), "gate (kind(99))", "unknown kind"},
		badCase{"zero kind", edit(func(g *Graph) { byName(g, "res").Kind = 0 }), "res (kind(0))", "unknown kind"},
		badCase{"input id past the end", edit(func(g *Graph) { byName(g, "rq").In[0] = 12 }), "rq (rope)", "reads value 12, out of range"},
		badCase{"negative input id", edit(func(g *Graph) { byName(g, "attn").In[1] = -1 }), "attn (attention)", "reads value -1, out of range"},
		badCase{"output id past the end", edit(func(g *Graph) { byName(g, "q").Out = 42 }), "q (mat_mul)", "writes value 42, out of range"},
		badCase{"negative output id", edit(func(g *Graph) { byName(g, "q").Out = -3 }), "q (mat_mul)", "writes value -3, out of range"},
		badCase{"read before produced", edit(func(g *Graph) { byName(g, "norm").In[0] = 5 }), "norm (rms_norm)", "reads value 5 before it is produced"},
		badCase{"read own output", edit(func(g *Graph) { byName(g, "res").In[1] = 9 }), "res (add)", "reads value 9 before it is produced"},
		badCase{"written twice", edit(func(g *Graph) { byName(g, "k").Out = 2 }), "k (mat_mul)", "writes value 2, which q (mat_mul) already wrote"},
		badCase{"op id not its index", edit(func(g *Graph) { g.Ops[4].ID = 7 }), "v (mat_mul)", "is op 4 but has id 7"},
		badCase{"ops swapped", edit(func(g *Graph) {
			g.Ops[5], g.Ops[6] = g.Ops[6], g.Ops[5]
			g.Ops[5].ID, g.Ops[6].ID = 5, 6
			g.Ops[7], g.Ops[8] = g.Ops[8], g.Ops[7]
			g.Ops[7].ID, g.Ops[8].ID = 7, 8
		}), "gate (silu_mul)", "reads value 7 before it is produced"},
		badCase{"nil op", edit(func(g *Graph) { g.Ops[3] = nil }), "op 3", "is nil"},
		badCase{"value id not its index", edit(func(g *Graph) { g.Values[2].ID = 3 }), "value 2", "another id"},
		badCase{"output out of range", edit(func(g *Graph) { g.Output = 12 }), "", "output value 12"},
		badCase{"output never produced", edit(func(g *Graph) {
			g.Ops = g.Ops[:len(g.Ops)-1]
		}), "", "output value 11 is not produced"},
	)

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.g.Validate()
			if err == nil {
				t.Fatal("validated")
			}
			for _, m := range []string{c.op, c.say} {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("%q does not mention %q", err, m)
				}
			}
		})
	}
}

// TestRopeParamsEqual checks that Equal compares the factors by value, and
// tells no factors from an empty list of them.
func TestRopeParamsEqual(t *testing.T) {
	a := RopeParams{HeadDim: 4, Dims: 4, Base: 1e4, Freqs: []float32{1, 32}}
	for name, tc := range map[string]struct {
		b    RopeParams
		want bool
	}{
		"same values":   {RopeParams{HeadDim: 4, Dims: 4, Base: 1e4, Freqs: []float32{1, 32}}, true},
		"other factor":  {RopeParams{HeadDim: 4, Dims: 4, Base: 1e4, Freqs: []float32{1, 8}}, false},
		"no factors":    {RopeParams{HeadDim: 4, Dims: 4, Base: 1e4}, false},
		"other base":    {RopeParams{HeadDim: 4, Dims: 4, Base: 5e5, Freqs: []float32{1, 32}}, false},
		"other dims":    {RopeParams{HeadDim: 4, Dims: 2, Base: 1e4, Freqs: []float32{1, 32}}, false},
		"other headdim": {RopeParams{HeadDim: 8, Dims: 4, Base: 1e4, Freqs: []float32{1, 32}}, false},
		"neox":          {RopeParams{HeadDim: 4, Dims: 4, Base: 1e4, Freqs: []float32{1, 32}, Neox: true}, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := a.Equal(tc.b); got != tc.want {
				t.Errorf("Equal = %v, want %v", got, tc.want)
			}
		})
	}
	if (RopeParams{Dims: 2, Freqs: []float32{}}).Equal(RopeParams{Dims: 2}) {
		t.Error("an empty factor list equals none")
	}
}
