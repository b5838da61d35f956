package synth

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"hybrid/internal/testmodels"
	"hybrid/models/gguf"
	"hybrid/models/llama"
	"hybrid/quant"
)

// llamaBPE returns the tokenizer keys of llama.cpp's Llama 3 vocabulary file.
func llamaBPE(t *testing.T) []gguf.KV {
	t.Helper()
	path := filepath.Join(testmodels.Dir(t), "vocab", "ggml-vocab-llama-bpe.gguf")
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

// TestRopeFreqsLlama3 checks the llama3 factors against the converter's
// formula in float64: 1 for short wavelengths, the factor for long ones,
// and the interpolated band between, never decreasing.
func TestRopeFreqsLlama3(t *testing.T) {
	p, err := LookupPreset("llama-3.2-1b")
	if err != nil {
		t.Fatal(err)
	}
	got := p.RopeFreqs()
	if len(got) != 32 {
		t.Fatalf("%d factors, want 32 (head size 64 / 2)", len(got))
	}
	s := p.Llama3Rope
	for i, g := range got {
		freq := 1 / math.Pow(float64(p.RopeBase), float64(2*i)/64)
		wave := 2 * math.Pi / freq
		var want float64
		switch {
		case wave < float64(s.OriginalContext)/s.HighFreqFactor:
			want = 1
		case wave > float64(s.OriginalContext)/s.LowFreqFactor:
			want = s.Factor
		default:
			smooth := (float64(s.OriginalContext)/wave - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
			want = 1 / ((1-smooth)/s.Factor + smooth)
		}
		// The converter computes in float32: a few ulps of the factor.
		if math.Abs(float64(g)-want) > 1e-5*want {
			t.Errorf("factor %d = %g, want %g", i, g, want)
		}
		if i > 0 && g < got[i-1] {
			t.Errorf("factor %d = %g falls below factor %d = %g", i, g, i-1, got[i-1])
		}
	}
	if got[0] != 1 || got[31] != 32 {
		t.Errorf("factors run %g..%g, want 1..32", got[0], got[31])
	}
	if c := p.Config(); !c.HasRopeFreqs || len(c.RopeFreqs) != 32 || !c.TiedOutput {
		t.Errorf("config has rope freqs %v (%d), tied %v", c.HasRopeFreqs, len(c.RopeFreqs), c.TiedOutput)
	}
	if old, _ := LookupPreset("tinyllama-1.1b"); old.RopeFreqs() != nil {
		t.Error("tinyllama-1.1b has rope factors")
	}
}

// TestPlanLlama3 checks the Llama 3.2 file's layout without writing it: the
// vocabulary it needs, rope_freqs.weight first, no output.weight, and the
// head size keys.
func TestPlanLlama3(t *testing.T) {
	p, _ := LookupPreset("llama-3.2-1b")
	ft, _ := LookupFileType("Q8_0")
	if _, _, err := Plan(Options{Preset: p, Type: ft}); err == nil || !strings.Contains(err.Error(), "preset llama-3.2-1b needs a vocabulary file (--vocab)") {
		t.Fatalf("no vocabulary: %v", err)
	}
	vocab := llamaBPE(t)
	kvs, infos, err := Plan(Options{Preset: p, Type: ft, Vocab: vocab})
	if err != nil {
		t.Fatal(err)
	}
	if infos[0].Name != llama.RopeFreqsTensor || fmt.Sprint(infos[0].Dims) != "[32]" || infos[0].Type != quant.F32 {
		t.Errorf("first tensor %s %v %s, want %s [32] F32", infos[0].Name, infos[0].Dims, infos[0].Type, llama.RopeFreqsTensor)
	}
	for _, ti := range infos {
		if ti.Name == "output.weight" {
			t.Error("the tied model has output.weight")
		}
	}
	keys := map[string]any{}
	for _, kv := range kvs {
		keys[kv.Key] = kv.Value
	}
	if keys["llama.attention.key_length"] != uint32(64) || keys["llama.attention.value_length"] != uint32(64) {
		t.Errorf("key_length %v, value_length %v, want 64", keys["llama.attention.key_length"], keys["llama.attention.value_length"])
	}
	if keys["tokenizer.ggml.model"] != "gpt2" || keys["tokenizer.ggml.pre"] != "llama-bpe" {
		t.Errorf("tokenizer %v, pre %v: not the vocabulary file's", keys["tokenizer.ggml.model"], keys["tokenizer.ggml.pre"])
	}
	if len(kvs) != len(keys) {
		t.Errorf("%d keys, %d distinct", len(kvs), len(keys))
	}

	// Another preset's vocabulary size is refused.
	old, _ := LookupPreset("stories15m")
	if _, _, err := Plan(Options{Preset: old, Type: ft, Vocab: vocab}); err == nil || !strings.Contains(err.Error(), "the vocabulary has 128256 tokens, the preset 32000") {
		t.Errorf("a 128256-token vocabulary for stories15m: %v", err)
	}
}

// TestWriteLlama3Small writes a small model with Llama 3.2's features (rope
// factors, tied output, the real vocabulary) and loads it: the factors
// reach the config and the tokenizer is Llama 3's.
func TestWriteLlama3Small(t *testing.T) {
	p, _ := LookupPreset("llama-3.2-1b")
	p.Name, p.Layers, p.Dim, p.Heads, p.KVHeads, p.FFN = "llama-3-small", 1, 64, 2, 1, 64
	ft, _ := LookupFileType("Q8_0")
	path := filepath.Join(t.TempDir(), "s.gguf")
	if err := Write(path, Options{Preset: p, Type: ft, Seed: 3, Vocab: llamaBPE(t)}); err != nil {
		t.Fatal(err)
	}
	m, err := llama.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := m.Config
	want := p.RopeFreqs()
	if !c.HasRopeFreqs || fmt.Sprint(c.RopeFreqs) != fmt.Sprint(want) || !c.TiedOutput || c.HeadDim != 32 || c.Vocab != 128256 {
		t.Fatalf("config %+v; want factors %v, tied, head 32, vocab 128256", c, want)
	}
	if want[0] != 1 || want[len(want)-1] != 32 {
		t.Errorf("factors %v do not run from 1 to 32", want)
	}
	if ids := m.Tokenizer.Encode("Hello world", true); len(ids) != 3 || ids[0] != 128000 {
		t.Errorf("Encode(Hello world) = %v, want BOS 128000 and two tokens", ids)
	}
}
