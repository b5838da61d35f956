package llama

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"hybrid/models/builtin"
	"hybrid/models/gguf"
	"hybrid/ops"
	"hybrid/quant"
)

// shapesOf gives the tensor shapes c's weights must have, all F32.
func shapesOf(c Config) map[string]TensorShape {
	shapes := map[string]TensorShape{}
	for _, w := range c.Weights() {
		d := []uint64{uint64(w.Cols), uint64(w.Rows)}
		if w.Rows == 1 {
			d = d[:1]
		}
		shapes[w.Name] = TensorShape{Type: quant.F32, Dims: d}
	}
	return shapes
}

func goodMeta() fakeMeta {
	return fakeMeta{"general.architecture": "llama", "llama.block_count": 2, "llama.embedding_length": 64,
		"llama.attention.head_count": 8, "llama.attention.head_count_kv": 4, "llama.feed_forward_length": 172,
		"llama.context_length": 128, "llama.rope.freq_base": 10000.0, "llama.attention.layer_norm_rms_epsilon": 1e-5}
}

// TestConfigHeadSize checks an explicit head size that is not the
// embedding width over the heads: it sizes q, the attention and its output
// projection, and the rope; and that key and value sizes must agree.
func TestConfigHeadSize(t *testing.T) {
	want, types := testConfig()
	want.HeadDim, want.RopeDims = 16, 16
	md := goodMeta()
	md["llama.attention.key_length"] = 16
	md["llama.attention.value_length"] = 16
	shapes := shapesOf(want)
	if d := shapes["blk.0.attn_q.weight"].Dims; d[0] != 64 || d[1] != 128 {
		t.Fatalf("attn_q dims %v, want [64 128]", d)
	}
	if d := shapes["blk.0.attn_output.weight"].Dims; d[0] != 128 || d[1] != 64 {
		t.Fatalf("attn_output dims %v, want [128 64]", d)
	}
	got, err := ConfigFrom(md, shapes)
	if err != nil {
		t.Fatal(err)
	}
	if got.HeadDim != 16 || got.RopeDims != 16 || got.QDim() != 128 {
		t.Fatalf("head dim %d, rope dims %d, q width %d; want 16, 16, 128", got.HeadDim, got.RopeDims, got.QDim())
	}
	g, err := Build(got, types, 3, 0, 128)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range g.Ops {
		switch {
		case op.Name == "blk.0.rope_q":
			if g.Values[op.Out].Cols != 128 || op.Rope.HeadDim != 16 {
				t.Errorf("rope_q writes %d wide with heads of %d, want 128 and 16", g.Values[op.Out].Cols, op.Rope.HeadDim)
			}
		case op.Name == "blk.0.attn":
			if g.Values[op.Out].Cols != 128 || op.Attn.HeadDim != 16 {
				t.Errorf("attn writes %d wide with heads of %d, want 128 and 16", g.Values[op.Out].Cols, op.Attn.HeadDim)
			}
		}
	}

	// The default head size, 64/8, no longer fits the tensors.
	delete(md, "llama.attention.key_length")
	delete(md, "llama.attention.value_length")
	if _, err := ConfigFrom(md, shapes); err == nil || !strings.Contains(err.Error(), "attn_q.weight") {
		t.Errorf("tensors of head size 16 under a default of 8: %v", err)
	}

	for name, tc := range map[string]struct {
		set  map[string]any
		want string
	}{
		"value differs":   {map[string]any{"llama.attention.key_length": 16, "llama.attention.value_length": 8}, "key_length 16 differs from llama.attention.value_length 8"},
		"value alone":     {map[string]any{"llama.attention.value_length": 16}, "key_length 8 differs from llama.attention.value_length 16"},
		"zero key":        {map[string]any{"llama.attention.key_length": 0}, "llama.attention.key_length = 0 is out of range"},
		"uneven, no key":  {map[string]any{"llama.embedding_length": 60}, "embedding_length 60 is not a multiple of attention.head_count 8 and llama.attention.key_length is missing"},
		"rope over heads": {map[string]any{"llama.attention.key_length": 16, "llama.rope.dimension_count": 32}, "llama.rope.dimension_count = 32 is out of range (1..16)"},
	} {
		t.Run(name, func(t *testing.T) {
			md := goodMeta()
			for k, v := range tc.set {
				md[k] = v
			}
			if _, err := ConfigFrom(md, shapes); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestConfigRefusesRopeScaling checks that the rope scalings hybrid does not
// implement are refused by key, and the ones that change nothing load.
func TestConfigRefusesRopeScaling(t *testing.T) {
	c, _ := testConfig()
	shapes := shapesOf(c)
	for name, tc := range map[string]struct {
		set  map[string]any
		want string // "" when it must load
	}{
		"yarn":             {map[string]any{"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": 4.0}, `llama.rope.scaling.type is "yarn"`},
		"longrope":         {map[string]any{"llama.rope.scaling.type": "longrope"}, `llama.rope.scaling.type is "longrope"`},
		"linear 2":         {map[string]any{"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": 2.0}, "llama.rope.scaling.factor is 2"},
		"factor, no type":  {map[string]any{"llama.rope.scaling.factor": 8.0}, "llama.rope.scaling.factor is 8"},
		"scale_linear":     {map[string]any{"llama.rope.scale_linear": 4.0}, "llama.rope.scale_linear is 4"},
		"attn_factor":      {map[string]any{"llama.rope.scaling.attn_factor": 0.5}, "llama.rope.scaling.attn_factor is 0.5"},
		"none":             {map[string]any{"llama.rope.scaling.type": "none"}, ""},
		"linear 1":         {map[string]any{"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": 1.0}, ""},
		"factor 0 is none": {map[string]any{"llama.rope.scaling.factor": 0.0}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			md := goodMeta()
			for k, v := range tc.set {
				md[k] = v
			}
			_, err := ConfigFrom(md, shapes)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestConfigRopeFreqsShape checks rope_freqs.weight's type and length.
func TestConfigRopeFreqsShape(t *testing.T) {
	c, _ := testConfig() // rope dims 8: 4 factors
	for name, tc := range map[string]struct {
		shape TensorShape
		want  string
	}{
		"good":     {TensorShape{Type: quant.F32, Dims: []uint64{4}}, ""},
		"f16":      {TensorShape{Type: quant.F16, Dims: []uint64{4}}, "tensor rope_freqs.weight has type F16, want F32"},
		"too long": {TensorShape{Type: quant.F32, Dims: []uint64{8}}, "tensor rope_freqs.weight has dims [8], want [4]"},
		"2-d":      {TensorShape{Type: quant.F32, Dims: []uint64{4, 1}}, "tensor rope_freqs.weight has dims [4 1], want [4]"},
	} {
		t.Run(name, func(t *testing.T) {
			shapes := shapesOf(c)
			shapes[RopeFreqsTensor] = tc.shape
			got, err := ConfigFrom(goodMeta(), shapes)
			if tc.want == "" {
				if err != nil || !got.HasRopeFreqs {
					t.Fatalf("has rope freqs %v, error %v", got.HasRopeFreqs, err)
				}
				// Build refuses the config until the factors are read.
				if _, err := Build(got, typesOf(got), 1, 0, 128); err == nil || !strings.Contains(err.Error(), RopeFreqsTensor) {
					t.Errorf("a config without its factors built: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func typesOf(c Config) map[string]quant.Type {
	types := map[string]quant.Type{}
	for _, w := range c.Weights() {
		types[w.Name] = quant.F32
	}
	return types
}

// withRopeFreqs returns the built-in model's file with a rope_freqs.weight
// tensor of the given type, dims and data added, parsed as "m.gguf".
func withRopeFreqs(t *testing.T, typ quant.Type, dims []uint64, data []byte) *gguf.File {
	t.Helper()
	f, err := gguf.Parse(builtin.Model(), builtin.Name)
	if err != nil {
		t.Fatal(err)
	}
	tensors := append(append([]gguf.TensorInfo(nil), f.Tensors...), gguf.TensorInfo{Name: RopeFreqsTensor, Dims: dims, Type: typ})
	return rewritten(t, f, f.KV, tensors, [][]byte{data})
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// TestModelReadsRopeFreqs checks that a file's rope factors reach every RoPE
// op of its graph, and that bad factors are refused naming the tensor.
func TestModelReadsRopeFreqs(t *testing.T) {
	base, err := FromFile(withKV(t, "general.name", "x"), "m.gguf")
	if err != nil {
		t.Fatal(err)
	}
	half := base.Config.RopeDims / 2
	freqs := make([]float32, half)
	for i := range freqs {
		freqs[i] = 1 + float32(i)
	}
	m, err := FromFile(withRopeFreqs(t, quant.F32, []uint64{uint64(half)}, f32Bytes(freqs)), "m.gguf")
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Graph(2, 0, 16)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, op := range g.Ops {
		if op.Kind == ops.RoPE {
			n++
			if !op.Rope.Equal(ops.RopeParams{HeadDim: m.Config.HeadDim, Dims: m.Config.RopeDims, Base: m.Config.RopeBase, Freqs: freqs}) {
				t.Fatalf("op %s has rope %+v, want the file's factors %v", op, op.Rope, freqs)
			}
		}
	}
	if n != 2*m.Config.Layers {
		t.Fatalf("%d rope ops, want %d", n, 2*m.Config.Layers)
	}

	bad := append([]float32(nil), freqs...)
	bad[1] = 0
	if _, err := FromFile(withRopeFreqs(t, quant.F32, []uint64{uint64(half)}, f32Bytes(bad)), "m.gguf"); err == nil || !strings.Contains(err.Error(), "m.gguf: tensor rope_freqs.weight: factor 1 is 0") {
		t.Errorf("a zero factor: %v", err)
	}
	if _, err := FromFile(withRopeFreqs(t, quant.F32, []uint64{uint64(half + 1)}, f32Bytes(append(freqs, 1))), "m.gguf"); err == nil || !strings.Contains(err.Error(), "m.gguf: llama: tensor rope_freqs.weight has dims") {
		t.Errorf("one factor too many: %v", err)
	}
	f16 := make([]byte, 2*half)
	if _, err := FromFile(withRopeFreqs(t, quant.F16, []uint64{uint64(half)}, f16), "m.gguf"); err == nil || !strings.Contains(err.Error(), "rope_freqs.weight has type F16, want F32") {
		t.Errorf("F16 factors: %v", err)
	}
}
