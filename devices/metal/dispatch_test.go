package metal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"hybrid/devices"
	"hybrid/models/llama"
	"hybrid/ops"
	"hybrid/quant"
)

// testModel is a small Llama (grouped-query, two layers) whose weights are
// of several types, for plans of whole graphs. arch picks what its blocks
// add to Llama's: "llama" nothing; "llama3" rope frequency factors;
// "qwen2" biases on Q, K and V and NEOX rope; "qwen3" those and a per-head
// norm of Q and K. The one-row weights of the Qwen variants (biases, norms)
// cycle through F32, F16 and BF16.
func testModel(arch string) (llama.Config, map[string]quant.Type) {
	c := llama.Config{Arch: "llama", Layers: 2, Dim: 256, Heads: 8, KVHeads: 2, HeadDim: 32, FFN: 512,
		RopeDims: 32, RopeBase: 10000, Eps: 1e-5, Context: 64, Vocab: 96, TiedOutput: true}
	switch arch {
	case "llama3":
		c.RopeBase = 500000
		c.HasRopeFreqs = true
		c.RopeFreqs = make([]float32, c.RopeDims/2)
		for i := range c.RopeFreqs {
			c.RopeFreqs[i] = 1 + float32(i*i)/8 // 1 up to about 29, as Llama 3's run from 1 to 32
		}
	case "qwen2", "qwen3":
		c.Arch, c.RopeNeox, c.QKNorm, c.RopeBase, c.Eps = arch, true, arch == "qwen3", 1000000, 1e-6
		c.Biases = map[string]bool{}
		for l := range c.Layers {
			for _, p := range []string{"attn_q", "attn_k", "attn_v"} {
				c.Biases[fmt.Sprintf("blk.%d.%s.bias", l, p)] = true
			}
		}
	}
	types := map[string]quant.Type{}
	cycle := []quant.Type{quant.Q4_K, quant.Q8_0, quant.Q6_K, quant.Q4_0, quant.Q5_K, quant.F16}
	vectors := []quant.Type{quant.F32}
	if c.Arch != "llama" {
		vectors = []quant.Type{quant.F32, quant.F16, quant.BF16}
	}
	for i, w := range c.Weights() {
		switch {
		case w.Rows == 1:
			types[w.Name] = vectors[i%len(vectors)]
		case w.Name == "token_embd.weight":
			types[w.Name] = quant.Q6_K
		default:
			types[w.Name] = cycle[i%len(cycle)]
		}
	}
	return c, types
}

// testArchs are the variants of testModel.
var testArchs = []string{"llama", "llama3", "qwen2", "qwen3"}

// valueLens returns the f32 lengths of op's inputs and output in g.
func valueLens(g *ops.Graph, op *ops.Op) ([]int, int) {
	in := make([]int, len(op.In))
	for i, v := range op.In {
		in[i] = g.Values[v].Elems()
	}
	return in, g.Values[op.Out].Elems()
}

// TestPlanGraph plans every op of prefill and decode graphs and checks what
// the darwin device relies on: every dispatch names a kernel of Source,
// binds roles the op has, and has a params struct, grid and threadgroup the
// Metal API accepts.
func TestPlanGraph(t *testing.T) {
	for _, arch := range testArchs {
		t.Run(arch, func(t *testing.T) { testPlanGraph(t, arch) })
	}
}

func testPlanGraph(t *testing.T, arch string) {
	c, types := testModel(arch)
	for _, step := range []struct{ n, past int }{{7, 0}, {1, 7}, {40, 8}} {
		g, err := llama.Build(c, types, step.n, step.past, c.Context)
		if err != nil {
			t.Fatal(err)
		}
		st := ops.Step{Tokens: make([]int32, step.n), Pos: step.past}
		kernels := map[string]bool{}
		for _, op := range g.Ops {
			if err := Supports(op); err != nil {
				t.Fatalf("%s: %v", op, err)
			}
			in, out := valueLens(g, op)
			plan, err := PlanSized(op, st, in, out)
			if err != nil {
				t.Fatalf("n=%d: %v", step.n, err)
			}
			if len(plan) == 0 {
				t.Fatalf("%s: empty plan", op)
			}
			// Plan, given the input's rows, agrees where it can plan at all.
			if byRows, err := Plan(op, st, g.Values[firstValue(op)].Rows); err == nil {
				if fmt.Sprint(byRows) != fmt.Sprint(plan) {
					t.Fatalf("%s: Plan and PlanSized differ:\n%v\n%v", op, byRows, plan)
				}
			} else if op.Kind == ops.MatMul || op.Kind == ops.RMSNorm && !op.PerHead || op.Kind == ops.Attention || op.Kind == ops.Embed || op.Kind == ops.AddBias {
				t.Fatalf("%s: Plan: %v", op, err)
			} else if !strings.Contains(err.Error(), "PlanSized") {
				t.Fatalf("%s: Plan's refusal does not say what to use: %v", op, err)
			}
			for _, d := range plan {
				kernels[d.Kernel] = true
				checkDispatch(t, op, d)
			}
		}
		t.Logf("n=%d past=%d: %d ops, kernels %v", step.n, step.past, len(g.Ops), keys(kernels))
	}
}

// firstValue is the value whose rows Plan takes: the first input, or for
// Embed the output.
func firstValue(op *ops.Op) int {
	if len(op.In) == 0 {
		return op.Out
	}
	return op.In[0]
}

func keys(m map[string]bool) []string {
	var s []string
	for k := range m {
		s = append(s, k)
	}
	return s
}

var kernelDecl = regexp.MustCompile(`kernel void ([\w#]+)\(`)

// checkDispatch checks one dispatch against the limits of the Metal API and
// against Source.
func checkDispatch(t *testing.T, op *ops.Op, d Dispatch) {
	t.Helper()
	declared := false
	for _, m := range kernelDecl.FindAllStringSubmatch(Source, -1) {
		name := m[1]
		if name == d.Kernel {
			declared = true
		}
		// A family of kernels: matvec_##name over FOR_WEIGHT_TYPES etc.
		if prefix, ok := strings.CutSuffix(name, "##name"); ok && strings.HasPrefix(d.Kernel, prefix) {
			suffix := strings.TrimPrefix(d.Kernel, prefix)
			if strings.Contains(Source, "X("+suffix+")") {
				declared = true
			}
		}
	}
	if !declared {
		t.Errorf("%s: kernel %s is not in Source", op, d.Kernel)
	}
	threads := d.Threads[0] * d.Threads[1] * d.Threads[2]
	if threads <= 0 || threads > 1024 || threads%simdWidth != 0 {
		t.Errorf("%s: %s: threadgroup of %v", op, d.Kernel, d.Threads)
	}
	for _, g := range d.Groups {
		if g <= 0 {
			t.Errorf("%s: %s: grid of %v", op, d.Kernel, d.Groups)
		}
	}
	if d.Shared < 0 || d.Shared%16 != 0 || d.Shared > 32<<10 {
		t.Errorf("%s: %s: %d bytes of threadgroup memory (a multiple of 16 up to 32 KiB)", op, d.Kernel, d.Shared)
	}
	// setBytes takes at most 4 KiB (mtl.MaxInlineBytes, darwin only).
	if len(d.Params) == 0 || len(d.Params)%16 != 0 || len(d.Params) > 4096 {
		t.Errorf("%s: %s: params of %d bytes", op, d.Kernel, len(d.Params))
	}
	for _, b := range d.Buffers {
		ok := false
		switch b.Role {
		case RoleWeight:
			ok = op.Weight != nil
		case RoleIn0, RoleIn1, RoleIn2:
			ok = int(b.Role-RoleIn0) < len(op.In)
		case RoleOut:
			ok = true
		case RoleKCache, RoleVCache:
			ok = op.Kind == ops.Attention
		case RoleTokens:
			ok = op.Kind == ops.Embed
		}
		if !ok || b.Offset < 0 || b.Offset%4 != 0 {
			t.Errorf("%s: %s binds %s at offset %d", op, d.Kernel, b.Role, b.Offset)
		}
	}
}

// TestSupports checks what the kernels refuse, and that the refusal wraps
// devices.ErrUnsupported and names the op and the reason.
func TestSupports(t *testing.T) {
	w := func(typ quant.Type, rows, cols int) *ops.Weight {
		return &ops.Weight{Name: "blk.0.w", Type: typ, Rows: rows, Cols: cols}
	}
	for _, c := range []struct {
		name    string
		op      *ops.Op
		mention []string // nil: supported
	}{
		{"q4_k matmul", &ops.Op{Kind: ops.MatMul, Name: "blk.0.ffn_up", Weight: w(quant.Q4_K, 64, 256)}, nil},
		{"q2_k matmul", &ops.Op{Kind: ops.MatMul, Name: "blk.0.ffn_up", Weight: w(quant.Q2_K, 64, 256)}, []string{"blk.0.ffn_up", "Q2_K", "Q4_K"}},
		{"q3_k embed", &ops.Op{Kind: ops.Embed, Name: "token_embd", Weight: w(quant.Q3_K, 64, 256)}, []string{"token_embd", "Q3_K"}},
		{"q8_1 matmul", &ops.Op{Kind: ops.MatMul, Name: "mm", Weight: w(quant.Q8_1, 64, 256)}, []string{"Q8_1"}},
		{"narrow f32 matmul", &ops.Op{Kind: ops.MatMul, Name: "mm", Weight: w(quant.F32, 64, 40)}, []string{"40 columns", "multiple of 32"}},
		{"narrow f32 embed", &ops.Op{Kind: ops.Embed, Name: "embed", Weight: w(quant.F32, 64, 44)}, []string{"64×44"}},
		{"f16 norm", &ops.Op{Kind: ops.RMSNorm, Name: "norm", Weight: w(quant.F16, 1, 64)}, nil},
		{"q8_0 norm", &ops.Op{Kind: ops.RMSNorm, Name: "blk.3.attn_norm", Weight: w(quant.Q8_0, 1, 64)}, []string{"blk.3.attn_norm", "Q8_0", "F32, F16, BF16"}},
		{"big head", &ops.Op{Kind: ops.Attention, Name: "attn", Attn: ops.AttnParams{Heads: 4, KVHeads: 4, HeadDim: 320, Context: 8}}, []string{"head size 320", "256"}},
		{"head 256", &ops.Op{Kind: ops.Attention, Name: "attn", Attn: ops.AttnParams{Heads: 4, KVHeads: 2, HeadDim: 256, Context: 8}}, nil},
		{"odd rope", &ops.Op{Kind: ops.RoPE, Name: "rope", Rope: ops.RopeParams{HeadDim: 64, Dims: 65, Base: 1e4}}, []string{"65 of 64"}},
		{"rope with factors", &ops.Op{Kind: ops.RoPE, Name: "blk.0.rope_q", Rope: ops.RopeParams{HeadDim: 4, Dims: 4, Base: 5e5, Freqs: []float32{1, 32}}}, nil},
		{"neox rope", &ops.Op{Kind: ops.RoPE, Name: "blk.0.rope_k", Rope: ops.RopeParams{HeadDim: 128, Dims: 128, Base: 1e6, Neox: true}}, nil},
		{"rope with short factors", &ops.Op{Kind: ops.RoPE, Name: "blk.0.rope_q", Rope: ops.RopeParams{HeadDim: 8, Dims: 8, Base: 5e5, Freqs: []float32{1, 32}}}, []string{"2 frequency factors for 4"}},
		{"rope with 129 factors", &ops.Op{Kind: ops.RoPE, Name: "blk.0.rope_q", Rope: ops.RopeParams{HeadDim: 258, Dims: 258, Base: 5e5, Freqs: make([]float32, 129)}}, []string{"129 frequency factors", "128"}},
		{"per-head norm", &ops.Op{Kind: ops.RMSNorm, Name: "blk.0.attn_q_norm", PerHead: true, Weight: w(quant.F32, 1, 128)}, nil},
		{"bf16 bias", &ops.Op{Kind: ops.AddBias, Name: "blk.0.attn_q_bias", Weight: w(quant.BF16, 1, 896)}, nil},
		{"q8_0 bias", &ops.Op{Kind: ops.AddBias, Name: "blk.0.attn_k_bias", Weight: w(quant.Q8_0, 1, 64)}, []string{"Q8_0", "F32, F16, BF16"}},
		{"bias of two rows", &ops.Op{Kind: ops.AddBias, Name: "blk.0.attn_v_bias", Weight: w(quant.F32, 2, 64)}, []string{"2×64"}},
		{"unknown kind", &ops.Op{Kind: ops.Kind(99), Name: "x"}, []string{"kind(99)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Supports(c.op)
			if c.mention == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, devices.ErrUnsupported) {
				t.Fatalf("got %v, want an error wrapping devices.ErrUnsupported", err)
			}
			for _, m := range append(c.mention, c.op.Name) {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("%q does not mention %q", err, m)
				}
			}
		})
	}
	// Every type the kernels decode is accepted; the types quant knows and
	// the kernels do not (Q2_K, Q3_K, IQ4_NL, IQ4_XS) are refused, so that
	// the planner places their ops elsewhere.
	for _, typ := range quant.SupportedTypes() {
		_, has := weightKernels[typ]
		for _, kind := range []ops.Kind{ops.MatMul, ops.Embed} {
			err := Supports(&ops.Op{Kind: kind, Name: "w", Weight: w(typ, 8, 256)})
			if has && err != nil {
				t.Errorf("%s %s: %v", kind, typ, err)
			}
			if !has && !errors.Is(err, devices.ErrUnsupported) {
				t.Errorf("%s %s: got %v, want ErrUnsupported", kind, typ, err)
			}
		}
	}
}

// TestPlanErrors checks that plans for buffers that do not fit the op, token
// ids outside the table and positions past the context are refused with an
// error naming the op, before anything reaches a GPU.
func TestPlanErrors(t *testing.T) {
	emb := &ops.Op{Kind: ops.Embed, Name: "token_embd", Weight: &ops.Weight{Name: "t", Type: quant.Q8_0, Rows: 10, Cols: 64}}
	mm := &ops.Op{Kind: ops.MatMul, Name: "blk.0.attn_q", Weight: &ops.Weight{Name: "q", Type: quant.Q4_0, Rows: 48, Cols: 64}}
	attn := &ops.Op{Kind: ops.Attention, Name: "blk.0.attn", Attn: ops.AttnParams{Heads: 4, KVHeads: 2, HeadDim: 16, Context: 8}}
	rope := &ops.Op{Kind: ops.RoPE, Name: "blk.0.rope_q", Rope: ops.RopeParams{HeadDim: 16, Dims: 16, Base: 1e4}}
	for _, c := range []struct {
		name    string
		plan    func() ([]Dispatch, error)
		mention string
	}{
		{"token past vocabulary", func() ([]Dispatch, error) {
			return PlanSized(emb, ops.Step{Tokens: []int32{3, 10}}, nil, 128)
		}, "token id 10"},
		{"negative token", func() ([]Dispatch, error) { return Plan(emb, ops.Step{Tokens: []int32{-1}}, 1) }, "token id -1"},
		{"embed rows", func() ([]Dispatch, error) { return Plan(emb, ops.Step{Tokens: []int32{1, 2}}, 3) }, "3 rows for 2 tokens"},
		{"embed output", func() ([]Dispatch, error) { return PlanSized(emb, ops.Step{Tokens: []int32{1}}, nil, 65) }, "output of 65"},
		{"matmul output", func() ([]Dispatch, error) { return PlanSized(mm, ops.Step{}, []int{128}, 97) }, "output of 97"},
		{"matmul input", func() ([]Dispatch, error) { return PlanSized(mm, ops.Step{}, []int{100}, 48) }, "input of 100"},
		{"matmul inputs", func() ([]Dispatch, error) { return PlanSized(mm, ops.Step{}, []int{64, 64}, 48) }, "2 input buffers"},
		{"zero rows", func() ([]Dispatch, error) { return Plan(mm, ops.Step{}, 0) }, "0 input rows"},
		{"past context", func() ([]Dispatch, error) {
			return Plan(attn, ops.Step{Tokens: make([]int32, 3), Pos: 6}, 3)
		}, "positions 6..8 exceed the context of 8"},
		{"attention k", func() ([]Dispatch, error) {
			return PlanSized(attn, ops.Step{Tokens: make([]int32, 2), Pos: 0}, []int{128, 32, 64}, 128)
		}, "do not fit"},
		{"rope width", func() ([]Dispatch, error) {
			return PlanSized(rope, ops.Step{Tokens: make([]int32, 2)}, []int{40}, 40)
		}, "not 2 rows of heads of 16"},
		{"add by rows", func() ([]Dispatch, error) {
			return Plan(&ops.Op{Kind: ops.Add, Name: "blk.1.ffn_residual"}, ops.Step{}, 2)
		}, "PlanSized"},
		{"add shapes", func() ([]Dispatch, error) {
			return PlanSized(&ops.Op{Kind: ops.Add, Name: "blk.1.ffn_residual"}, ops.Step{}, []int{8, 9}, 8)
		}, "8 and 9"},
		{"last row", func() ([]Dispatch, error) {
			return PlanSized(&ops.Op{Kind: ops.LastRow, Name: "last_token"}, ops.Step{}, []int{10}, 4)
		}, "not rows of 4"},
		{"unsupported", func() ([]Dispatch, error) {
			return Plan(&ops.Op{Kind: ops.MatMul, Name: "mm", Weight: &ops.Weight{Name: "x", Type: quant.Q2_K, Rows: 8, Cols: 256}}, ops.Step{}, 1)
		}, "Q2_K"},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan, err := c.plan()
			if err == nil {
				t.Fatalf("accepted: %v", plan)
			}
			if !strings.Contains(err.Error(), c.mention) || !strings.Contains(err.Error(), "metal: op ") {
				t.Fatalf("%q does not name the op and %q", err, c.mention)
			}
		})
	}
}

// TestPlanParams checks the params bytes of a plan field by field, so that
// the layouts documented next to the MSL structs are what is sent.
func TestPlanParams(t *testing.T) {
	op := &ops.Op{Kind: ops.Attention, Name: "attn", Attn: ops.AttnParams{Heads: 8, KVHeads: 2, HeadDim: 64, Context: 100}}
	plan, err := Plan(op, ops.Step{Tokens: make([]int32, 3), Pos: 5}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 2 || plan[0].Kernel != "kv_store" || plan[1].Kernel != "attention" {
		t.Fatalf("plan %v", plan)
	}
	p := plan[1].Params
	le := binary.LittleEndian
	fields := []uint32{le.Uint32(p), le.Uint32(p[4:]), le.Uint32(p[8:]), le.Uint32(p[12:]), le.Uint32(p[16:]), le.Uint32(p[20:])}
	if fmt.Sprint(fields) != "[8 2 64 5 3 100]" || le.Uint32(p[24:]) != 0x3e000000 { // 1/sqrt(64) = 0.125
		t.Fatalf("attention params % x", p)
	}
	if plan[1].Groups != [3]int{8, 3, 1} || plan[1].Threads != [3]int{128, 1, 1} || plan[1].Shared != (8+4*64)*4 {
		t.Fatalf("attention dispatch %+v", plan[1])
	}
	if CacheBytes(op) != 100*2*64*2 {
		t.Fatalf("CacheBytes = %d", CacheBytes(op))
	}
	if CacheBytes(&ops.Op{Kind: ops.MatMul}) != 0 {
		t.Fatal("CacheBytes of a mat-mul")
	}
	last, err := PlanSized(&ops.Op{Kind: ops.LastRow, Name: "last"}, ops.Step{}, []int{5 * 96}, 96)
	if err != nil {
		t.Fatal(err)
	}
	if last[0].Buffers[0] != (Binding{RoleIn0, 4 * 96 * 4}) || le.Uint32(last[0].Params) != 96 {
		t.Fatalf("last_row plan %+v", last[0])
	}
}

// addressSpaced matches a pointer or reference declaration of the kernels'
// types; addressSpace must come right before it.
var (
	declOfType   = regexp.MustCompile(`\b(?:float|half|int|uint|ushort|uchar|uint8_t|int8_t|uint32_t|int32_t|float2|float4|\w+Params)\s*[*&]`)
	addressSpace = regexp.MustCompile(`\b(?:device|threadgroup|constant|thread)\s+(?:const\s+)?$`)
)

// TestSourceIsMSL checks what the C++ harness cannot: every pointer and
// reference of the kernels names its address space (MSL requires it, C++
// under the shim ignores it), and Source is self-contained.
func TestSourceIsMSL(t *testing.T) {
	if strings.Contains(Source, `#include "`) {
		t.Fatal("Source includes a file, which newLibraryWithSource cannot")
	}
	if !strings.HasPrefix(Source, "#line 1 \"common.h\"\n") {
		t.Fatal("Source does not start with common.h")
	}
	for _, f := range []string{"matmul.metal", "attention.metal", "ops.metal"} {
		if !strings.Contains(Source, fmt.Sprintf("#line 1 %q", f)) {
			t.Errorf("Source lacks %s", f)
		}
	}
	lines := strings.Split(Source, "\n")
	for n, line := range lines {
		code, _, _ := strings.Cut(line, "//")
		for _, m := range declOfType.FindAllStringIndex(code, -1) {
			if !addressSpace.MatchString(code[:m[0]]) {
				t.Errorf("Source line %d: %q: a pointer or reference without an address space", n+1, strings.TrimSpace(line))
			}
		}
		for _, banned := range []string{"std::", "printf", "malloc", "static "} {
			if strings.Contains(code, banned) {
				t.Errorf("Source line %d uses %q, which MSL does not have", n+1, banned)
			}
		}
	}
	if _, err := buildSource(kernelFiles, "nowhere"); err == nil {
		t.Error("a missing kernel directory built a source")
	}
}
