package synth

import (
	"path/filepath"
	"testing"

	"hybrid/internal/testmodels"
	"hybrid/models/gguf"
	"hybrid/models/llama"
	"hybrid/quant"
)

// vocabKVs returns the tokenizer keys of llama.cpp's vocabulary file
// ggml-vocab-NAME.gguf.
func vocabKVs(t *testing.T, name string) []gguf.KV {
	t.Helper()
	path := filepath.Join(testmodels.Dir(t), "vocab", "ggml-vocab-"+name+".gguf")
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kvs, err := VocabKVs(f, path)
	if err != nil {
		t.Fatal(err)
	}
	return kvs
}

// TestWriteNewPresetsSmall writes each of the presets of the models people
// run, shrunk to one small layer but with their features (architecture,
// head size, biases, per-head norms, tied output, vocabulary and its
// pre-tokenizer), and loads it back: the config and the tokenizer are the
// ones the real model's file gives.
func TestWriteNewPresetsSmall(t *testing.T) {
	for _, tc := range []struct {
		preset, vocab, pre string
		headDim            int
		biases, qkNorm     bool
	}{
		{"qwen2.5-0.5b", "qwen2", "qwen2", 16, true, false},
		{"qwen3-0.6b", "qwen2", "qwen2", 32, false, true},
		{"smollm2-135m", "gpt-2", "smollm", 16, false, false},
	} {
		t.Run(tc.preset, func(t *testing.T) {
			p, err := LookupPreset(tc.preset)
			if err != nil {
				t.Fatal(err)
			}
			p.Layers, p.Dim, p.Heads, p.KVHeads, p.FFN = 1, 64, 4, 2, 64
			if p.HeadDim != 0 {
				p.HeadDim = 32 // wider than Dim/Heads, as Qwen3's
			}
			ft, _ := LookupFileType("Q8_0")
			path := filepath.Join(t.TempDir(), "s.gguf")
			if err := Write(path, Options{Preset: p, Type: ft, Seed: 5, Vocab: vocabKVs(t, tc.vocab)}); err != nil {
				t.Fatal(err)
			}
			m, err := llama.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			c := m.Config
			if c.Arch != p.Architecture() || c.HeadDim != tc.headDim || c.RopeNeox != (p.Architecture() != "llama") ||
				c.QKNorm != tc.qkNorm || (len(c.Biases) == 3) != tc.biases || !c.TiedOutput {
				t.Fatalf("config %+v", c)
			}
			if got, _ := m.File.GetString("tokenizer.ggml.pre"); got != tc.pre {
				t.Errorf("tokenizer.ggml.pre %q, want %q", got, tc.pre)
			}
			if tc.biases && m.Types["blk.0.attn_k.bias"] != quant.F32 {
				t.Errorf("attn_k.bias is %s, want F32", m.Types["blk.0.attn_k.bias"])
			}
			g, err := m.Graph(3, 0, 16)
			if err != nil {
				t.Fatal(err)
			}
			if g.Values[g.Output].Cols != p.Vocab {
				t.Errorf("logits of %d, want %d", g.Values[g.Output].Cols, p.Vocab)
			}
		})
	}
}

// TestTiedEmbeddingTakesOutputRule checks llama-quantize's rule for a model
// without output.weight: token_embd is quantized as the output would be
// (Q6_K in a Q4_K_M file; Q8_0 when its rows do not split into 256-blocks),
// while an untied model's token_embd keeps the file's base type.
func TestTiedEmbeddingTakesOutputRule(t *testing.T) {
	ft, _ := LookupFileType("Q4_K_M")
	if got := ft.TensorType("token_embd.weight", -1, 16, 2048, true); got != quant.Q6_K {
		t.Errorf("tied token_embd of 2048: %s, want Q6_K", got)
	}
	if got := ft.TensorType("token_embd.weight", -1, 24, 896, true); got != quant.Q8_0 {
		t.Errorf("tied token_embd of 896: %s, want Q8_0", got)
	}
	if got := ft.TensorType("token_embd.weight", -1, 22, 2048, false); got != quant.Q4_K {
		t.Errorf("untied token_embd: %s, want Q4_K", got)
	}
	// The 256-block types fall back as llama-quantize's tensor_type_fallback.
	for _, c := range []struct {
		ft   string
		want quant.Type
	}{{"Q2_K", quant.Q4_0}, {"Q3_K", quant.Q4_0}, {"IQ4_XS", quant.IQ4_NL}, {"IQ4_NL", quant.IQ4_NL}} {
		f, _ := LookupFileType(c.ft)
		if got := f.TensorType("blk.0.attn_q.weight", 0, 24, 896, true); got != c.want {
			t.Errorf("%s with rows of 896: %s, want %s", c.ft, got, c.want)
		}
	}
}
