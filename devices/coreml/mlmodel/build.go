package mlmodel

import (
	"fmt"
	"math"

	"hybrid/quant"
)

// OutputName is the name of every program's one output feature.
const OutputName = "out"

// Input returns the name of a program's i-th input feature ("in0", "in1"),
// in the order of the op's inputs.
func Input(i int) string { return fmt.Sprintf("in%d", i) }

// MatMul returns the program out[n,m] = in0[n,k] · wᵀ, with w the m×k matrix
// of binary16 values in row-major order (GGUF's layout: one row per output).
// It casts in0 to fp16 and runs MIL's linear with a zero bias.
func MatMul(n, k, m int, w []uint16) (*Model, error) {
	if n <= 0 || k <= 0 || m <= 0 || len(w) != m*k {
		return nil, fmt.Errorf("mlmodel: mat_mul [%d,%d]×[%d,%d]ᵀ with %d weights", n, k, m, k, len(w))
	}
	b := newBuilder()
	x := b.toF16(b.input(0, n, k))
	wt := b.konst("weight", &Tensor{Type: f16(m, k), F16: w})
	bias := b.konst("bias", &Tensor{Type: f16(m), F16: make([]uint16, m)})
	y := b.op("linear", "linear_0", f16(n, m), Arg{"x", x}, Arg{"weight", wt}, Arg{"bias", bias})
	return b.finish(y, n, m), nil
}

// RMSNorm returns the program out = in0 / sqrt(mean(in0², last axis) + eps)
// · w for in0 [n,d] and a weight w of d binary16 values.
//
// The obvious fp16 program overflows: x² is infinite for |x| > 256, and a
// Llama residual stream holds values in the hundreds and thousands. So each
// row is first divided by its largest magnitude m (clamped below by c):
//
//	y = x/m, |y| ≤ 1          out = y · rsqrt(mean(y²) + (√eps/m)²) · w
//
// which is the same function (m cancels) with every intermediate in range:
// mean(y²) ∈ [1/d, 1] for a nonzero row, y·rsqrt(...) ≤ √d, and (√eps/m)² ≤
// eps/c² ≤ 2^14 by the choice of c. A zero row gives zero, as in f32.
func RMSNorm(n, d int, w []uint16, eps float32) (*Model, error) {
	if n <= 0 || d <= 0 || len(w) != d {
		return nil, fmt.Errorf("mlmodel: rms_norm of [%d,%d] with %d weights", n, d, len(w))
	}
	if !(eps >= 0) || math.IsInf(float64(eps), 0) {
		return nil, fmt.Errorf("mlmodel: rms_norm epsilon %g", eps)
	}
	c := float32(0x1p-14) // fp16's smallest normal
	for float64(eps)/(float64(c)*float64(c)) > 1<<14 {
		c *= 2
	}
	b := newBuilder()
	x := b.toF16(b.input(0, n, d))
	row, col := f16(n, 1), f16(n, d)
	axes := b.konst("axes", &Tensor{Type: TensorType{DType: Int32, Shape: []int64{1}}, I32: []int32{-1}})
	keep := b.konst("keep_dims", &Tensor{Type: TensorType{DType: Bool}, Bool: []bool{true}})
	a := b.op("abs", "abs_x", col, Arg{"x", x})
	mx := b.op("reduce_max", "max_abs", row, Arg{"x", a}, Arg{"axes", axes}, Arg{"keep_dims", keep})
	m := b.op("maximum", "scale", row, Arg{"x", mx}, Arg{"y", b.scalar("min_scale", c)})
	y := b.op("real_div", "y", col, Arg{"x", x}, Arg{"y", m})
	y2 := b.op("mul", "y_sq", col, Arg{"x", y}, Arg{"y", y})
	ms := b.op("reduce_mean", "mean_sq", row, Arg{"x", y2}, Arg{"axes", axes}, Arg{"keep_dims", keep})
	q := b.op("real_div", "eps_root", row, Arg{"x", b.scalar("sqrt_eps", float32(math.Sqrt(float64(eps))))}, Arg{"y", m})
	q2 := b.op("mul", "eps_scaled", row, Arg{"x", q}, Arg{"y", q})
	t := b.op("add", "mean_sq_eps", row, Arg{"x", ms}, Arg{"y", q2})
	// rsqrt adds its own epsilon; its default, 1e-12, is 0 in fp16.
	r := b.op("rsqrt", "inv_rms", row, Arg{"x", t}, Arg{"epsilon", b.scalar("rsqrt_eps", 0)})
	z := b.op("mul", "normed", col, Arg{"x", y}, Arg{"y", r})
	wt := b.konst("weight", &Tensor{Type: f16(d), F16: w})
	o := b.op("mul", "scaled", col, Arg{"x", z}, Arg{"y", wt})
	return b.finish(o, n, d), nil
}

// SiLUMul returns the program out = silu(in0) · in1 for [n,d] inputs.
func SiLUMul(n, d int) (*Model, error) {
	if n <= 0 || d <= 0 {
		return nil, fmt.Errorf("mlmodel: silu_mul of [%d,%d]", n, d)
	}
	b := newBuilder()
	g := b.toF16(b.input(0, n, d))
	u := b.toF16(b.input(1, n, d))
	s := b.op("silu", "silu_0", f16(n, d), Arg{"x", g})
	return b.finish(b.op("mul", "mul_0", f16(n, d), Arg{"x", s}, Arg{"y", u}), n, d), nil
}

// Add returns the program out = in0 + in1 for [n,d] inputs.
func Add(n, d int) (*Model, error) {
	if n <= 0 || d <= 0 {
		return nil, fmt.Errorf("mlmodel: add of [%d,%d]", n, d)
	}
	b := newBuilder()
	x := b.toF16(b.input(0, n, d))
	y := b.toF16(b.input(1, n, d))
	return b.finish(b.op("add", "add_0", f16(n, d), Arg{"x", x}, Arg{"y", y}), n, d), nil
}

// AddBias returns the program out = in0 + w for in0 [n,d] and a bias w of d
// binary16 values, broadcast over the rows.
func AddBias(n, d int, w []uint16) (*Model, error) {
	if n <= 0 || d <= 0 || len(w) != d {
		return nil, fmt.Errorf("mlmodel: add_bias of [%d,%d] with %d biases", n, d, len(w))
	}
	b := newBuilder()
	x := b.toF16(b.input(0, n, d))
	bias := b.konst("bias", &Tensor{Type: f16(d), F16: w})
	return b.finish(b.op("add", "add_bias", f16(n, d), Arg{"x", x}, Arg{"y", bias}), n, d), nil
}

// builder accumulates the function of a program and its features.
type builder struct {
	m       *Model
	dtype16 string // the const "fp16", made on first use
}

func newBuilder() *builder {
	return &builder{m: &Model{SpecVersion: SpecVersion, Main: Function{Opset: Opset}}}
}

// input declares the i-th input, an f32 [rows, cols] multi-array.
func (b *builder) input(i, rows, cols int) string {
	name := Input(i)
	shape := []int64{int64(rows), int64(cols)}
	b.m.Inputs = append(b.m.Inputs, Feature{Name: name, Shape: shape, Type: ArrayFloat32})
	b.m.Main.Inputs = append(b.m.Main.Inputs, Var{Name: name, Type: TensorType{DType: Float32, Shape: shape}})
	return name
}

// typeOf returns the type of the value named v, which must be defined.
func (b *builder) typeOf(v string) TensorType {
	for _, in := range b.m.Main.Inputs {
		if in.Name == v {
			return in.Type
		}
	}
	for _, op := range b.m.Main.Ops {
		if op.Outputs[0].Name == v {
			return op.Outputs[0].Type
		}
	}
	panic("mlmodel: no value " + v) // programmer error in this file
}

// op appends an op whose single output, named name, has type out.
func (b *builder) op(typ, name string, out TensorType, args ...Arg) string {
	b.m.Main.Ops = append(b.m.Main.Ops, Op{Type: typ, Name: name, Inputs: args, Outputs: []Var{{Name: name, Type: out}}})
	return name
}

// konst appends a const op named name holding t.
func (b *builder) konst(name string, t *Tensor) string {
	b.m.Main.Ops = append(b.m.Main.Ops, Op{Type: "const", Name: name, Outputs: []Var{{Name: name, Type: t.Type}}, Value: t})
	return name
}

// scalar appends an fp16 scalar const.
func (b *builder) scalar(name string, v float32) string {
	return b.konst(name, &Tensor{Type: TensorType{DType: Float16}, F16: []uint16{quant.F32ToF16(v)}})
}

// toF16 casts the f32 value v to fp16.
func (b *builder) toF16(v string) string {
	if b.dtype16 == "" {
		b.dtype16 = b.konst("dtype_fp16", &Tensor{Type: TensorType{DType: String}, Str: []string{"fp16"}})
	}
	t := b.typeOf(v)
	return b.op("cast", fmt.Sprintf("%s_fp16", v), TensorType{DType: Float16, Shape: t.Shape}, Arg{"x", v}, Arg{"dtype", b.dtype16})
}

// finish casts the fp16 value v [rows, cols] to the f32 output and returns the
// model.
func (b *builder) finish(v string, rows, cols int) *Model {
	dt := b.konst("dtype_fp32", &Tensor{Type: TensorType{DType: String}, Str: []string{"fp32"}})
	shape := []int64{int64(rows), int64(cols)}
	out := b.op("cast", OutputName, TensorType{DType: Float32, Shape: shape}, Arg{"x", v}, Arg{"dtype", dt})
	b.m.Main.Outputs = []string{out}
	b.m.Outputs = []Feature{{Name: out, Shape: shape, Type: ArrayFloat32}}
	return b.m
}

// f16 is the fp16 tensor type of the given shape.
func f16(shape ...int) TensorType {
	t := TensorType{DType: Float16}
	for _, d := range shape {
		t.Shape = append(t.Shape, int64(d))
	}
	return t
}
