package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"hybrid/devices"
	"hybrid/devices/cpu"
	"hybrid/ops"
	"hybrid/quant"
)

// refRound16 is binary16 rounding written from its definition, apart from
// quant's bit manipulation: the value's ulp in binary16 (2^(e-10) for a
// leading bit 2^e, never below the subnormal ulp 2^-24), the quotient rounded
// to nearest even in float64 (exact: a float32 over a power of two), and
// anything past the largest finite value 65504 after rounding is infinity.
func refRound16(x float32) float32 {
	f := float64(x)
	if math.IsNaN(f) || math.IsInf(f, 0) || f == 0 {
		return x
	}
	a := math.Abs(f)
	_, exp := math.Frexp(a) // a = frac · 2^exp, frac in [0.5, 1)
	e := max(exp-1, -14)
	ulp := math.Ldexp(1, e-10)
	q := math.RoundToEven(a/ulp) * ulp
	if q > 65504 {
		q = math.Inf(1)
	}
	return float32(math.Copysign(q, f))
}

// refF16Bits encodes a value that binary16 holds exactly, by its definition.
func refF16Bits(t *testing.T, v float32) uint16 {
	t.Helper()
	f := float64(v)
	var sign uint16
	if math.Signbit(f) {
		sign = 0x8000
	}
	a := math.Abs(f)
	var h uint16
	switch {
	case math.IsInf(a, 1):
		h = 0x7c00
	case a < math.Ldexp(1, -14): // subnormal or zero: a = m · 2^-24
		h = uint16(a * (1 << 24))
	default:
		_, exp := math.Frexp(a)
		e := exp - 1
		m := a/math.Ldexp(1, e) - 1 // in [0, 1)
		h = uint16(e+15)<<10 | uint16(m*1024)
	}
	if back := quant.F16ToF32(sign | h); back != v {
		t.Fatalf("%g is not a binary16 value (encoded %#04x, which is %g)", v, sign|h, back)
	}
	return sign | h
}

func TestRound16MatchesDefinition(t *testing.T) {
	inf := float32(math.Inf(1))
	cases := []struct {
		in, want float32
	}{
		{0, 0},
		{1, 1},
		{1 + 1.0/2048, 1},            // a tie below an even mantissa: down
		{1 + 3.0/2048, 1 + 2.0/1024}, // a tie below an odd one: up
		{65504, 65504},               // the largest finite value
		{65519.99, 65504},            // just under the halfway point
		{65520, inf},                 // halfway to 2^16 rounds to even: overflow
		{-65520, -inf},               //
		{1e30, inf},                  //
		{0x1p-24, 0x1p-24},           // the smallest subnormal
		{0x1p-25, 0},                 // a tie with zero: even is zero
		{0x1.8p-25, 0x1p-24},         // above the tie
		{0x1.8p-24, 0x1p-23},         // a tie between subnormals 1 and 2: even (2)
		{0x1p-14 - 0x1p-25, 0x1p-14}, // rounds up out of the subnormals
		{-0x1p-26, float32(math.Copysign(0, -1))},
		{float32(math.SmallestNonzeroFloat32), 0}, // a float32 subnormal
	}
	for _, c := range cases {
		x := []float32{c.in}
		round16(x)
		if math.Float32bits(x[0]) != math.Float32bits(c.want) {
			t.Errorf("round16(%g) = %g, want %g", c.in, x[0], c.want)
		}
		if r := refRound16(c.in); math.Float32bits(r) != math.Float32bits(c.want) {
			t.Errorf("refRound16(%g) = %g, want %g: the reference is wrong", c.in, r, c.want)
		}
	}
	nan := []float32{float32(math.NaN())}
	if round16(nan); !math.IsNaN(float64(nan[0])) {
		t.Errorf("NaN rounds to %g", nan[0])
	}
	// Random values of every magnitude that binary16 covers and beyond, and
	// random bit patterns.
	r := rand.New(rand.NewPCG(3, 4))
	xs := make([]float32, 0, 400000)
	for range 200000 {
		xs = append(xs, float32(math.Ldexp(1+r.Float64(), r.IntN(50)-30)*float64(1-2*r.IntN(2))))
		xs = append(xs, math.Float32frombits(r.Uint32()))
	}
	got := slices.Clone(xs)
	round16(got)
	for i, x := range xs {
		want := refRound16(x)
		if math.IsNaN(float64(x)) {
			if !math.IsNaN(float64(got[i])) {
				t.Fatalf("round16(NaN %#x) = %g", math.Float32bits(x), got[i])
			}
			continue
		}
		if math.Float32bits(got[i]) != math.Float32bits(want) {
			t.Fatalf("round16(%g) = %g, want %g", x, got[i], want)
		}
	}
}

// TestFP16DeviceRoundsAtTheBoundary runs every op kind on a simulated fp16
// device and checks it, bit for bit, against the CPU device given what the
// test rounds itself (refRound16): the inputs, the weights' dequantized
// values stored as binary16, and the output. The same ops on the plain CPU
// must differ somewhere (else the rounding did nothing), and the device must
// leave its input buffers as they were.
func TestFP16DeviceRoundsAtTheBoundary(t *testing.T) {
	spec := &Spec{Name: "ane", Kind: "coreml", MemoryGB: 1, BandwidthGBs: 60, TFLOPS: 19, LaunchUS: 150, FP16: true,
		Efficiency: map[ops.Kind]float64{}, Unsupported: map[ops.Kind]bool{}}
	sd := New(spec, &Hardware{Name: "h", Devices: []*Spec{spec}}, 2)
	ref := cpu.New("ref", 2)   // the CPU on what the test rounded
	plain := cpu.New("cpu", 2) // the CPU on the unrounded data
	defer sd.Close()
	defer ref.Close()
	defer plain.Close()
	if p := sd.Info().Precision; p != "f16" {
		t.Fatalf("an fp16 device's precision is %q, want f16", p)
	}

	r := rand.New(rand.NewPCG(5, 6))
	randVec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	const d, ff, vocab, n = 64, 96, 40, 3
	var weightElems int64
	for _, x := range []struct {
		name      string
		typ       quant.Type
		rows, col int
	}{{"embd", quant.Q8_0, vocab, d}, {"norm", quant.F32, 1, d}, {"q8", quant.Q8_0, ff, d}, {"q4", quant.Q4_0, d, ff},
		{"k4", quant.Q4_K, 8, 256}, {"f32", quant.F32, 5, d}} {
		rb, err := quant.RowBytes(x.typ, x.col)
		if err != nil {
			t.Fatal(err)
		}
		raw := make([]byte, rb*x.rows)
		vals := randVec(x.rows * x.col)
		if x.name == "f32" {
			vals[0], vals[1] = 70000, 1e-6 // overflows; rounds to a subnormal
		}
		if err := quant.Quantize(x.typ, vals, raw); err != nil {
			t.Fatal(err)
		}
		w := &ops.Weight{Name: x.name, Type: x.typ, Rows: x.rows, Cols: x.col}
		if err := sd.LoadWeight(w, raw); err != nil {
			t.Fatal(err)
		}
		if err := plain.LoadWeight(w, raw); err != nil {
			t.Fatal(err)
		}
		// The reference's weight: dequantized, rounded and encoded here.
		deq := make([]float32, x.rows*x.col)
		if err := quant.Dequantize(x.typ, raw, deq); err != nil {
			t.Fatal(err)
		}
		h := make([]byte, 2*len(deq))
		for i, v := range deq {
			b := refF16Bits(t, refRound16(v))
			h[2*i], h[2*i+1] = byte(b), byte(b>>8)
		}
		if err := ref.LoadWeight(&ops.Weight{Name: x.name, Type: quant.F16, Rows: x.rows, Cols: x.col}, h); err != nil {
			t.Fatal(err)
		}
		weightElems += int64(x.rows * x.col)
	}
	// Weights are held at 2 bytes an element (one-row ones also as f32, as
	// the CPU device keeps norm vectors).
	if got, want := sd.MemoryUsed(), ref.MemoryUsed(); got != want || got < 2*weightElems {
		t.Errorf("fp16 device holds %d bytes, the reference %d, want both >= %d", got, want, 2*weightElems)
	}

	attn := ops.AttnParams{Heads: 4, KVHeads: 2, HeadDim: 16, Context: 8}
	tokens := []int32{3, 17, 39}
	x, g, u, k := randVec(n*d), randVec(n*ff), randVec(n*ff), randVec(n*attn.KVHeads*attn.HeadDim)
	x[5], x[6], g[7] = 1e5, 3e-8, -7e4 // overflow and a subnormal on the way in
	type step struct {
		op  *ops.Op
		out int
		in  [][]float32
		st  ops.Step
	}
	full, one := ops.Step{Tokens: tokens, Pos: 2}, ops.Step{Tokens: tokens[:1], Pos: 5}
	steps := []step{
		{&ops.Op{Kind: ops.Embed, Name: "embed", Weight: &ops.Weight{Name: "embd", Type: quant.Q8_0, Rows: vocab, Cols: d}}, n * d, nil, full},
		{&ops.Op{Kind: ops.RMSNorm, Name: "norm", Weight: &ops.Weight{Name: "norm", Type: quant.F32, Rows: 1, Cols: d}, Eps: 1e-5}, n * d, [][]float32{x}, full},
		{&ops.Op{Kind: ops.MatMul, Name: "up", Weight: &ops.Weight{Name: "q8", Type: quant.Q8_0, Rows: ff, Cols: d}}, n * ff, [][]float32{x}, full},
		{&ops.Op{Kind: ops.MatMul, Name: "down", Weight: &ops.Weight{Name: "q4", Type: quant.Q4_0, Rows: d, Cols: ff}}, n * d, [][]float32{g}, full},
		{&ops.Op{Kind: ops.MatMul, Name: "down1", Weight: &ops.Weight{Name: "q4", Type: quant.Q4_0, Rows: d, Cols: ff}}, d, [][]float32{g[:ff]}, one},
		{&ops.Op{Kind: ops.MatMul, Name: "k4", Weight: &ops.Weight{Name: "k4", Type: quant.Q4_K, Rows: 8, Cols: 256}}, 8, [][]float32{randVec(256)}, one},
		{&ops.Op{Kind: ops.MatMul, Name: "f32", Weight: &ops.Weight{Name: "f32", Type: quant.F32, Rows: 5, Cols: d}}, n * 5, [][]float32{x}, full},
		{&ops.Op{Kind: ops.RoPE, Name: "rope", Rope: ops.RopeParams{HeadDim: 16, Dims: 16, Base: 10000}}, n * d, [][]float32{x}, full},
		{&ops.Op{Kind: ops.Attention, Name: "attn", Attn: attn}, n * d, [][]float32{x, k, k}, full},
		{&ops.Op{Kind: ops.SiLUMul, Name: "silu"}, n * ff, [][]float32{g, u}, full},
		{&ops.Op{Kind: ops.Add, Name: "add"}, n * ff, [][]float32{g, u}, full},
		{&ops.Op{Kind: ops.LastRow, Name: "last"}, d, [][]float32{x}, full},
	}
	run := func(dev devices.Device, s step, round func([]float32) []float32) []float32 {
		t.Helper()
		var bufs []devices.Buffer
		for _, in := range s.in {
			b, err := dev.Alloc(len(in))
			if err != nil {
				t.Fatal(err)
			}
			if err := dev.Write(b, round(in)); err != nil {
				t.Fatal(err)
			}
			bufs = append(bufs, b)
		}
		ob, err := dev.Alloc(s.out)
		if err != nil {
			t.Fatal(err)
		}
		if err := dev.Run(s.op, s.st, bufs, ob); err != nil {
			t.Fatalf("%s: %s: %v", dev.Name(), s.op, err)
		}
		y := make([]float32, s.out)
		if err := dev.Read(y, ob); err != nil {
			t.Fatal(err)
		}
		for i, b := range bufs { // the inputs are left as written
			back := make([]float32, b.Len())
			if err := dev.Read(back, b); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(back, round(s.in[i])) {
				t.Fatalf("%s: %s changed its input %d", dev.Name(), s.op, i)
			}
		}
		return y
	}
	same := func(x []float32) []float32 { return x }
	rounded := func(x []float32) []float32 {
		y := make([]float32, len(x))
		for i, v := range x {
			y[i] = refRound16(v)
		}
		return y
	}
	differs := map[ops.Kind]bool{}
	for _, s := range steps {
		got := run(sd, s, same)
		want := rounded(run(ref, s, rounded))
		for j := range want {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
				t.Fatalf("%s output %d: fp16 device %g, CPU on rounded data %g", s.op, j, got[j], want[j])
			}
		}
		if !slices.ContainsFunc(want, func(v float32) bool { return v != 0 && !math.IsInf(float64(v), 0) }) {
			t.Fatalf("%s: no finite non-zero output, which proves nothing", s.op)
		}
		exact := run(plain, s, same)
		if !slices.Equal(got, exact) {
			differs[s.op.Kind] = true
		}
	}
	for _, k := range []ops.Kind{ops.Embed, ops.RMSNorm, ops.MatMul, ops.RoPE, ops.Attention, ops.SiLUMul, ops.Add, ops.LastRow} {
		if !differs[k] {
			t.Errorf("%s on the fp16 device equals the f32 CPU's output: nothing was rounded", k)
		}
	}
}

func TestPrecisionAndConversions(t *testing.T) {
	hw, err := LoadHardware("m4-pro")
	if err != nil {
		t.Fatal(err)
	}
	for _, dev := range Open(hw, 1) {
		want := ""
		if dev.Info().Kind == "coreml" {
			want = "f16" // m4-pro.yaml: fp16: true
		}
		if got := dev.Info().Precision; got != want {
			t.Errorf("%s: precision %q, want %q", dev.Name(), got, want)
		}
		dev.Close()
	}
	for _, c := range []Conversions{Boundary, PerOp} {
		got, err := ParseConversions(c.String())
		if err != nil || got != c {
			t.Errorf("ParseConversions(%q) = %v, %v", c, got, err)
		}
	}
	if _, err := ParseConversions("per_op"); err == nil || !strings.Contains(err.Error(), "boundary or per-op") {
		t.Errorf("a bad mode: %v", err)
	}
	// Per-op conversions cost the Neural Engine's silu·mul its conversion
	// passes and change nothing else.
	ane, _ := hw.Spec("coreml")
	gpu, _ := hw.Spec("metal")
	silu := &ops.Op{Kind: ops.SiLUMul, Cost: ops.Cost{FLOPs: 5632 * 6, BytesRead: 2 * 4 * 5632, BytesWritten: 4 * 5632}}
	aneB, gpuB := ane.OpTime(silu), gpu.OpTime(silu)
	hw.SetConversions(PerOp)
	if got, want := ane.OpTime(silu), aneB+ane.ConvertTime(silu); got != want || ane.ConvertTime(silu) <= 0 {
		t.Errorf("per-op silu·mul on the Neural Engine: %v, want %v + %v", got, aneB, ane.ConvertTime(silu))
	}
	if got := gpu.OpTime(silu); got != gpuB {
		t.Errorf("per-op conversions changed the f32 GPU's time: %v, was %v", got, gpuB)
	}
	if d := New(ane, hw, 1); !strings.Contains(d.Info().Detail, "fp16 with per-op conversions") {
		t.Errorf("detail %q does not say per-op", d.Info().Detail)
	}
}
