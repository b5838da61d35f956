package cpu

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"hybrid/devices"
	"hybrid/devices/cpu/kernels"
	"hybrid/ops"
	"hybrid/quant"
)

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func run(t *testing.T, d *Device, op *ops.Op, st ops.Step, out int, ins ...[]float32) []float32 {
	t.Helper()
	var bufs []devices.Buffer
	for _, in := range ins {
		b, _ := d.Alloc(len(in))
		if err := d.Write(b, in); err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
	}
	ob, _ := d.Alloc(out)
	if err := d.Run(op, st, bufs, ob); err != nil {
		t.Fatal(err)
	}
	res := make([]float32, out)
	if err := d.Read(res, ob); err != nil {
		t.Fatal(err)
	}
	return res
}

func roundF16(x []float32) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = quant.F16ToF32(quant.F32ToF16(v))
	}
	return y
}

func closeTo(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i]) - want[i]); d > tol*(1+math.Abs(want[i])) || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s[%d] = %g, want %g (tolerance %g)", what, i, got[i], want[i], tol)
		}
	}
}

// The CPU device is the oracle, so its ops are checked against direct float64
// transcriptions of their definitions. f32 rounding over at most a few hundred
// terms stays well under 1e-5 relative.
const tol = 1e-5

func TestAttentionMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	d := New("cpu", 2)
	defer d.Close()
	a := ops.AttnParams{Heads: 4, KVHeads: 2, HeadDim: 8, Context: 16}
	op := &ops.Op{Kind: ops.Attention, Name: "attn", Layer: 0, Attn: a}
	qw, kw := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	var ks, vs [][]float32
	// A prefill of 3 tokens, then two decode steps.
	for _, n := range []int{3, 1, 1} {
		pos := len(ks)
		q, k, v := randVec(r, n*qw), randVec(r, n*kw), randVec(r, n*kw)
		// The cache holds keys and values as f16 and the query is rounded
		// to f16, as llama.cpp's does; the definition takes them so.
		q16, k16, v16 := roundF16(q), roundF16(k), roundF16(v)
		for i := 0; i < n; i++ {
			ks = append(ks, k16[i*kw:(i+1)*kw])
			vs = append(vs, v16[i*kw:(i+1)*kw])
		}
		got := run(t, d, op, ops.Step{Tokens: make([]int32, n), Pos: pos}, n*qw, q, k, v)
		want := make([]float64, n*qw)
		for i := 0; i < n; i++ {
			for h := 0; h < a.Heads; h++ {
				kh := h / (a.Heads / a.KVHeads)
				span := pos + i + 1
				s := make([]float64, span)
				var m float64 = math.Inf(-1)
				for j := 0; j < span; j++ {
					for e := 0; e < a.HeadDim; e++ {
						s[j] += float64(q16[i*qw+h*a.HeadDim+e]) * float64(ks[j][kh*a.HeadDim+e])
					}
					s[j] /= math.Sqrt(float64(a.HeadDim))
					m = math.Max(m, s[j])
				}
				var sum float64
				for j := range s {
					s[j] = math.Exp(s[j] - m)
					sum += s[j]
				}
				for j := range s {
					for e := 0; e < a.HeadDim; e++ {
						want[i*qw+h*a.HeadDim+e] += s[j] / sum * float64(vs[j][kh*a.HeadDim+e])
					}
				}
			}
		}
		// The output accumulates in f16 (2^-11 relative per step) over at
		// most 5 positions.
		closeTo(t, "attention", got, want, 5*0x1p-11)
	}
	if err := d.Run(op, ops.Step{Tokens: make([]int32, 20), Pos: 0}, nil, nil); err == nil {
		t.Fatal("a step past the context was accepted")
	}
}

func TestRoPEMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	d := New("cpu", 1)
	defer d.Close()
	p := ops.RopeParams{HeadDim: 16, Dims: 12, Base: 10000}
	op := &ops.Op{Kind: ops.RoPE, Name: "rope", Rope: p}
	n, width, pos := 3, 32, 5
	x := randVec(r, n*width)
	got := run(t, d, op, ops.Step{Tokens: make([]int32, n), Pos: pos}, n*width, x)
	want := make([]float64, len(x))
	for i := range x {
		want[i] = float64(x[i])
	}
	for row := 0; row < n; row++ {
		for h := 0; h < width; h += p.HeadDim {
			for j := 0; j < p.Dims/2; j++ {
				theta := float64(pos+row) * math.Pow(float64(p.Base), -2*float64(j)/float64(p.Dims))
				c, s := math.Cos(theta), math.Sin(theta)
				i := row*width + h + 2*j
				x0, x1 := float64(x[i]), float64(x[i+1])
				want[i], want[i+1] = x0*c-x1*s, x0*s+x1*c
			}
		}
	}
	// θ is stepped by repeated f32 multiplication (as llama.cpp does), which
	// drifts by a few ulps of θ per pair: 1e-4 covers positions up to ~100.
	closeTo(t, "rope", got, want, 1e-4)
}

// TestRoPEFreqsMatchesDefinition checks a rope with frequency factors (as
// Llama 3.1+ files carry) against θ_j = pos·base^(-2j/dims)/factor_j in
// float64, and that the factors divide the angle rather than compound.
func TestRoPEFreqsMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	d := New("cpu", 1)
	defer d.Close()
	// The factors of llama3 scaling: 1 for high frequencies, up to 32 for
	// low ones, with a smooth band between.
	freqs := []float32{1, 1, 1.5, 4, 17.25, 32}
	p := ops.RopeParams{HeadDim: 16, Dims: 12, Base: 500000, Freqs: freqs}
	op := &ops.Op{Kind: ops.RoPE, Name: "rope", Rope: p}
	n, width, pos := 3, 32, 40
	x := randVec(r, n*width)
	got := run(t, d, op, ops.Step{Tokens: make([]int32, n), Pos: pos}, n*width, x)
	want := make([]float64, len(x))
	for i := range x {
		want[i] = float64(x[i])
	}
	for row := 0; row < n; row++ {
		for h := 0; h < width; h += p.HeadDim {
			for j := 0; j < p.Dims/2; j++ {
				theta := float64(pos+row) * math.Pow(float64(p.Base), -2*float64(j)/float64(p.Dims)) / float64(freqs[j])
				c, s := math.Cos(theta), math.Sin(theta)
				i := row*width + h + 2*j
				x0, x1 := float64(x[i]), float64(x[i+1])
				want[i], want[i+1] = x0*c-x1*s, x0*s+x1*c
			}
		}
	}
	// As TestRoPEMatchesDefinition: f32 stepping of θ drifts a few ulps
	// per pair, and dividing by a factor only shrinks θ.
	closeTo(t, "rope with factors", got, want, 1e-4)

	// The factors must change the result where they are not 1.
	plain := run(t, d, &ops.Op{Kind: ops.RoPE, Name: "rope", Rope: ops.RopeParams{HeadDim: 16, Dims: 12, Base: 500000}}, ops.Step{Tokens: make([]int32, n), Pos: pos}, n*width, x)
	if plain[4] == got[4] && plain[5] == got[5] {
		t.Error("frequency factor 1.5 left pair 2 as without factors")
	}

	bad := &ops.Op{Kind: ops.RoPE, Name: "rope", Rope: ops.RopeParams{HeadDim: 16, Dims: 12, Base: 500000, Freqs: freqs[:5]}}
	in, _ := d.Alloc(n * width)
	out, _ := d.Alloc(n * width)
	if err := d.Run(bad, ops.Step{Tokens: make([]int32, n), Pos: pos}, []devices.Buffer{in}, out); err == nil || !strings.Contains(err.Error(), "5 rope frequency factors") {
		t.Errorf("a rope with 5 factors for 6 pairs: got %v", err)
	}
}

func TestNormMatMulEmbedAgainstDequantized(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	d := New("cpu", 2)
	defer d.Close()
	const rows, cols = 40, 64
	for _, typ := range []quant.Type{quant.F32, quant.F16, quant.Q8_0, quant.Q4_0, quant.Q5_0} {
		t.Run(typ.String(), func(t *testing.T) {
			wf := randVec(r, rows*cols)
			rb, _ := quant.RowBytes(typ, cols)
			raw := make([]byte, rb*rows)
			if err := quant.Quantize(typ, wf, raw); err != nil {
				t.Fatal(err)
			}
			deq := make([]float32, rows*cols)
			if err := quant.Dequantize(typ, raw, deq); err != nil {
				t.Fatal(err)
			}
			w := &ops.Weight{Name: "w." + typ.String(), Type: typ, Rows: rows, Cols: cols}
			if err := d.LoadWeight(w, raw); err != nil {
				t.Fatal(err)
			}
			x := randVec(r, 2*cols)
			got := run(t, d, &ops.Op{Kind: ops.MatMul, Name: "mm", Weight: w}, ops.Step{Tokens: make([]int32, 2)}, 2*rows, x)
			want := make([]float64, 2*rows)
			var scale float64
			for i := 0; i < 2; i++ {
				for o := 0; o < rows; o++ {
					var ab float64
					for c := 0; c < cols; c++ {
						want[i*rows+o] += float64(deq[o*cols+c]) * float64(x[i*cols+c])
						ab += math.Abs(float64(deq[o*cols+c]) * float64(x[i*cols+c]))
					}
					scale = math.Max(scale, ab)
				}
			}
			// Quantized types multiply by 8-bit-quantized activations, as
			// llama.cpp does: error about 1% of Σ|w·x|.
			lim := 1e-5 * scale
			if typ == quant.F16 {
				// Activations are rounded to f16 first, as llama.cpp does.
				lim = 0x1p-11 * scale
			}
			if typ != quant.F32 && typ != quant.F16 {
				lim = 1e-2 * scale
			}
			for i := range want {
				if math.Abs(float64(got[i])-want[i]) > lim {
					t.Fatalf("row %d: %g, want %g (limit %g)", i, got[i], want[i], lim)
				}
			}
			emb := run(t, d, &ops.Op{Kind: ops.Embed, Name: "embed", Weight: w}, ops.Step{Tokens: []int32{7, 0, 39}}, 3*cols)
			for i, tok := range []int{7, 0, 39} {
				for c := 0; c < cols; c++ {
					if emb[i*cols+c] != deq[tok*cols+c] {
						t.Fatalf("embedding of token %d differs at %d", tok, c)
					}
				}
			}
			if err := d.Run(&ops.Op{Kind: ops.Embed, Name: "embed", Weight: w}, ops.Step{Tokens: []int32{rows}}, nil, &Buffer{F: make([]float32, cols)}); err == nil {
				t.Fatal("a token outside the vocabulary was accepted")
			}
		})
	}
	nw := &ops.Weight{Name: "norm", Type: quant.F32, Rows: 1, Cols: cols}
	g := randVec(r, cols)
	if err := d.LoadWeight(nw, f32bytes(g)); err != nil {
		t.Fatal(err)
	}
	x := randVec(r, 2*cols)
	got := run(t, d, &ops.Op{Kind: ops.RMSNorm, Name: "norm", Weight: nw, Eps: 1e-5}, ops.Step{Tokens: make([]int32, 2)}, 2*cols, x)
	want := make([]float64, 2*cols)
	for i := 0; i < 2; i++ {
		var ss float64
		for c := 0; c < cols; c++ {
			ss += float64(x[i*cols+c]) * float64(x[i*cols+c])
		}
		s := 1 / math.Sqrt(ss/cols+1e-5)
		for c := 0; c < cols; c++ {
			want[i*cols+c] = float64(x[i*cols+c]) * s * float64(g[c])
		}
	}
	closeTo(t, "rms_norm", got, want, tol)
}

func f32bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	if err := quant.Quantize(quant.F32, v, b); err != nil {
		panic(err)
	}
	return b
}

// TestRepackedWeight checks a mat-mul weight that the device repacks
// (kernels.Packable) against the same weight left in the file's layout, and
// that repacking changes neither the memory the device reports nor an
// embedding lookup of the same tensor, whose mapped pages it drops.
func TestRepackedWeight(t *testing.T) {
	const rows, cols = 48, 256
	if !kernels.Packable(quant.Q4_0, rows, cols) {
		t.Skip("this CPU repacks nothing")
	}
	r := rand.New(rand.NewPCG(9, 10))
	rb, _ := quant.RowBytes(quant.Q4_0, cols)
	raw := make([]byte, rb*rows)
	if err := quant.Quantize(quant.Q4_0, randVec(r, rows*cols), raw); err != nil {
		t.Fatal(err)
	}
	w := &ops.Weight{Name: "w", Type: quant.Q4_0, Rows: rows, Cols: cols}
	mm := &ops.Op{Kind: ops.MatMul, Name: "mm", Weight: w}
	results := map[bool][]float32{}
	for _, on := range []bool{false, true} {
		repack = on
		d := New("cpu", 2)
		if err := d.LoadWeight(w, raw); err != nil {
			t.Fatal(err)
		}
		before := d.MemoryUsed()
		x := randVec(rand.New(rand.NewPCG(1, 1)), 3*cols)
		results[on] = run(t, d, mm, ops.Step{Tokens: make([]int32, 3)}, 3*rows, x)
		// Each buffer the helper allocated: input and output.
		if got, want := d.MemoryUsed(), before+4*int64(3*cols+3*rows); got != want {
			t.Errorf("repack=%v: memory %d after the mat-mul, want %d", on, got, want)
		}
		if got := d.weights["w"].packed != nil; got != on {
			t.Errorf("repack=%v: packed is %v", on, got)
		}
		emb := run(t, d, &ops.Op{Kind: ops.Embed, Name: "embed", Weight: w}, ops.Step{Tokens: []int32{5}}, cols)
		deq := make([]float32, cols)
		if err := quant.Dequantize(quant.Q4_0, raw[5*rb:6*rb], deq); err != nil {
			t.Fatal(err)
		}
		for c := range deq {
			if emb[c] != deq[c] {
				t.Fatalf("repack=%v: embedding differs at %d", on, c)
			}
		}
		d.Close()
	}
	repack = true
	for i, v := range results[true] {
		if u := results[false][i]; math.Abs(float64(v-u)) > 1e-5*(1+math.Abs(float64(u))) {
			t.Fatalf("output %d: repacked %g, file layout %g", i, v, u)
		}
	}
}

// TestReleaseOnlyDropsFileMappings checks that dropping a repacked weight's
// pages leaves ordinary memory alone (where it would zero them) and that a
// file mapping still reads back the same after its pages are dropped.
func TestReleaseOnlyDropsFileMappings(t *testing.T) {
	heap := make([]byte, 1<<20)
	for i := range heap {
		heap[i] = byte(i*7 + 1)
	}
	if sharedFileMapping(heap) {
		t.Error("heap memory taken for a file mapping")
	}
	release(heap)
	for i, v := range heap {
		if v != byte(i*7+1) {
			t.Fatalf("heap byte %d changed to %d", i, v)
		}
	}
}

// TestElementwiseSpread checks that the element-wise ops a prompt spreads
// over the pool give exactly what one thread gives, on buffers large enough
// to be spread and on the last layer's one-row FFN inside a many-token step
// (its SiLU·mul reads one row although the step has many tokens).
func TestElementwiseSpread(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	one, many := New("cpu", 1), New("cpu", 3)
	defer one.Close()
	defer many.Close()
	const n, width, ffn = 40, 1024, 1003
	norm := randVec(r, width)
	cases := []struct {
		name string
		op   *ops.Op
		out  int
		ins  [][]float32
	}{
		{"rms_norm", &ops.Op{Kind: ops.RMSNorm, Name: "norm", Weight: &ops.Weight{Name: "w", Type: quant.F32, Rows: 1, Cols: width}, Eps: 1e-5}, n * width, [][]float32{randVec(r, n*width)}},
		{"rope", &ops.Op{Kind: ops.RoPE, Name: "rope", Rope: ops.RopeParams{HeadDim: 64, Dims: 64, Base: 10000}}, n * width, [][]float32{randVec(r, n*width)}},
		{"silu_mul", &ops.Op{Kind: ops.SiLUMul, Name: "silu"}, n * ffn, [][]float32{randVec(r, n*ffn), randVec(r, n*ffn)}},
		{"silu_mul one row", &ops.Op{Kind: ops.SiLUMul, Name: "silu"}, ffn, [][]float32{randVec(r, ffn), randVec(r, ffn)}},
		{"add", &ops.Op{Kind: ops.Add, Name: "add"}, n * width, [][]float32{randVec(r, n*width), randVec(r, n*width)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.op.Weight != nil {
				for _, d := range []*Device{one, many} {
					if err := d.LoadWeight(c.op.Weight, f32bytes(norm)); err != nil {
						t.Fatal(err)
					}
				}
			}
			st := ops.Step{Tokens: make([]int32, n), Pos: 7}
			want := run(t, one, c.op, st, c.out, c.ins...)
			got := run(t, many, c.op, st, c.out, c.ins...)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("element %d: 3 threads %g, 1 thread %g", i, got[i], want[i])
				}
			}
			if c.op.Kind == ops.SiLUMul {
				g, u := c.ins[0], c.ins[1]
				for i := range want {
					x := float64(g[i])
					if e := math.Abs(float64(want[i]) - x/(1+math.Exp(-x))*float64(u[i])); e > 1e-5*(1+math.Abs(float64(want[i]))) {
						t.Fatalf("element %d: %g, silu·mul %g", i, want[i], x/(1+math.Exp(-x))*float64(u[i]))
					}
				}
			}
		})
	}
}

// TestRoPENeoxIsPermutedNormal checks the NEOX pairing against the normal
// one: rotating features j and j+Dims/2 is rotating adjacent pairs of the
// head with its first and second halves interleaved, bit for bit, and the
// unrotated tail is left alone.
func TestRoPENeoxIsPermutedNormal(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	d := New("cpu", 1)
	defer d.Close()
	const n, hd, dims, heads, pos = 3, 16, 12, 2, 77
	width := hd * heads
	x := randVec(r, n*width)
	neox := ops.RopeParams{HeadDim: hd, Dims: dims, Base: 1e6, Neox: true}
	got := run(t, d, &ops.Op{Kind: ops.RoPE, Name: "rope", Rope: neox}, ops.Step{Tokens: make([]int32, n), Pos: pos}, n*width, x)
	// perm[k] is where feature k of a head goes in the interleaved order.
	perm := make([]int, hd)
	for k := range perm {
		switch {
		case k < dims/2:
			perm[k] = 2 * k
		case k < dims:
			perm[k] = 2*(k-dims/2) + 1
		default:
			perm[k] = k
		}
	}
	y := make([]float32, len(x))
	for h := 0; h < n*heads; h++ {
		for k := 0; k < hd; k++ {
			y[h*hd+perm[k]] = x[h*hd+k]
		}
	}
	normal := neox
	normal.Neox = false
	ref := run(t, d, &ops.Op{Kind: ops.RoPE, Name: "rope", Rope: normal}, ops.Step{Tokens: make([]int32, n), Pos: pos}, n*width, y)
	for h := 0; h < n*heads; h++ {
		for k := 0; k < hd; k++ {
			if g, w := got[h*hd+k], ref[h*hd+perm[k]]; math.Float32bits(g) != math.Float32bits(w) {
				t.Fatalf("head %d feature %d: %g, want %g", h, k, g, w)
			}
		}
	}
	if got[dims] != x[dims] || got[hd-1] != x[hd-1] {
		t.Error("the unrotated features changed")
	}
}

// TestPerHeadNormAndBias checks a per-head RMSNorm against each head
// normalised alone, and AddBias against the sum written out.
func TestPerHeadNormAndBias(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	d := New("cpu", 2)
	defer d.Close()
	const n, hd, heads = 3, 8, 4
	width := hd * heads
	nw := randVec(r, hd)
	bias := randVec(r, width)
	for name, v := range map[string][]float32{"norm": nw, "bias": bias} {
		if err := d.LoadWeight(&ops.Weight{Name: name, Type: quant.F32, Rows: 1, Cols: len(v)}, f32bytes(v)); err != nil {
			t.Fatal(err)
		}
	}
	x := randVec(r, n*width)
	st := ops.Step{Tokens: make([]int32, n)}
	got := run(t, d, &ops.Op{Kind: ops.RMSNorm, Name: "qn", Eps: 1e-6, PerHead: true, Weight: &ops.Weight{Name: "norm", Type: quant.F32, Rows: 1, Cols: hd}}, st, n*width, x)
	for h := 0; h < n*heads; h++ {
		var ss float64
		for _, v := range x[h*hd : (h+1)*hd] {
			ss += float64(v) * float64(v)
		}
		s := 1 / math.Sqrt(ss/hd+1e-6)
		for k := 0; k < hd; k++ {
			want := float64(x[h*hd+k]) * s * float64(nw[k])
			if math.Abs(float64(got[h*hd+k])-want) > 1e-5*math.Max(1, math.Abs(want)) {
				t.Fatalf("head %d feature %d: %g, want %g", h, k, got[h*hd+k], want)
			}
		}
	}
	got = run(t, d, &ops.Op{Kind: ops.AddBias, Name: "qb", Weight: &ops.Weight{Name: "bias", Type: quant.F32, Rows: 1, Cols: width}}, st, n*width, x)
	for i := range got {
		if want := x[i] + bias[i%width]; got[i] != want {
			t.Fatalf("element %d: %g, want %g", i, got[i], want)
		}
	}
}
