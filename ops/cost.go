package ops

import "hybrid/quant"

// Cost is the work an op does in one step.
type Cost struct {
	FLOPs        int64
	BytesRead    int64 // weights, inputs and cache read
	BytesWritten int64 // outputs and cache written
}

// CostOf is the work op does in graph g, which must validate: FLOPs counted as
// one per add or multiply, bytes as f32 activations, weights at their stored
// size, and an f16 KV cache (2 bytes an element, what devices/cpu keeps; a
// device that keeps its cache in another type is the planner's to account for).
// An op of no kind costs the bytes of its inputs and output.
func CostOf(g *Graph, op *Op) Cost {
	if i := op.Kind.info(); i != nil {
		return i.cost(g, op)
	}
	return moved(g, op)
}

// moved is the cost of reading op's inputs and writing its output once.
func moved(g *Graph, op *Op) Cost {
	var c Cost
	for _, in := range op.In {
		c.BytesRead += g.Values[in].Bytes()
	}
	c.BytesWritten = g.Values[op.Out].Bytes()
	return c
}

// elems is the number of elements op writes.
func elems(g *Graph, op *Op) int64 { return int64(g.Values[op.Out].Elems()) }

func costEmbed(g *Graph, op *Op) Cost {
	c := moved(g, op)
	rb, _ := quant.RowBytes(op.Weight.Type, op.Weight.Cols)
	c.BytesRead = int64(g.Values[op.Out].Rows) * int64(rb) // only the tokens' rows of the table
	c.FLOPs = elems(g, op)
	return c
}

func costRMSNorm(g *Graph, op *Op) Cost {
	c := moved(g, op)
	c.BytesRead += op.Weight.Bytes()
	c.FLOPs = 4 * elems(g, op)
	return c
}

func costMatMul(g *Graph, op *Op) Cost {
	c := moved(g, op)
	c.BytesRead += op.Weight.Bytes()
	c.FLOPs = 2 * elems(g, op) * int64(op.Weight.Cols)
	return c
}

func costRoPE(g *Graph, op *Op) Cost {
	c := moved(g, op)
	c.FLOPs = 3 * elems(g, op)
	return c
}

func costAttention(g *Graph, op *Op) Cost {
	c := moved(g, op)
	a := op.Attn
	n := int64(g.Values[op.Out].Rows)
	span := int64(g.Past) + n // keys attended by the last token; causal average is about half for prefill
	avg := int64(g.Past) + (n+1)/2
	kvRow := int64(a.KVHeads * a.HeadDim)
	c.BytesRead += 2 * 2 * span * kvRow // f16 K and V
	c.BytesWritten += 2 * 2 * n * kvRow
	c.FLOPs = n * int64(a.Heads) * avg * (4*int64(a.HeadDim) + 5)
	return c
}

func costSiLUMul(g *Graph, op *Op) Cost {
	c := moved(g, op)
	c.FLOPs = 5 * elems(g, op)
	return c
}

func costAdd(g *Graph, op *Op) Cost {
	c := moved(g, op)
	c.FLOPs = elems(g, op)
	return c
}

func costAddBias(g *Graph, op *Op) Cost {
	c := moved(g, op)
	c.BytesRead += op.Weight.Bytes()
	c.FLOPs = elems(g, op)
	return c
}

func costLastRow(g *Graph, op *Op) Cost {
	c := moved(g, op)
	c.BytesRead = g.Values[op.Out].Bytes() // one row of the input, not all of it
	return c
}
