package ops

import (
	"errors"
	"fmt"
)

// Validate checks the graph's structure: op ids equal to their index, each op's
// kind known with as many inputs as the kind reads and a weight where it needs
// one, value ids in range, every value read after it is produced and written
// once, shapes consistent with each op's kind, and the output produced. The
// error names the first op at fault.
func (g *Graph) Validate() error {
	for i, v := range g.Values {
		if v == nil || v.ID != i {
			return fmt.Errorf("ops: value %d is nil or has another id", i)
		}
	}
	producer := make([]*Op, len(g.Values))
	for i, op := range g.Ops {
		if op == nil {
			return fmt.Errorf("ops: op %d is nil", i)
		}
		if op.ID != i {
			return fmt.Errorf("ops: %s is op %d but has id %d", op, i, op.ID)
		}
		if err := g.checkOp(op, producer); err != nil {
			return fmt.Errorf("ops: %s: %w", op, err)
		}
		producer[op.Out] = op
	}
	if g.Output < 0 || g.Output >= len(g.Values) || producer[g.Output] == nil {
		return fmt.Errorf("ops: output value %d is not produced by any op", g.Output)
	}
	return nil
}

// checkOp checks op against its kind and the values produced before it
// (producer[id] is the op that wrote value id so far, or nil).
func (g *Graph) checkOp(op *Op, producer []*Op) error {
	k := op.Kind.info()
	if k == nil {
		return errors.New("unknown kind")
	}
	if len(op.In) != k.inputs {
		return fmt.Errorf("has %d inputs, want %d", len(op.In), k.inputs)
	}
	if k.weight && op.Weight == nil {
		return errors.New("has no weight")
	}
	in := make([]*Value, len(op.In))
	for i, id := range op.In {
		if id < 0 || id >= len(g.Values) {
			return fmt.Errorf("reads value %d, out of range of %d values", id, len(g.Values))
		}
		if producer[id] == nil {
			return fmt.Errorf("reads value %d before it is produced", id)
		}
		in[i] = g.Values[id]
	}
	if op.Out < 0 || op.Out >= len(g.Values) {
		return fmt.Errorf("writes value %d, out of range of %d values", op.Out, len(g.Values))
	}
	if p := producer[op.Out]; p != nil {
		return fmt.Errorf("writes value %d, which %s already wrote", op.Out, p)
	}
	return k.check(op, in, g.Values[op.Out])
}

func sameShape(a, b *Value) bool { return a.Rows == b.Rows && a.Cols == b.Cols }

func checkEmbed(op *Op, _ []*Value, out *Value) error {
	if out.Cols != op.Weight.Cols {
		return errors.New("embedding width does not match its table")
	}
	return nil
}

func checkRMSNorm(op *Op, in []*Value, out *Value) error {
	w := op.Weight
	if w.Rows != 1 || !sameShape(out, in[0]) {
		return errors.New("norm weight or output shape does not match input")
	}
	if op.PerHead {
		if w.Cols <= 0 || in[0].Cols%w.Cols != 0 {
			return fmt.Errorf("per-head norm weight of %d does not divide rows of %d", w.Cols, in[0].Cols)
		}
		return nil
	}
	if w.Cols != in[0].Cols {
		return errors.New("norm weight or output shape does not match input")
	}
	return nil
}

func checkAddBias(op *Op, in []*Value, out *Value) error {
	if w := op.Weight; w.Rows != 1 || w.Cols != in[0].Cols || !sameShape(out, in[0]) {
		return fmt.Errorf("bias %d×%d does not fit rows of %d", w.Rows, w.Cols, in[0].Cols)
	}
	return nil
}

func checkMatMul(op *Op, in []*Value, out *Value) error {
	w := op.Weight
	if w.Cols != in[0].Cols || out.Rows != in[0].Rows || out.Cols != w.Rows {
		return fmt.Errorf("[%d,%d] × weight %d×%d → [%d,%d] does not fit", in[0].Rows, in[0].Cols, w.Rows, w.Cols, out.Rows, out.Cols)
	}
	return nil
}

func checkRoPE(op *Op, in []*Value, out *Value) error {
	r := op.Rope
	if r.HeadDim <= 0 || r.Dims <= 0 || r.Dims > r.HeadDim || r.Dims%2 != 0 || in[0].Cols%r.HeadDim != 0 || !sameShape(out, in[0]) {
		return errors.New("rope dimensions do not fit the input")
	}
	if r.Freqs != nil && len(r.Freqs) != r.Dims/2 {
		return fmt.Errorf("rope has %d frequency factors for %d rotated pairs", len(r.Freqs), r.Dims/2)
	}
	return nil
}

func checkAttention(op *Op, in []*Value, out *Value) error {
	a := op.Attn
	q, k, v := in[0], in[1], in[2]
	if a.Heads <= 0 || a.KVHeads <= 0 || a.Heads%a.KVHeads != 0 || a.HeadDim <= 0 ||
		q.Cols != a.Heads*a.HeadDim || k.Cols != a.KVHeads*a.HeadDim || v.Cols != a.KVHeads*a.HeadDim ||
		k.Rows != q.Rows || v.Rows != q.Rows || !sameShape(out, q) {
		return errors.New("head counts do not fit q, k, v")
	}
	return nil
}

// checkElementwise checks SiLUMul and Add.
func checkElementwise(_ *Op, in []*Value, out *Value) error {
	if !sameShape(in[0], in[1]) || !sameShape(out, in[0]) {
		return errors.New("operand shapes differ")
	}
	return nil
}

func checkLastRow(_ *Op, in []*Value, out *Value) error {
	if out.Rows != 1 || out.Cols != in[0].Cols {
		return errors.New("output is not one row of the input")
	}
	return nil
}
