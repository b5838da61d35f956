package synth

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hybrid/models/gguf"
	"hybrid/models/llama"
	"hybrid/quant"
)

// kind says which of llama.cpp's per-tensor rules a weight falls under.
func kind(name string) string {
	switch {
	case name == "token_embd.weight":
		return "token_embd"
	case name == "output.weight":
		return "output"
	case strings.HasSuffix(name, "_norm.weight"):
		return "norm"
	case strings.HasSuffix(name, ".attn_v.weight"):
		return "attn_v"
	case strings.HasSuffix(name, ".ffn_down.weight"):
		return "ffn_down"
	}
	return "other"
}

func plan(t *testing.T, preset, typ string) (map[string]gguf.KV, []gguf.TensorInfo) {
	t.Helper()
	p, err := LookupPreset(preset)
	if err != nil {
		t.Fatal(err)
	}
	ft, err := LookupFileType(typ)
	if err != nil {
		t.Fatal(err)
	}
	kvs, infos, err := Plan(Options{Preset: p, Type: ft, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 + 9*p.Layers; len(infos) != want {
		t.Fatalf("%s %s: %d tensors, want %d", preset, typ, len(infos), want)
	}
	m := map[string]gguf.KV{}
	for _, kv := range kvs {
		m[kv.Key] = kv
	}
	return m, infos
}

// checkTypes compares every tensor's type with want(kind, layer, cols), and
// norms with F32.
func checkTypes(t *testing.T, infos []gguf.TensorInfo, want func(kind string, layer, cols int) quant.Type) {
	t.Helper()
	for _, ti := range infos {
		k := kind(ti.Name)
		if k == "norm" {
			if len(ti.Dims) != 1 || ti.Type != quant.F32 {
				t.Errorf("%s: dims %v type %v, want one dim of F32", ti.Name, ti.Dims, ti.Type)
			}
			continue
		}
		if len(ti.Dims) != 2 {
			t.Errorf("%s: dims %v, want 2", ti.Name, ti.Dims)
			continue
		}
		layer := -1
		fmt.Sscanf(ti.Name, "blk.%d.", &layer)
		if w := want(k, layer, int(ti.Dims[0])); ti.Type != w {
			t.Errorf("%s (%d cols): %v, llama-quantize gives %v", ti.Name, ti.Dims[0], ti.Type, w)
		}
	}
}

func checkFileType(t *testing.T, kvs map[string]gguf.KV, id uint32) {
	t.Helper()
	if v, ok := kvs["general.file_type"].Value.(uint32); !ok || v != id {
		t.Errorf("general.file_type = %v, want %d", kvs["general.file_type"].Value, id)
	}
}

// TestPlanTinyLlamaKQuants checks the Q4_K_M and Q5_K_M mixes at a shape whose
// rows are all multiples of 256, against llama.cpp's llama_tensor_get_type:
// token_embd keeps the base type, output is Q6_K, and attn_v and ffn_down are
// Q6_K on the use_more_bits layers. With 22 layers those are i < 2, i >= 19,
// and (i-2)%3 == 2; the list is spelled out so that a wrong formula fails.
func TestPlanTinyLlamaKQuants(t *testing.T) {
	moreBits := map[int]bool{0: true, 1: true, 4: true, 7: true, 10: true, 13: true, 16: true, 19: true, 20: true, 21: true}
	for _, c := range []struct {
		typ  string
		id   uint32
		base quant.Type
	}{
		{"Q4_K_M", 15, quant.Q4_K},
		{"Q5_K_M", 17, quant.Q5_K},
	} {
		t.Run(c.typ, func(t *testing.T) {
			kvs, infos := plan(t, "tinyllama-1.1b", c.typ)
			checkFileType(t, kvs, c.id)
			bumped := 0
			checkTypes(t, infos, func(k string, layer, cols int) quant.Type {
				switch k {
				case "output":
					return quant.Q6_K
				case "attn_v", "ffn_down":
					if moreBits[layer] {
						bumped++
						return quant.Q6_K
					}
				}
				return c.base
			})
			if bumped != 2*len(moreBits) {
				t.Errorf("%d attn_v/ffn_down tensors on use_more_bits layers, want %d", bumped, 2*len(moreBits))
			}
		})
	}
}

// TestPlanTinyLlamaPlain checks the single-type recipes: the output weight is
// bumped to Q6_K except for Q8_0, F16 and F32 files keep every matrix in their
// type, and the pure K types give every matrix the same type.
func TestPlanTinyLlamaPlain(t *testing.T) {
	for _, c := range []struct {
		typ          string
		id           uint32
		base, output quant.Type
	}{
		{"F32", 0, quant.F32, quant.F32},
		{"F16", 1, quant.F16, quant.F16},
		{"BF16", 32, quant.BF16, quant.BF16},
		{"Q8_0", 7, quant.Q8_0, quant.Q8_0},
		{"Q4_0", 2, quant.Q4_0, quant.Q6_K},
		{"Q4_1", 3, quant.Q4_1, quant.Q6_K},
		{"Q5_0", 8, quant.Q5_0, quant.Q6_K},
		{"Q5_1", 9, quant.Q5_1, quant.Q6_K},
		{"Q6_K", 18, quant.Q6_K, quant.Q6_K},
		{"Q4_K", 14, quant.Q4_K, quant.Q4_K},
		{"Q5_K", 16, quant.Q5_K, quant.Q5_K},
	} {
		t.Run(c.typ, func(t *testing.T) {
			kvs, infos := plan(t, "tinyllama-1.1b", c.typ)
			checkFileType(t, kvs, c.id)
			checkTypes(t, infos, func(k string, layer, cols int) quant.Type {
				if k == "output" {
					return c.output
				}
				return c.base
			})
		})
	}
}

// TestPlanStories15MFallback checks the fallbacks at stories15m's shape: rows
// of 288 are not a multiple of 256, so K-quants fall to the 32-block types
// (Q4_K→Q5_0, Q5_K→Q5_1, Q6_K→Q8_0), while ffn_down's rows of 768 = 3·256 keep
// theirs. With 6 layers the use_more_bits layers are 2 and 5.
func TestPlanStories15MFallback(t *testing.T) {
	p, _ := LookupPreset("stories15m")
	if p.Dim%quant.QK_K == 0 || p.FFN%quant.QK_K != 0 {
		t.Fatalf("stories15m: dim %d, FFN %d; the test assumes only the FFN is a multiple of 256", p.Dim, p.FFN)
	}
	fb := map[quant.Type]quant.Type{quant.Q4_K: quant.Q5_0, quant.Q5_K: quant.Q5_1, quant.Q6_K: quant.Q8_0}
	fall := func(tp quant.Type, cols int) quant.Type {
		if cols%quant.QK_K != 0 {
			if f, ok := fb[tp]; ok {
				return f
			}
		}
		return tp
	}
	moreBits := map[int]bool{2: true, 5: true}
	for _, c := range []struct {
		typ    string
		base   quant.Type
		output quant.Type // before the fallback
		mixed  bool
	}{
		{"Q4_K_M", quant.Q4_K, quant.Q6_K, true},
		{"Q5_K_M", quant.Q5_K, quant.Q6_K, true},
		{"Q6_K", quant.Q6_K, quant.Q6_K, false},
		{"Q4_K", quant.Q4_K, quant.Q4_K, false},
		{"Q5_K", quant.Q5_K, quant.Q5_K, false},
		{"Q4_0", quant.Q4_0, quant.Q6_K, false},
		{"Q8_0", quant.Q8_0, quant.Q8_0, false},
	} {
		t.Run(c.typ, func(t *testing.T) {
			_, infos := plan(t, "stories15m", c.typ)
			kept := 0
			checkTypes(t, infos, func(k string, layer, cols int) quant.Type {
				tp := c.base
				switch {
				case k == "output":
					tp = c.output
				case c.mixed && (k == "attn_v" || k == "ffn_down") && moreBits[layer]:
					tp = quant.Q6_K
				}
				if f := fall(tp, cols); f != tp {
					return f
				}
				if tp.BlockSize() == quant.QK_K {
					kept++
				}
				return tp
			})
			// Spelled out for Q4_K_M, so that the helper above cannot hide a
			// mistake: the 288-column matrices are 32-block types.
			if c.typ == "Q4_K_M" {
				want := map[string]quant.Type{
					"token_embd.weight":     quant.Q5_0,
					"output.weight":         quant.Q8_0,
					"blk.0.attn_q.weight":   quant.Q5_0,
					"blk.0.attn_v.weight":   quant.Q5_0,
					"blk.2.attn_v.weight":   quant.Q8_0,
					"blk.0.ffn_down.weight": quant.Q4_K,
					"blk.2.ffn_down.weight": quant.Q6_K,
					"blk.5.ffn_down.weight": quant.Q6_K,
					"blk.3.ffn_gate.weight": quant.Q5_0,
				}
				for _, ti := range infos {
					if w, ok := want[ti.Name]; ok && ti.Type != w {
						t.Errorf("%s: %v, want %v", ti.Name, ti.Type, w)
					}
				}
			}
			if c.base.BlockSize() == quant.QK_K && kept != p.Layers {
				t.Errorf("%d tensors kept a K-quant, want the %d ffn_down", kept, p.Layers)
			}
		})
	}
}

func writeStories(t *testing.T, path string, seed uint64) []byte {
	t.Helper()
	p, _ := LookupPreset("stories15m")
	ft, _ := LookupFileType("Q8_0")
	if err := Write(path, Options{Preset: p, Type: ft, Seed: seed}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWriteDeterministicAndLoads writes stories15m Q8_0 three times: the same
// seed (and a different thread count) gives the same bytes, another seed
// different weights; the file parses, loads as a Llama model with a 32000-token
// tokenizer, and its weights have the scale synth intends.
func TestWriteDeterministicAndLoads(t *testing.T) {
	dir := t.TempDir()
	a := writeStories(t, filepath.Join(dir, "a.gguf"), 7)
	b := writeStories(t, filepath.Join(dir, "b.gguf"), 7)
	if !bytes.Equal(a, b) {
		t.Fatalf("two writes with seed 7 differ (%d and %d bytes)", len(a), len(b))
	}
	p, _ := LookupPreset("stories15m")
	ft, _ := LookupFileType("Q8_0")
	one := filepath.Join(dir, "one.gguf")
	if err := Write(one, Options{Preset: p, Type: ft, Seed: 7, Threads: 1}); err != nil {
		t.Fatal(err)
	}
	if c, err := os.ReadFile(one); err != nil || !bytes.Equal(a, c) {
		t.Fatalf("a write with 1 thread differs from one with GOMAXPROCS (err %v)", err)
	}
	c := writeStories(t, filepath.Join(dir, "c.gguf"), 8)
	if len(c) != len(a) {
		t.Fatalf("seed 8 gives %d bytes, seed 7 %d", len(c), len(a))
	}
	if bytes.Equal(a, c) {
		t.Fatal("seeds 7 and 8 give identical files")
	}

	f, err := gguf.Open(filepath.Join(dir, "a.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, infos, _ := Plan(Options{Preset: p, Type: ft, Seed: 7})
	if len(f.Tensors) != len(infos) {
		t.Fatalf("file has %d tensors, plan %d", len(f.Tensors), len(infos))
	}
	for i, ti := range f.Tensors {
		if ti.Name != infos[i].Name || ti.Type != infos[i].Type || fmt.Sprint(ti.Dims) != fmt.Sprint(infos[i].Dims) {
			t.Errorf("tensor %d: %s %v %v, plan %s %v %v", i, ti.Name, ti.Type, ti.Dims, infos[i].Name, infos[i].Type, infos[i].Dims)
		}
	}
	if v, err := f.GetUint("general.file_type"); err != nil || v != 7 {
		t.Errorf("general.file_type = %d (%v), want 7", v, err)
	}
	if arch, _ := f.String("general.architecture"); arch != "llama" {
		t.Errorf("general.architecture = %q", arch)
	}

	// Weights: embeddings near unit normal, a matrix near 1/sqrt(cols), the
	// projections into the residual stream (attn_output, ffn_down) a further
	// 1/sqrt(2·layers) narrower, the output 2/sqrt(cols), norm gains near 1.
	// The differing seed must change them, not only the name.
	residual := 1 / math.Sqrt(2*6)
	stats := func(f *gguf.File, name string) (mean, sd float64) {
		ti, ok := f.Tensor(name)
		if !ok {
			t.Fatalf("no tensor %s", name)
		}
		vals := make([]float32, ti.Elements())
		if err := quant.Dequantize(ti.Type, f.TensorData(ti), vals); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var s, s2 float64
		for _, v := range vals {
			s += float64(v)
			s2 += float64(v) * float64(v)
		}
		n := float64(len(vals))
		mean = s / n
		return mean, math.Sqrt(s2/n - mean*mean)
	}
	for _, c := range []struct {
		name          string
		mean, sd, tol float64 // tol: relative, wider for the 288 values of a norm
	}{
		{"token_embd.weight", 0, 1, 0.05},
		{"blk.0.attn_q.weight", 0, 1 / math.Sqrt(288), 0.05},
		{"blk.0.attn_output.weight", 0, residual / math.Sqrt(288), 0.05},
		{"blk.0.ffn_down.weight", 0, residual / math.Sqrt(768), 0.05},
		{"blk.5.ffn_gate.weight", 0, 1 / math.Sqrt(288), 0.05},
		{"output.weight", 0, 8 / math.Sqrt(288), 0.05},
		{"blk.3.attn_norm.weight", 1, 0.1, 0.25},
	} {
		mean, sd := stats(f, c.name)
		if math.Abs(mean-c.mean) > c.tol*c.sd || math.Abs(sd-c.sd) > c.tol*c.sd {
			t.Errorf("%s: mean %.4g sd %.4g, want about %g and %g", c.name, mean, sd, c.mean, c.sd)
		}
	}
	fc, err := gguf.Parse(c, "c.gguf")
	if err != nil {
		t.Fatal(err)
	}
	ta, _ := f.TensorDataByName("blk.0.attn_q.weight")
	tc, _ := fc.TensorDataByName("blk.0.attn_q.weight")
	if bytes.Equal(ta, tc) {
		t.Error("seeds 7 and 8 give the same blk.0.attn_q.weight")
	}

	m, err := llama.Load(filepath.Join(dir, "a.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if n := m.Tokenizer.VocabSize(); n != 32000 {
		t.Errorf("tokenizer has %d tokens, want 32000", n)
	}
	cfg := m.Config
	if cfg.Layers != 6 || cfg.Dim != 288 || cfg.Heads != 6 || cfg.KVHeads != 6 || cfg.FFN != 768 || cfg.Vocab != 32000 || cfg.TiedOutput {
		t.Errorf("config %+v does not match stories15m", cfg)
	}
	ids := m.Tokenizer.Encode("Once upon a time", true)
	if len(ids) < 2 || ids[0] != 1 {
		t.Errorf("Encode(Once upon a time) = %v, want BOS then pieces", ids)
	}
	if s := m.Tokenizer.Decode(ids[1:]); s != "Once upon a time" {
		t.Errorf("Decode(Encode(Once upon a time)) = %q", s)
	}
}

// TestWriteMissingDirectory checks that a write into a directory that does not
// exist fails and leaves nothing behind.
func TestWriteMissingDirectory(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "missing")
	path := filepath.Join(dir, "m.gguf")
	p, _ := LookupPreset("stories15m")
	ft, _ := LookupFileType("Q8_0")
	err := Write(path, Options{Preset: p, Type: ft, Seed: 1})
	if err == nil {
		t.Fatal("Write into a missing directory succeeded")
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Logf("error (not ErrNotExist): %v", err)
	}
	if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("%s exists after a failed write (stat: %v)", path, serr)
	}
	if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("Write created the directory %s", dir)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Errorf("%s holds %d entries after a failed write", root, len(ents))
	}
}

// TestWriteBadPresetLeavesNothing checks that a refused write (a preset whose
// heads do not divide its width) leaves an existing file at the path as it was
// and no temporary file beside it.
func TestWriteBadPresetLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, _ := LookupPreset("stories15m")
	p.Heads = 7 // 288 is not a multiple of 7
	ft, _ := LookupFileType("Q8_0")
	if err := Write(path, Options{Preset: p, Type: ft}); err == nil {
		t.Fatal("Write of a preset whose heads do not divide its width succeeded")
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "old" {
		t.Errorf("the existing file changed: %q, %v", b, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d entries in the directory, want the old file only", len(ents))
	}
}
