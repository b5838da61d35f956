package coreml

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"hybrid/devices"
	"hybrid/devices/coreml/mlmodel"
	"hybrid/devices/cpu"
	"hybrid/ops"
	"hybrid/quant"
)

func randVec(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return v
}

// quantized returns the bytes of x as a rows×cols weight of type t.
func quantized(t *testing.T, typ quant.Type, x []float32, rows, cols int) []byte {
	t.Helper()
	rb, err := quant.RowBytes(typ, cols)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, rb*rows)
	if err := quant.Quantize(typ, x, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// runCPU runs op on the CPU device, the oracle.
func runCPU(t *testing.T, op *ops.Op, wdata []byte, st ops.Step, outLen int, ins ...[]float32) []float32 {
	t.Helper()
	d := cpu.New("cpu", 1)
	defer d.Close()
	if op.Weight != nil {
		if err := d.LoadWeight(op.Weight, wdata); err != nil {
			t.Fatal(err)
		}
	}
	var bufs []devices.Buffer
	for _, x := range ins {
		b, _ := d.Alloc(len(x))
		if err := d.Write(b, x); err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
	}
	ob, _ := d.Alloc(outLen)
	if err := d.Run(op, st, bufs, ob); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, outLen)
	if err := d.Read(out, ob); err != nil {
		t.Fatal(err)
	}
	return out
}

// runModel builds op's model the way the darwin device does (shape from the
// buffer lengths, fp16 weights), encodes it, decodes the bytes and evaluates
// them: what CoreML would be handed, run by the reference evaluator.
func runModel(t *testing.T, op *ops.Op, wdata []byte, st ops.Step, outLen int, ins ...[]float32) []float32 {
	t.Helper()
	var w *weight
	if op.Weight != nil {
		var err error
		if w, err = newWeight(op.Weight, wdata); err != nil {
			t.Fatal(err)
		}
	}
	s, err := opShape(op, len(ins[0]), outLen, len(st.Tokens))
	if err != nil {
		t.Fatal(err)
	}
	m, err := buildModel(op, s, w)
	if err != nil {
		t.Fatal(err)
	}
	b, err := mlmodel.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := mlmodel.Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	feed := map[string][]float32{}
	for i, x := range ins {
		feed[mlmodel.Input(i)] = x
	}
	out, err := mlmodel.Eval(dec, feed)
	if err != nil {
		t.Fatal(err)
	}
	return out[mlmodel.OutputName]
}

// u16 is fp16's unit roundoff: one rounding is at most 2^-11 relative.
const u16 = 0x1p-11

// compare checks got (the model) against want (the CPU) element by element
// within bound(i), and logs the largest error relative to scale(i).
func compare(t *testing.T, what string, got, want []float32, bound, scale func(i int) float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst, worstBound := 0.0, 0.0
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if !(d <= bound(i)) {
			t.Fatalf("%s[%d] = %g, CPU %g: off by %g, bound %g", what, i, got[i], want[i], d, bound(i))
		}
		worst = max(worst, d/scale(i))
		worstBound = max(worstBound, d/bound(i))
	}
	t.Logf("%s: max |model−cpu| = %.3g of the element's scale (%.0f%% of the bound)", what, worst, 100*worstBound)
}

// TestMatMulMatchesCPU checks the MatMul model, evaluated in fp16, against
// the CPU device for each weight type. The bound adds the two sides' errors
// from the exact product: the model rounds x and w to fp16 and the sum once
// (2^-11 of Σ|x·w| twice, 2^-11 of the result); the CPU computes in f32 but,
// for the quantized types, first quantizes x to 8-bit blocks as llama.cpp
// does (half a step of amax/127 per element of each block of 32, or 256 for
// the K-quants, times the weights it multiplies), and for BF16 weights rounds
// x to bfloat16 (2^-9 of Σ|x·w|). The scale logged is Σ|x·w|.
func TestMatMulMatchesCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	n, k, m := 3, 512, 24
	for _, typ := range []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q8_0, quant.Q4_0, quant.Q5_1, quant.Q4_K, quant.Q6_K} {
		t.Run(typ.String(), func(t *testing.T) {
			wdata := quantized(t, typ, randVec(r, m*k, 0.05), m, k)
			x := randVec(r, n*k, 1)
			op := &ops.Op{Kind: ops.MatMul, Name: "blk.0.ffn_up", Weight: &ops.Weight{Name: "w", Type: typ, Rows: m, Cols: k}}
			st := ops.Step{Tokens: make([]int32, n)}
			want := runCPU(t, op, wdata, st, n*m, x)
			got := runModel(t, op, wdata, st, n*m, x)

			wf := make([]float32, m*k)
			if err := quant.Dequantize(typ, wdata, wf); err != nil {
				t.Fatal(err)
			}
			block := map[quant.Type]int{quant.Q8_0: 32, quant.Q4_0: 32, quant.Q5_1: 32, quant.Q4_K: 256, quant.Q6_K: 256}[typ]
			mag := make([]float64, n*m)   // Σ|x·w|
			q8 := make([]float64, n*m)    // the CPU's activation quantization bound
			exact := make([]float64, n*m) // Σ x·w
			for i := 0; i < n; i++ {
				for j := 0; j < m; j++ {
					o := i*m + j
					for e := 0; e < k; e++ {
						p := float64(x[i*k+e]) * float64(wf[j*k+e])
						exact[o] += p
						mag[o] += math.Abs(p)
					}
					for b := 0; block > 0 && b < k; b += block {
						amax, wsum := 0.0, 0.0
						for e := b; e < b+block; e++ {
							amax = max(amax, math.Abs(float64(x[i*k+e])))
							wsum += math.Abs(float64(wf[j*k+e]))
						}
						q8[o] += amax / 127 / 2 * wsum
					}
				}
			}
			xRound := 0.0 // the CPU's rounding of x to the weight's precision
			if typ == quant.BF16 {
				xRound = 0x1p-9
			}
			bound := func(i int) float64 {
				// f32 sums of k terms on the CPU: k·2^-24 of Σ|x·w|.
				return (2*u16+xRound)*mag[i] + u16*math.Abs(exact[i]) + q8[i]*1.01 + float64(k)*0x1p-24*mag[i]
			}
			compare(t, "mat_mul "+typ.String(), got, want, bound, func(i int) float64 { return mag[i] })
		})
	}
}

// TestRMSNormMatchesCPU checks the norm's model over whole rows and per
// head (heads > 0: rows of heads·d features, each head normalised on its
// own, as Qwen3's Q and K norms; the model is the whole-row one over
// tokens × heads rows of d).
func TestRMSNormMatchesCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	n := 4
	for _, c := range []struct {
		name     string
		typ      quant.Type
		scale    float64
		d, heads int
	}{
		{"f32 weight", quant.F32, 1, 256, 0},
		{"f16 weight", quant.F16, 1, 256, 0},
		// Residual-stream magnitudes, where x² overflows fp16.
		{"large rows", quant.F32, 2000, 256, 0},
		{"per-head f32 weight", quant.F32, 1, 128, 4},
		{"per-head bf16 weight", quant.BF16, 1, 64, 3},
		// Projections' outputs of Qwen models reach the hundreds.
		{"per-head large", quant.F32, 500, 128, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := c.d
			w := randVec(r, d, 0.5)
			wdata := quantized(t, c.typ, w, 1, d)
			wf := make([]float32, d)
			quant.Dequantize(c.typ, wdata, wf)
			x := randVec(r, n*max(c.heads, 1)*d, c.scale)
			op := &ops.Op{Kind: ops.RMSNorm, Name: "blk.0.attn_norm", Eps: 1e-5, PerHead: c.heads > 0, Weight: &ops.Weight{Name: "w", Type: c.typ, Rows: 1, Cols: d}}
			st := ops.Step{Tokens: make([]int32, n)}
			want := runCPU(t, op, wdata, st, len(x), x)
			got := runModel(t, op, wdata, st, len(x), x)
			// Ten fp16 roundings from input to output (x, w, y, y², the
			// mean, the eps term, their sum, rsqrt, two products), each
			// 2^-11 of its value; the floor 2^-11·|w| covers outputs near 0.
			bound := func(i int) float64 {
				return 10*u16*math.Abs(float64(want[i])) + u16*math.Abs(float64(wf[i%d]))
			}
			compare(t, "rms_norm "+c.name, got, want, bound, func(i int) float64 { return math.Abs(float64(want[i])) + 1e-30 })
		})
	}
}

// TestAddBiasMatchesCPU checks the bias model for biases stored in f32,
// f16 and bf16. The model rounds x and the bias to fp16 (2^-11 of each) and
// the sum once (2^-11 of it); the CPU adds in f32 (2^-24 of the sum).
func TestAddBiasMatchesCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 12))
	n, d := 3, 200
	for _, typ := range []quant.Type{quant.F32, quant.F16, quant.BF16} {
		t.Run(typ.String(), func(t *testing.T) {
			b := randVec(r, d, 1)
			wdata := quantized(t, typ, b, 1, d)
			bf := make([]float32, d)
			quant.Dequantize(typ, wdata, bf)
			x := randVec(r, n*d, 4)
			op := &ops.Op{Kind: ops.AddBias, Name: "blk.0.attn_q_bias", Weight: &ops.Weight{Name: "blk.0.attn_q.bias", Type: typ, Rows: 1, Cols: d}}
			st := ops.Step{Tokens: make([]int32, n)}
			want := runCPU(t, op, wdata, st, n*d, x)
			got := runModel(t, op, wdata, st, n*d, x)
			mag := func(i int) float64 { return math.Abs(float64(x[i])) + math.Abs(float64(bf[i%d])) }
			compare(t, "add_bias "+typ.String(), got, want, func(i int) float64 {
				return u16*mag(i) + (u16+0x1p-24)*math.Abs(float64(want[i]))
			}, mag)
		})
	}
}

func TestElementwiseMatchesCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	n, d := 3, 200
	a, b := randVec(r, n*d, 2), randVec(r, n*d, 2)
	st := ops.Step{Tokens: make([]int32, n)}

	add := &ops.Op{Kind: ops.Add, Name: "blk.0.ffn_residual"}
	want := runCPU(t, add, nil, st, n*d, a, b)
	got := runModel(t, add, nil, st, n*d, a, b)
	// a and b are rounded to fp16, then the sum: 2^-11 of |a|+|b| each.
	compare(t, "add", got, want, func(i int) float64 {
		return 2 * u16 * (math.Abs(float64(a[i])) + math.Abs(float64(b[i])))
	}, func(i int) float64 { return math.Abs(float64(a[i])) + math.Abs(float64(b[i])) })

	sm := &ops.Op{Kind: ops.SiLUMul, Name: "blk.0.ffn_silu"}
	want = runCPU(t, sm, nil, st, n*d, a, b)
	got = runModel(t, sm, nil, st, n*d, a, b)
	// Four roundings (gate, up, silu, product), 2^-11 each, plus the CPU's
	// expf approximation (a few f32 ulps); 2^-24·|up| covers fp16's
	// underflow of tiny results.
	compare(t, "silu_mul", got, want, func(i int) float64 {
		return 5*u16*math.Abs(float64(want[i])) + 0x1p-24*math.Abs(float64(b[i]))
	}, func(i int) float64 { return math.Abs(float64(want[i])) + 1e-30 })
}

func TestSupports(t *testing.T) {
	w := &ops.Weight{Name: "w", Type: quant.Q4_0, Rows: 4, Cols: 32}
	for _, op := range []*ops.Op{
		{Kind: ops.MatMul, Name: "mm", Weight: w},
		{Kind: ops.RMSNorm, Name: "norm", Weight: &ops.Weight{Name: "n", Type: quant.F32, Rows: 1, Cols: 32}},
		{Kind: ops.RMSNorm, Name: "q_norm", PerHead: true, Weight: &ops.Weight{Name: "qn", Type: quant.F32, Rows: 1, Cols: 128}},
		{Kind: ops.AddBias, Name: "q_bias", Weight: &ops.Weight{Name: "qb", Type: quant.BF16, Rows: 1, Cols: 896}},
		{Kind: ops.SiLUMul, Name: "silu"},
		{Kind: ops.Add, Name: "add"},
	} {
		if err := supports(op); err != nil {
			t.Errorf("%s: %v", op, err)
		}
	}
	for _, c := range []struct {
		op   *ops.Op
		want string
	}{
		{&ops.Op{Kind: ops.Embed, Name: "token_embd", Weight: w}, "token_embd (embed)"},
		{&ops.Op{Kind: ops.RoPE, Name: "blk.0.rope_q"}, "position"},
		{&ops.Op{Kind: ops.RoPE, Name: "blk.0.rope_k", Rope: ops.RopeParams{HeadDim: 64, Dims: 64, Base: 1e6, Neox: true}}, "position"},
		{&ops.Op{Kind: ops.AddBias, Name: "wide_bias", Weight: &ops.Weight{Name: "b", Type: quant.F32, Rows: 2, Cols: 8}}, "2×8"},
		{&ops.Op{Kind: ops.AddBias, Name: "no_bias"}, "no weight"},
		{&ops.Op{Kind: ops.Attention, Name: "blk.0.attn"}, "KV cache"},
		{&ops.Op{Kind: ops.LastRow, Name: "last"}, "last (last_row)"},
		{&ops.Op{Kind: ops.MatMul, Name: "mm2", Weight: &ops.Weight{Name: "w", Type: quant.Q8_K, Rows: 1, Cols: 256}}, "Q8_K"},
	} {
		err := supports(c.op)
		if err == nil || !errors.Is(err, devices.ErrUnsupported) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want ErrUnsupported naming %q", c.op, err, c.want)
		}
	}
}

// TestWeightF16 checks the load-time conversion: dequantized values rounded
// to nearest binary16, ties to even, overflow to infinity.
func TestWeightF16(t *testing.T) {
	vals := []float32{1, 1 + 0x1p-11, 1 + 3*0x1p-11, 65504, 65520, 1e-8, -2.5, 0x1p-24}
	want := []uint16{0x3c00, 0x3c00, 0x3c02, 0x7bff, 0x7c00, 0x0000, 0xc100, 0x0001}
	wdata := quantized(t, quant.F32, vals, 1, len(vals))
	w, err := newWeight(&ops.Weight{Name: "w", Type: quant.F32, Rows: 1, Cols: len(vals)}, wdata)
	if err != nil {
		t.Fatal(err)
	}
	got, err := w.f16()
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%g → %#04x, want %#04x", vals[i], got[i], want[i])
		}
	}
	// A quantized weight: every element is the fp16 rounding of its
	// dequantized value.
	r := rand.New(rand.NewPCG(10, 10))
	q := quantized(t, quant.Q4_K, randVec(r, 2*256, 1), 2, 256)
	w, _ = newWeight(&ops.Weight{Name: "q", Type: quant.Q4_K, Rows: 2, Cols: 256}, q)
	got, _ = w.f16()
	deq := make([]float32, 512)
	quant.Dequantize(quant.Q4_K, q, deq)
	for i, v := range deq {
		if got[i] != quant.F32ToF16(v) {
			t.Fatalf("Q4_K element %d: %#04x, want %#04x", i, got[i], quant.F32ToF16(v))
		}
	}
	if _, err := newWeight(&ops.Weight{Name: "short", Type: quant.Q4_0, Rows: 2, Cols: 32}, make([]byte, 35)); err == nil || !strings.Contains(err.Error(), "short") {
		t.Fatalf("a weight of the wrong size: %v", err)
	}
}

// TestModelKey checks that the cache key changes with everything that
// changes the model (shape, epsilon, weight bytes and type) and nothing else.
func TestModelKey(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	data := quantized(t, quant.Q8_0, randVec(r, 4*64, 1), 4, 64)
	wt := &ops.Weight{Name: "blk.0.ffn_up", Type: quant.Q8_0, Rows: 4, Cols: 64}
	w, _ := newWeight(wt, data)
	op := &ops.Op{Kind: ops.MatMul, Name: "blk.0.ffn_up", Weight: wt}
	s := shape{Kind: ops.MatMul, Rows: 2, Cols: 64, Out: 4}
	base := modelKey(op, s, w)
	if !strings.HasPrefix(base, "mat_mul-2x64x4-") {
		t.Fatalf("key %q does not start with the kind and shape", base)
	}
	// Same weight bytes under another name and op: same model, same key.
	wt2 := *wt
	wt2.Name = "blk.1.ffn_up"
	w2, _ := newWeight(&wt2, append([]byte(nil), data...))
	if k := modelKey(&ops.Op{Kind: ops.MatMul, Name: "blk.1.ffn_up", Weight: &wt2}, s, w2); k != base {
		t.Errorf("equal models, keys %q and %q", base, k)
	}
	flipped := append([]byte(nil), data...)
	flipped[len(flipped)-1] ^= 1
	wf, _ := newWeight(wt, flipped)
	s3 := s
	s3.Rows = 3
	norm := &ops.Op{Kind: ops.RMSNorm, Name: "n", Eps: 1e-5, Weight: &ops.Weight{Name: "n", Type: quant.F32, Rows: 1, Cols: 4}}
	nw, _ := newWeight(norm.Weight, make([]byte, 16))
	norm2 := *norm
	norm2.Eps = 1e-6
	ns := shape{Kind: ops.RMSNorm, Rows: 1, Cols: 4}
	keys := map[string]string{
		"base":         base,
		"weight bit":   modelKey(op, s, wf),
		"rows":         modelKey(op, s3, w),
		"norm":         modelKey(norm, ns, nw),
		"norm eps":     modelKey(&norm2, ns, nw),
		"add 1x8":      modelKey(&ops.Op{Kind: ops.Add}, shape{Kind: ops.Add, Rows: 1, Cols: 8}, nil),
		"add 2x4":      modelKey(&ops.Op{Kind: ops.Add}, shape{Kind: ops.Add, Rows: 2, Cols: 4}, nil),
		"silu_mul 1x8": modelKey(&ops.Op{Kind: ops.SiLUMul}, shape{Kind: ops.SiLUMul, Rows: 1, Cols: 8}, nil),
		// A bias of the norm's bytes: another program, another key.
		"bias": modelKey(&ops.Op{Kind: ops.AddBias, Weight: norm.Weight}, shape{Kind: ops.AddBias, Rows: 1, Cols: 4}, nw),
	}
	seen := map[string]string{}
	for name, k := range keys {
		if other, dup := seen[k]; dup {
			t.Errorf("%s and %s share the key %q", name, other, k)
		}
		seen[k] = name
	}
}

func TestOpShape(t *testing.T) {
	mm := &ops.Op{Kind: ops.MatMul, Name: "mm", Weight: &ops.Weight{Name: "w", Type: quant.F16, Rows: 6, Cols: 4}}
	if s, err := opShape(mm, 12, 18, 3); err != nil || s != (shape{Kind: ops.MatMul, Rows: 3, Cols: 4, Out: 6}) {
		t.Errorf("mat_mul: %+v, %v", s, err)
	}
	if _, err := opShape(mm, 12, 17, 3); err == nil || !strings.Contains(err.Error(), "mm (mat_mul)") {
		t.Errorf("mat_mul with a short output: %v", err)
	}
	add := &ops.Op{Kind: ops.Add, Name: "add"}
	if s, err := opShape(add, 12, 12, 3); err != nil || s.Rows != 3 || s.Cols != 4 {
		t.Errorf("add: %+v, %v", s, err)
	}
	// After LastRow the step still has 3 tokens but the value one row.
	if s, err := opShape(add, 8, 8, 3); err != nil || s.Rows != 1 || s.Cols != 8 {
		t.Errorf("add of one row: %+v, %v", s, err)
	}
	// A per-head norm of 2 tokens × 3 heads of 4: 6 rows of one head.
	qn := &ops.Op{Kind: ops.RMSNorm, Name: "q_norm", PerHead: true, Weight: &ops.Weight{Name: "qn", Type: quant.F32, Rows: 1, Cols: 4}}
	if s, err := opShape(qn, 24, 24, 2); err != nil || s != (shape{Kind: ops.RMSNorm, Rows: 6, Cols: 4}) {
		t.Errorf("per-head rms_norm: %+v, %v", s, err)
	}
	bias := &ops.Op{Kind: ops.AddBias, Name: "bias", Weight: &ops.Weight{Name: "b", Type: quant.F32, Rows: 1, Cols: 6}}
	if s, err := opShape(bias, 18, 18, 3); err != nil || s != (shape{Kind: ops.AddBias, Rows: 3, Cols: 6}) {
		t.Errorf("add_bias: %+v, %v", s, err)
	}
	if _, err := opShape(bias, 16, 16, 3); err == nil || !strings.Contains(err.Error(), "bias (add_bias)") {
		t.Errorf("add_bias of rows that are not the bias's: %v", err)
	}
	if _, err := opShape(&ops.Op{Kind: ops.RoPE, Name: "rope"}, 8, 8, 1); err == nil {
		t.Error("rope got a shape")
	}
}
