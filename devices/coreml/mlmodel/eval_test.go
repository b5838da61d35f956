package mlmodel

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"hybrid/quant"
)

func randVec(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return v
}

func h(x float32) float64 { return float64(quant.F16ToF32(quant.F32ToF16(x))) }

// evalOne runs m through Marshal, Unmarshal and Eval, so the bytes are what
// is checked.
func evalOne(t *testing.T, m *Model, ins ...[]float32) []float32 {
	t.Helper()
	dec, err := Unmarshal(mustMarshal(t, m))
	if err != nil {
		t.Fatal(err)
	}
	feed := map[string][]float32{}
	for i, x := range ins {
		feed[Input(i)] = x
	}
	out, err := Eval(dec, feed)
	if err != nil {
		t.Fatal(err)
	}
	return out[OutputName]
}

// within checks got against float64 values want: |got-want| ≤ rel·scale(i)
// for a per-element scale (the magnitude the fp16 rounding is relative to).
func within(t *testing.T, what string, got []float32, want []float64, rel float64, scale func(i int) float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst := 0.0
	for i := range want {
		d := math.Abs(float64(got[i]) - want[i])
		if !(d <= rel*scale(i)) {
			t.Fatalf("%s[%d] = %g, want %g (tolerance %g)", what, i, got[i], want[i], rel*scale(i))
		}
		worst = max(worst, d/scale(i))
	}
	t.Logf("%s: max error %.3g of the element's scale (tolerance %.3g)", what, worst, rel)
}

// One fp16 rounding is at most 2^-11 relative.
const u16 = 0x1p-11

func TestEvalMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	n, k, m := 3, 96, 7
	w := randF16(r, m*k, 0.2)
	x := randVec(r, n*k, 1)
	model, err := MatMul(n, k, m, w)
	if err != nil {
		t.Fatal(err)
	}
	got := evalOne(t, model, x)
	want := make([]float64, n*m)
	for i := 0; i < n; i++ {
		for j := 0; j < m; j++ {
			for e := 0; e < k; e++ {
				want[i*m+j] += h(x[i*k+e]) * float64(quant.F16ToF32(w[j*k+e]))
			}
		}
	}
	// The inputs are rounded before the sum, as in the definition above; the
	// sum is exact and rounded once.
	within(t, "mat_mul", got, want, u16, func(i int) float64 { return math.Abs(want[i]) + 1e-30 })
}

func TestEvalElementwise(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	n, d := 3, 40
	a, b := randVec(r, n*d, 3), randVec(r, n*d, 3)
	add, _ := Add(n, d)
	got := evalOne(t, add, a, b)
	want := make([]float64, n*d)
	for i := range want {
		want[i] = h(a[i]) + h(b[i])
	}
	within(t, "add", got, want, u16, func(i int) float64 { return math.Abs(want[i]) + 1e-30 })

	sm, _ := SiLUMul(n, d)
	got = evalOne(t, sm, a, b)
	for i := range want {
		g := h(a[i])
		s := h(float32(g / (1 + math.Exp(-g)))) // silu's result is stored in fp16
		want[i] = s * h(b[i])
	}
	within(t, "silu_mul", got, want, u16, func(i int) float64 { return math.Abs(want[i]) + 1e-30 })
}

// TestEvalAddBias checks the bias program against its definition: the
// fp16-rounded input plus the fp16 bias of its column, rounded once.
func TestEvalAddBias(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	n, d := 3, 40
	x := randVec(r, n*d, 3)
	w := randF16(r, d, 1)
	m, err := AddBias(n, d, w)
	if err != nil {
		t.Fatal(err)
	}
	got := evalOne(t, m, x)
	want := make([]float64, n*d)
	for i := range want {
		want[i] = h(x[i]) + float64(quant.F16ToF32(w[i%d]))
	}
	within(t, "add_bias", got, want, u16, func(i int) float64 { return math.Abs(want[i]) + 1e-30 })
}

// rmsWant is RMSNorm's definition in float64 on fp16-rounded inputs.
func rmsWant(x []float32, w []uint16, eps float32) []float64 {
	d := len(w)
	out := make([]float64, len(x))
	for r := 0; r < len(x); r += d {
		var ss float64
		for _, v := range x[r : r+d] {
			ss += h(v) * h(v)
		}
		s := 1 / math.Sqrt(ss/float64(d)+float64(eps))
		for i := 0; i < d; i++ {
			out[r+i] = h(x[r+i]) * s * float64(quant.F16ToF32(w[i]))
		}
	}
	return out
}

func TestEvalRMSNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	d := 64
	w := randF16(r, d, 1)
	for _, c := range []struct {
		name  string
		scale float64
	}{
		{"unit", 1},
		// x² overflows fp16 from |x| = 256: rows of a Llama residual stream.
		{"large", 3000},
		{"small", 1e-3},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := randVec(r, 4*d, c.scale)
			m, _ := RMSNorm(4, d, w, 1e-5)
			got := evalOne(t, m, x)
			want := rmsWant(x, w, 1e-5)
			// Eight fp16 roundings on the way from input to output (y, y², the
			// mean, the eps term, t, rsqrt, the two products), each ≤ 2^-11 of
			// its value; the floor of 1e-3·|w| covers outputs near zero.
			within(t, "rms_norm "+c.name, got, want, 8*u16, func(i int) float64 {
				return math.Abs(want[i]) + 1e-3*math.Abs(float64(quant.F16ToF32(w[i%d])))
			})
		})
	}
	t.Run("zero and tiny rows", func(t *testing.T) {
		x := make([]float32, 2*d)
		x[d+3] = 1e-6 // below fp16's normal range: eps dominates
		m, _ := RMSNorm(2, d, w, 1e-5)
		got := evalOne(t, m, x)
		want := rmsWant(x, w, 1e-5)
		for i, g := range got {
			if math.IsNaN(float64(g)) || math.Abs(float64(g)-want[i]) > 0.02*math.Abs(want[i])+1e-9 {
				t.Fatalf("out[%d] = %g, want %g", i, g, want[i])
			}
		}
	})
}

// TestNaiveRMSNormOverflows is why RMSNorm scales its rows: the direct fp16
// program gives zeros for a row with values of a few hundred.
func TestNaiveRMSNormOverflows(t *testing.T) {
	d := 8
	b := newBuilder()
	x := b.toF16(b.input(0, 1, d))
	axes := b.konst("axes", &Tensor{Type: TensorType{DType: Int32, Shape: []int64{1}}, I32: []int32{-1}})
	keep := b.konst("keep", &Tensor{Type: TensorType{DType: Bool}, Bool: []bool{true}})
	x2 := b.op("mul", "x2", f16(1, d), Arg{"x", x}, Arg{"y", x})
	ms := b.op("reduce_mean", "ms", f16(1, 1), Arg{"x", x2}, Arg{"axes", axes}, Arg{"keep_dims", keep})
	r := b.op("rsqrt", "r", f16(1, 1), Arg{"x", ms}, Arg{"epsilon", b.scalar("e", 1e-5)})
	naive := b.finish(b.op("mul", "o", f16(1, d), Arg{"x", x}, Arg{"y", r}), 1, d)
	in := []float32{300, -200, 100, 50, 0, 1, 2, 3}
	if got := evalOne(t, naive, in); got[0] != 0 {
		t.Fatalf("naive fp16 rms_norm gave %g for 300: the overflow this test documents is gone", got[0])
	}
	ones := make([]uint16, d)
	for i := range ones {
		ones[i] = 0x3c00
	}
	m, _ := RMSNorm(1, d, ones, 1e-5)
	got := evalOne(t, m, in)
	want := rmsWant(in, ones, 1e-5)
	if math.Abs(float64(got[0])-want[0]) > 8*u16*math.Abs(want[0]) {
		t.Fatalf("rms_norm gave %g for 300, want %g", got[0], want[0])
	}
}

func TestEvalRejects(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(m *Model)
		want   string
	}{
		{"declared shape", func(m *Model) { m.Main.Ops[len(m.Main.Ops)-3].Outputs[0].Type.Shape[1] = 3 }, "declared"},
		{"unknown op", func(m *Model) { m.Main.Ops[len(m.Main.Ops)-3].Type = "gelu" }, `"gelu" is not one`},
		{"missing input", func(m *Model) {
			op := &m.Main.Ops[len(m.Main.Ops)-3]
			op.Inputs = op.Inputs[:1]
		}, "inputs, want"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, _ := Add(1, 2)
			c.mutate(m)
			_, err := Eval(m, map[string][]float32{"in0": {1, 2}, "in1": {3, 4}})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	m, _ := Add(1, 2)
	if _, err := Eval(m, map[string][]float32{"in0": {1, 2}}); err == nil || !strings.Contains(err.Error(), `input "in1"`) {
		t.Fatalf("missing input: %v", err)
	}
}
