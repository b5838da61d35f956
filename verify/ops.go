package verify

import (
	"fmt"
	"math"
	"math/rand/v2"

	"hybrid/devices"
	"hybrid/ops"
	"hybrid/quant"
)

// Shapes of the op checks: small enough that the CPU reference takes
// milliseconds, with rows of 512 so that every block type (K-quants have
// blocks of 256) applies, 96 weight rows (one and a half of the 64-row
// tiles a GPU mat-mul may use), and token counts for decode (1), a short
// prefill (7) and one past a 32-token tile (33).
const (
	opCols   = 512
	mmRows   = 96
	vocab    = 300
	ropeBase = 10000
)

var tokenCounts = []int{1, 7, 33}

// tolerances are the largest errors a check accepts, by the device's
// precision; each metric is defined where it is computed.
type tolerances struct {
	exact     float64 // copies and gathers: values pass through unchanged
	elem      float64 // element-wise f32 arithmetic (add)
	transc    float64 // one transcendental per element (silu's exp, rope's sin/cos), rms_norm's scale
	attention float64
	// mat-muls by weight type: F32, then F16, BF16 and block types
	matF32, matF16, matBF16, matBlock float64
}

// mat is the mat-mul tolerance for weights of type typ.
func (t tolerances) mat(typ quant.Type) float64 {
	switch typ {
	case quant.F32:
		return t.matF32
	case quant.F16:
		return t.matF16
	case quant.BF16:
		return t.matBF16
	}
	return t.matBlock
}

// tolerancesFor returns the tolerances for a device of precision prec.
//
// f32 devices: gathers and copies must agree exactly but for the last bit of
// decoding a block (d·q rounded once, or fused: 1e-6 of the largest value);
// add is one rounding (1e-6); an exp or sin/cos within a few ulp, or
// rms_norm's f32 sum of squares against the CPU's float64 one, gives ~1e-6
// of the largest value, so 1e-5. Attention: the CPU keeps an f16 KV cache
// (keys and values rounded to 11 bits) and rounds the decode query and
// accumulator to f16, so 5e-3 of max|v|.
//
// Mat-muls are measured per element against the output's rms, so that one
// wrong row or block shows. An F32 mat-mul is k f32 products summed in
// another order: ~1e-6 (1e-5). With F16, BF16 or block weights the CPU
// rounds the activations as llama.cpp does (to f16, bf16, or 8-bit blocks of
// 32 or 256) where a GPU kernel may keep them f32; against exact dot
// products of these checks' inputs that costs at most 9e-4 (F16), 7e-3
// (BF16) and 3.1e-2 (Q5_K; 2e-2 to 3e-2 for the other block types), so the
// tolerances are 3e-3, 2e-2 and 6e-2.
//
// f16 devices (the Neural Engine) round every input, weight and result to
// fp16 (2⁻¹¹ relative) and may accumulate in fp16: 1e-3 for values passed
// through one rounding, 1e-2 for one op's arithmetic, 3e-2 for attention
// and for mat-muls of 512 terms with F32 or F16 weights, 8e-2 with the
// others.
func tolerancesFor(prec string) tolerances {
	if prec == "f16" {
		return tolerances{exact: 1e-3, elem: 1e-3, transc: 1e-2, attention: 3e-2, matF32: 3e-2, matF16: 3e-2, matBF16: 8e-2, matBlock: 8e-2}
	}
	return tolerances{exact: 1e-6, elem: 1e-6, transc: 1e-5, attention: 5e-3, matF32: 1e-5, matF16: 3e-3, matBF16: 2e-2, matBlock: 6e-2}
}

// weightTypes lists every weight type the quant package can encode: the
// checks make their random weights with it.
func weightTypes() []quant.Type { return quant.SupportedTypes() }

// opCase is one op to run on the device and the reference.
type opCase struct {
	name   string
	op     *ops.Op
	weight []byte     // the weight's bytes, if the op has one
	steps  []ops.Step // run in order (attention: a prefill, then steps past it)
	inputs func(st ops.Step) [][]float32
	outLen func(st ops.Step) int
	metric string
	tol    float64
	broken error // the case could not be built
	// err measures got against want for one step.
	err func(got, want []float32, in [][]float32) float64
}

// Ops checks every op kind and weight type dev supports against ref (the
// CPU device) on random inputs drawn from seed: decode and prefill shapes,
// and attention after earlier steps filled the cache. Op kinds and types
// that dev does not support are reported as skipped, with its reason.
func Ops(dev, ref devices.Device, seed uint64) []Result {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	tol := tolerancesFor(dev.Info().Precision)
	var cases []opCase
	add := func(c opCase) { cases = append(cases, c) }

	// embed: a gather of decoded rows, one row per token.
	for _, typ := range weightTypes() {
		data, err := randomWeight(r, typ, vocab, opCols)
		w := &ops.Weight{Name: "verify.embed." + typ.String(), Type: typ, Rows: vocab, Cols: opCols}
		if err != nil {
			add(opCase{name: "embed " + typ.String(), broken: err})
			continue
		}
		for _, n := range tokenCounts[:2] {
			toks := make([]int32, n)
			for i := range toks {
				toks[i] = int32(r.IntN(vocab))
			}
			toks[0] = vocab - 1
			add(opCase{
				name: fmt.Sprintf("embed %s n=%d", typ, n), op: &ops.Op{Kind: ops.Embed, Name: "verify.embed", Layer: -1, Weight: w}, weight: data,
				steps:  []ops.Step{{Tokens: toks, Pos: 3}},
				inputs: func(ops.Step) [][]float32 { return nil },
				outLen: func(st ops.Step) int { return len(st.Tokens) * opCols },
				metric: "max|Δ|/max|ref|", tol: tol.exact, err: maxRel,
			})
		}
	}

	// mat_mul: every weight type, decode and prefill.
	for _, typ := range weightTypes() {
		w := &ops.Weight{Name: "verify.mat_mul." + typ.String(), Type: typ, Rows: mmRows, Cols: opCols}
		data, err := randomWeight(r, typ, mmRows, opCols)
		if err != nil {
			add(opCase{name: "mat_mul " + typ.String(), broken: err})
			continue
		}
		t := tol.mat(typ)
		for _, n := range tokenCounts {
			x := RandVec(r, n*opCols)
			add(opCase{
				name: fmt.Sprintf("mat_mul %s %d×%d n=%d", typ, mmRows, opCols, n), op: &ops.Op{Kind: ops.MatMul, Name: "verify.mat_mul", Layer: 0, Weight: w}, weight: data,
				steps:  []ops.Step{{Tokens: make([]int32, n)}},
				inputs: func(ops.Step) [][]float32 { return [][]float32{x} },
				outLen: func(ops.Step) int { return n * mmRows },
				metric: "max|Δ|/rms(ref)", tol: t, err: maxOverRMS,
			})
		}
	}

	// rms_norm with the norm vector in F32, as GGUF files store them, and in
	// F16 and BF16.
	for _, typ := range []quant.Type{quant.F32, quant.F16, quant.BF16} {
		w := &ops.Weight{Name: "verify.norm." + typ.String(), Type: typ, Rows: 1, Cols: opCols}
		data, err := randomWeight(r, typ, 1, opCols)
		if err != nil {
			add(opCase{name: "rms_norm " + typ.String(), broken: err})
			continue
		}
		for _, n := range tokenCounts[:2] {
			x := RandVec(r, n*opCols)
			add(opCase{
				name: fmt.Sprintf("rms_norm %s n=%d", typ, n),
				op:   &ops.Op{Kind: ops.RMSNorm, Name: "verify.rms_norm", Layer: 0, Eps: 1e-5, Weight: w}, weight: data,
				steps:  []ops.Step{{Tokens: make([]int32, n)}},
				inputs: func(ops.Step) [][]float32 { return [][]float32{x} },
				outLen: func(ops.Step) int { return n * opCols },
				metric: "max|Δ|/max|ref|", tol: tol.transc, err: maxRel,
			})
		}
	}

	// rms_norm per head (Qwen3's Q and K norms): heads of 64 and of 128.
	for _, g := range []int{64, 128} {
		w := &ops.Weight{Name: fmt.Sprintf("verify.norm.head%d", g), Type: quant.F32, Rows: 1, Cols: g}
		data, err := randomWeight(r, quant.F32, 1, g)
		if err != nil {
			add(opCase{name: "rms_norm per head", broken: err})
			continue
		}
		for _, n := range tokenCounts[:2] {
			x := RandVec(r, n*opCols)
			add(opCase{
				name: fmt.Sprintf("rms_norm per head of %d n=%d", g, n),
				op:   &ops.Op{Kind: ops.RMSNorm, Name: "verify.rms_norm_head", Layer: 0, Eps: 1e-6, PerHead: true, Weight: w}, weight: data,
				steps:  []ops.Step{{Tokens: make([]int32, n)}},
				inputs: func(ops.Step) [][]float32 { return [][]float32{x} },
				outLen: func(ops.Step) int { return n * opCols },
				metric: "max|Δ|/max|ref|", tol: tol.transc, err: maxRel,
			})
		}
	}

	// add_bias (Qwen2's Q, K and V biases), an F32 vector as files store it.
	{
		w := &ops.Weight{Name: "verify.bias", Type: quant.F32, Rows: 1, Cols: opCols}
		data, err := randomWeight(r, quant.F32, 1, opCols)
		if err != nil {
			add(opCase{name: "add_bias", broken: err})
		} else {
			for _, n := range tokenCounts[:2] {
				x := RandVec(r, n*opCols)
				add(opCase{
					name: fmt.Sprintf("add_bias n=%d", n),
					op:   &ops.Op{Kind: ops.AddBias, Name: "verify.add_bias", Layer: 0, Weight: w}, weight: data,
					steps:  []ops.Step{{Tokens: make([]int32, n)}},
					inputs: func(ops.Step) [][]float32 { return [][]float32{x} },
					outLen: func(ops.Step) int { return n * opCols },
					metric: "max|Δ|/max|ref|", tol: tol.elem, err: maxRel,
				})
			}
		}
	}

	// rope: all and half the features rotated, at positions 0, 37 and 1000,
	// in the normal and the NEOX pairing.
	const heads, hd = 8, 64
	for _, c := range []struct {
		n, pos, dims int
		neox         bool
	}{{7, 0, hd, false}, {1, 37, hd, false}, {3, 1000, hd, false}, {5, 17, hd / 2, false}, {7, 0, hd, true}, {1, 1000, hd, true}, {5, 17, hd / 2, true}} {
		x := RandVec(r, c.n*heads*hd)
		mode := ""
		if c.neox {
			mode = " neox"
		}
		add(opCase{
			name:   fmt.Sprintf("rope%s dims=%d n=%d pos=%d", mode, c.dims, c.n, c.pos),
			op:     &ops.Op{Kind: ops.RoPE, Name: "verify.rope", Layer: 0, Rope: ops.RopeParams{HeadDim: hd, Dims: c.dims, Base: ropeBase, Neox: c.neox}},
			steps:  []ops.Step{{Tokens: make([]int32, c.n), Pos: c.pos}},
			inputs: func(ops.Step) [][]float32 { return [][]float32{x} },
			outLen: func(ops.Step) int { return len(x) },
			metric: "max|Δ|/max|x|", tol: tol.transc, err: maxRelToInput,
		})
	}

	// silu_mul, add, last_row.
	for _, n := range tokenCounts[:2] {
		a, b := RandVec(r, n*opCols), RandVec(r, n*opCols)
		two := func(ops.Step) [][]float32 { return [][]float32{a, b} }
		st := []ops.Step{{Tokens: make([]int32, n)}}
		size := func(ops.Step) int { return n * opCols }
		add(opCase{name: fmt.Sprintf("silu_mul n=%d", n), op: &ops.Op{Kind: ops.SiLUMul, Name: "verify.silu_mul", Layer: 0},
			steps: st, inputs: two, outLen: size, metric: "max|Δ|/max|ref|", tol: tol.transc, err: maxRel})
		add(opCase{name: fmt.Sprintf("add n=%d", n), op: &ops.Op{Kind: ops.Add, Name: "verify.add", Layer: 0},
			steps: st, inputs: two, outLen: size, metric: "max|Δ|/max|ref|", tol: tol.elem, err: maxRel})
		add(opCase{name: fmt.Sprintf("last_row n=%d", n), op: &ops.Op{Kind: ops.LastRow, Name: "verify.last_row", Layer: -1},
			steps: st, inputs: func(ops.Step) [][]float32 { return [][]float32{a} }, outLen: func(ops.Step) int { return opCols },
			metric: "max|Δ|/max|ref|", tol: tol.exact, err: maxRel})
	}

	// attention: a prefill, a decode step and a short step after it over one
	// layer's cache, for grouped-query heads of 64 and plain heads of 128.
	// Each configuration has its own layer, hence its own cache.
	for li, a := range []ops.AttnParams{{Heads: 8, KVHeads: 2, HeadDim: 64, Context: 64}, {Heads: 4, KVHeads: 4, HeadDim: 128, Context: 32}} {
		op := &ops.Op{Kind: ops.Attention, Name: fmt.Sprintf("verify.attention.%d", li), Layer: 1000 + li, Attn: a}
		steps := []ops.Step{{Tokens: make([]int32, 9), Pos: 0}, {Tokens: make([]int32, 1), Pos: 9}, {Tokens: make([]int32, 5), Pos: 10}}
		qs := map[int][][]float32{}
		for _, st := range steps {
			n := len(st.Tokens)
			qs[st.Pos] = [][]float32{RandVec(r, n*a.Heads*a.HeadDim), RandVec(r, n*a.KVHeads*a.HeadDim), RandVec(r, n*a.KVHeads*a.HeadDim)}
		}
		add(opCase{
			name:   fmt.Sprintf("attention %dq/%dkv×%d prefill 9, decode at 9, 5 at 10", a.Heads, a.KVHeads, a.HeadDim),
			op:     op,
			steps:  steps,
			inputs: func(st ops.Step) [][]float32 { return qs[st.Pos] },
			outLen: func(st ops.Step) int { return len(st.Tokens) * a.Heads * a.HeadDim },
			metric: "max|Δ|/max|v|", tol: tol.attention,
			err: func(got, want []float32, in [][]float32) float64 {
				return maxAbsDiff(got, want) / MaxAbs(in[2])
			},
		})
	}

	var out []Result
	for _, c := range cases {
		out = append(out, runCase(dev, ref, c))
	}
	return out
}

// runCase runs c's steps on both devices and returns the worst step's error.
func runCase(dev, ref devices.Device, c opCase) Result {
	res := Result{Part: "op", Name: c.name, Metric: c.metric, Tol: c.tol}
	if c.broken != nil {
		res.Status, res.Note = Fail, c.broken.Error()
		return res
	}
	if err := dev.Supports(c.op); err != nil {
		res.Status, res.Note = Skip, "unsupported: "+err.Error()
		return res
	}
	if err := ref.Supports(c.op); err != nil {
		res.Status, res.Note = Skip, "the CPU reference does not run it: "+err.Error()
		return res
	}
	for _, st := range c.steps {
		in := c.inputs(st)
		want, err := RunOp(ref, c.op, st, c.weight, c.outLen(st), in)
		if err != nil {
			res.Status, res.Note = Fail, fmt.Sprintf("CPU reference at pos %d: %v", st.Pos, err)
			return res
		}
		got, err := RunOp(dev, c.op, st, c.weight, c.outLen(st), in)
		if err != nil {
			res.Status, res.Note = Fail, fmt.Sprintf("at pos %d, %d tokens: %v", st.Pos, len(st.Tokens), err)
			return res
		}
		e := c.err(got, want, in)
		if math.IsNaN(e) {
			e = math.Inf(1)
		}
		if e > res.Err {
			res.Err = e
			if i := firstBad(got, want); i >= 0 {
				res.Note = fmt.Sprintf("pos %d: out[%d] = %g, cpu %g", st.Pos, i, got[i], want[i])
			}
		}
	}
	res.Status = Pass
	if res.Err > res.Tol {
		res.Status = Fail
	} else {
		res.Note = ""
	}
	return res
}

// randomWeight returns rows×cols normal random weights encoded as typ.
func randomWeight(r *rand.Rand, typ quant.Type, rows, cols int) ([]byte, error) {
	data, _, err := RandomWeights(r, typ, rows, cols)
	return data, err
}

// maxAbsDiff is max|a−b|, infinite where either is NaN or the lengths
// differ.
func maxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	m := 0.0
	for i := range a {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		m = max(m, d)
	}
	return m
}

// maxRel is max|got−want| / max|want|.
func maxRel(got, want []float32, _ [][]float32) float64 {
	return maxAbsDiff(got, want) / math.Max(MaxAbs(want), 1e-30)
}

// maxRelToInput is max|got−want| / max|x| (rope: outputs are rotations of
// the input).
func maxRelToInput(got, want []float32, in [][]float32) float64 {
	return maxAbsDiff(got, want) / math.Max(MaxAbs(in[0]), 1e-30)
}

// maxOverRMS is max|got−want| / rms(want).
func maxOverRMS(got, want []float32, _ [][]float32) float64 {
	var ss float64
	for _, w := range want {
		ss += float64(w) * float64(w)
	}
	return maxAbsDiff(got, want) / math.Max(math.Sqrt(ss/float64(max(len(want), 1))), 1e-30)
}

// firstBad is the index of the largest difference, or -1 if none.
func firstBad(got, want []float32) int {
	at, worst := -1, 0.0
	for i := range min(len(got), len(want)) {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if math.IsNaN(d) {
			return i
		}
		if d > worst {
			at, worst = i, d
		}
	}
	return at
}
