package mlmodel

import (
	"fmt"
	"math"

	"hybrid/quant"
)

// Eval runs m on the host: the reference for what CoreML computes with it. It
// validates m, then interprets its ops in order, checking that each op's
// result has the type and shape the program declares (as CoreML's compiler
// does) and storing every fp16 result rounded to fp16, as the Neural Engine
// stores it. Each op is evaluated exactly (sums in float64) and rounded once
// (through f32, which for one arithmetic operation on fp16 operands gives the
// correctly rounded fp16 result, since f32's 24 bits ≥ 2·11+2): a model of an
// ideal fp16 device. Real hardware may accumulate a long dot product less
// precisely; the device tests' tolerances leave room for that.
//
// inputs maps each input feature's name to its values, row-major; Eval
// returns each output feature's values the same way. It knows only the ops
// the programs of this package use, and says so for any other.
func Eval(m *Model, inputs map[string][]float32) (map[string][]float32, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	env := map[string]*value{}
	for i, f := range m.Inputs {
		x, ok := inputs[f.Name]
		t := m.Main.Inputs[i].Type
		if !ok || len(x) != t.Elems() {
			return nil, fmt.Errorf("mlmodel: eval: input %q: %d values, want %d", f.Name, len(x), t.Elems())
		}
		v := &value{t: t, f: append([]float32(nil), x...)}
		v.round()
		env[f.Name] = v
	}
	for i := range m.Main.Ops {
		op := &m.Main.Ops[i]
		res, err := evalOp(op, env)
		if err != nil {
			return nil, fmt.Errorf("mlmodel: eval: op %q (%s): %w", op.Name, op.Type, err)
		}
		if want := op.Outputs[0].Type; !res.t.equal(want) {
			return nil, fmt.Errorf("mlmodel: eval: op %q (%s) computes %s, declared %s", op.Name, op.Type, res.t, want)
		}
		res.round()
		env[op.Outputs[0].Name] = res
	}
	out := map[string][]float32{}
	for _, name := range m.Main.Outputs {
		out[name] = env[name].f
	}
	return out, nil
}

// value is a tensor during evaluation. Float tensors keep f32 values; an fp16
// tensor's values are exactly representable in fp16.
type value struct {
	t TensorType
	f []float32
	i []int32
	b []bool
	s []string
}

func (v *value) round() {
	if v.t.DType == Float16 {
		for i, x := range v.f {
			v.f[i] = quant.F16ToF32(quant.F32ToF16(x))
		}
	}
}

func (v *value) isFloat() bool { return v.t.DType == Float16 || v.t.DType == Float32 }

func constValue(t *Tensor) *value {
	v := &value{t: t.Type, f: t.F32, i: t.I32, b: t.Bool, s: t.Str}
	if t.Type.DType == Float16 {
		v.f = make([]float32, len(t.F16))
		for i, h := range t.F16 {
			v.f[i] = quant.F16ToF32(h)
		}
	}
	return v
}

// evalOp computes one op from the values it reads.
func evalOp(op *Op, env map[string]*value) (*value, error) {
	args := map[string]*value{}
	for _, a := range op.Inputs {
		args[a.Param] = env[a.Var]
	}
	need := func(params ...string) error {
		if len(args) != len(params) {
			return fmt.Errorf("%d inputs, want %v", len(args), params)
		}
		for _, p := range params {
			if args[p] == nil {
				return fmt.Errorf("no input %q (want %v)", p, params)
			}
		}
		return nil
	}
	switch op.Type {
	case "const":
		return constValue(op.Value), nil
	case "cast":
		if err := need("x", "dtype"); err != nil {
			return nil, err
		}
		x, dt := args["x"], args["dtype"]
		if dt.t.DType != String || len(dt.s) != 1 {
			return nil, fmt.Errorf("dtype is %s, want a string", dt.t)
		}
		to := map[string]DataType{"fp16": Float16, "fp32": Float32}[dt.s[0]]
		if to == 0 || !x.isFloat() {
			return nil, fmt.Errorf("cast of %s to %q is not one of fp16↔fp32", x.t, dt.s[0])
		}
		return &value{t: TensorType{DType: to, Shape: x.t.Shape}, f: append([]float32(nil), x.f...)}, nil
	case "abs", "silu":
		if err := need("x"); err != nil {
			return nil, err
		}
		return unary(args["x"], map[string]func(float64) float64{
			"abs":  math.Abs,
			"silu": func(x float64) float64 { return x / (1 + math.Exp(-x)) },
		}[op.Type])
	case "rsqrt":
		if err := need("x", "epsilon"); err != nil {
			return nil, err
		}
		e := args["epsilon"]
		if e.t.DType != args["x"].t.DType || len(e.t.Shape) != 0 {
			return nil, fmt.Errorf("epsilon is %s, want a scalar %s", e.t, args["x"].t.DType)
		}
		eps := float64(e.f[0])
		return unary(args["x"], func(x float64) float64 { return 1 / math.Sqrt(x+eps) })
	case "add", "mul", "real_div", "maximum":
		if err := need("x", "y"); err != nil {
			return nil, err
		}
		return elementwise(args["x"], args["y"], map[string]func(a, b float64) float64{
			"add":      func(a, b float64) float64 { return a + b },
			"mul":      func(a, b float64) float64 { return a * b },
			"real_div": func(a, b float64) float64 { return a / b },
			"maximum":  math.Max,
		}[op.Type])
	case "reduce_max", "reduce_mean":
		if err := need("x", "axes", "keep_dims"); err != nil {
			return nil, err
		}
		return reduce(op.Type, args["x"], args["axes"], args["keep_dims"])
	case "linear":
		if err := need("x", "weight", "bias"); err != nil {
			return nil, err
		}
		return linear(args["x"], args["weight"], args["bias"])
	}
	return nil, fmt.Errorf("op type %q is not one the evaluator knows", op.Type)
}

func unary(x *value, fn func(float64) float64) (*value, error) {
	if !x.isFloat() {
		return nil, fmt.Errorf("input is %s, want a float tensor", x.t)
	}
	out := &value{t: x.t, f: make([]float32, len(x.f))}
	for i, v := range x.f {
		out.f[i] = float32(fn(float64(v)))
	}
	return out, nil
}

// elementwise applies fn element-wise with NumPy broadcasting, as MIL's
// element-wise binary ops do.
func elementwise(x, y *value, fn func(a, b float64) float64) (*value, error) {
	if !x.isFloat() || x.t.DType != y.t.DType {
		return nil, fmt.Errorf("operands %s and %s, want float tensors of one type", x.t, y.t)
	}
	rank := max(len(x.t.Shape), len(y.t.Shape))
	pad := func(s []int64) []int64 {
		p := make([]int64, rank)
		for i := range p {
			p[i] = 1
		}
		copy(p[rank-len(s):], s)
		return p
	}
	xs, ys := pad(x.t.Shape), pad(y.t.Shape)
	shape := make([]int64, rank)
	for i := range shape {
		switch {
		case xs[i] == ys[i], ys[i] == 1:
			shape[i] = xs[i]
		case xs[i] == 1:
			shape[i] = ys[i]
		default:
			return nil, fmt.Errorf("shapes %v and %v do not broadcast", x.t.Shape, y.t.Shape)
		}
	}
	out := &value{t: TensorType{DType: x.t.DType, Shape: shape}}
	out.f = make([]float32, out.t.Elems())
	xst, yst := bcastStrides(xs), bcastStrides(ys)
	idx := make([]int64, rank)
	for o := range out.f {
		var xi, yi int64
		for d := range idx {
			xi += idx[d] * xst[d]
			yi += idx[d] * yst[d]
		}
		out.f[o] = float32(fn(float64(x.f[xi]), float64(y.f[yi])))
		next(idx, shape)
	}
	return out, nil
}

// bcastStrides returns row-major strides of shape with 0 for broadcast (size
// 1) dimensions.
func bcastStrides(shape []int64) []int64 {
	st := make([]int64, len(shape))
	s := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] != 1 {
			st[i] = s
		}
		s *= shape[i]
	}
	return st
}

// next advances the multi-index idx over shape in row-major order.
func next(idx, shape []int64) {
	for d := len(idx) - 1; d >= 0; d-- {
		idx[d]++
		if idx[d] < shape[d] {
			return
		}
		idx[d] = 0
	}
}

func reduce(kind string, x, axes, keep *value) (*value, error) {
	if !x.isFloat() || axes.t.DType != Int32 || len(axes.t.Shape) != 1 || keep.t.DType != Bool || len(keep.b) != 1 || len(keep.t.Shape) != 0 {
		return nil, fmt.Errorf("x %s, axes %s, keep_dims %s: want a float tensor, int32 axes and a bool scalar", x.t, axes.t, keep.t)
	}
	rank := len(x.t.Shape)
	reduced := make([]bool, rank)
	for _, a := range axes.i {
		ax := int(a)
		if ax < 0 {
			ax += rank
		}
		if ax < 0 || ax >= rank || reduced[ax] {
			return nil, fmt.Errorf("axis %d of a rank-%d tensor", a, rank)
		}
		reduced[ax] = true
	}
	kept := make([]int64, rank) // shape with reduced dims set to 1
	var shape []int64
	count := int64(1)
	for d, n := range x.t.Shape {
		kept[d] = n
		if reduced[d] {
			kept[d] = 1
			count *= n
			if keep.b[0] {
				shape = append(shape, 1)
			}
			continue
		}
		shape = append(shape, n)
	}
	outN := int(TensorType{Shape: kept}.Elems())
	acc := make([]float64, outN)
	if kind == "reduce_max" {
		for i := range acc {
			acc[i] = math.Inf(-1)
		}
	}
	st := bcastStrides(kept)
	idx := make([]int64, rank)
	for _, v := range x.f {
		var o int64
		for d := range idx {
			o += idx[d] * st[d]
		}
		if kind == "reduce_max" {
			acc[o] = math.Max(acc[o], float64(v))
		} else {
			acc[o] += float64(v)
		}
		next(idx, x.t.Shape)
	}
	out := &value{t: TensorType{DType: x.t.DType, Shape: shape}, f: make([]float32, outN)}
	for i, a := range acc {
		if kind == "reduce_mean" {
			a /= float64(count)
		}
		out.f[i] = float32(a)
	}
	return out, nil
}

// linear computes x·weightᵀ + bias for x [..., k], weight [m, k], bias [m].
func linear(x, w, bias *value) (*value, error) {
	if !x.isFloat() || w.t.DType != x.t.DType || bias.t.DType != x.t.DType || len(w.t.Shape) != 2 || len(bias.t.Shape) != 1 || len(x.t.Shape) < 1 {
		return nil, fmt.Errorf("x %s, weight %s, bias %s do not fit linear", x.t, w.t, bias.t)
	}
	m, k := int(w.t.Shape[0]), int(w.t.Shape[1])
	if int(x.t.Shape[len(x.t.Shape)-1]) != k || int(bias.t.Shape[0]) != m {
		return nil, fmt.Errorf("x %s, weight %s, bias %s do not fit linear", x.t, w.t, bias.t)
	}
	shape := append(append([]int64(nil), x.t.Shape[:len(x.t.Shape)-1]...), int64(m))
	rows := len(x.f) / k
	out := &value{t: TensorType{DType: x.t.DType, Shape: shape}, f: make([]float32, rows*m)}
	for r := 0; r < rows; r++ {
		xr := x.f[r*k : (r+1)*k]
		for j := 0; j < m; j++ {
			wr := w.f[j*k : (j+1)*k]
			s := float64(bias.f[j])
			for i, v := range xr {
				s += float64(v) * float64(wr[i])
			}
			out.f[r*m+j] = float32(s)
		}
	}
	return out, nil
}
