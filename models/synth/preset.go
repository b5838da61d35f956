// Package synth writes synthetic Llama models: deterministic random weights at
// the shapes of real models, quantized with llama.cpp's recipes, as GGUF files
// that llama.cpp also loads. Benchmarks run on them, since nothing is
// downloaded.
package synth

import (
	"fmt"
	"sort"
	"strings"

	"hybrid/models/llama"
)

// Preset is the shape of a real model.
type Preset struct {
	Name     string
	Layers   int
	Dim      int
	Heads    int
	KVHeads  int
	FFN      int
	Vocab    int
	Context  int
	RopeBase float32
	Eps      float32
	Source   string // where the shape comes from
	// Tied says the model has no output.weight: the output projection
	// reuses token_embd, as Llama 3.2's small models do.
	Tied bool
	// Llama3Rope, when not nil, is the model's "llama3" rope scaling,
	// which the file carries as rope_freqs.weight (RopeFreqs).
	Llama3Rope *Llama3Rope
	// VocabFrom names the vocabulary file the preset needs (Options.Vocab):
	// its tokenizer is a real one, not the generated SentencePiece pieces.
	VocabFrom string
	// Arch is the general.architecture ("llama" when empty): qwen2 and
	// qwen3 rotate NEOX-style, and qwen3 norms each head of Q and K.
	Arch string
	// HeadDim is the head size where the config gives one that is not
	// Dim/Heads (Qwen3); 0 means Dim/Heads.
	HeadDim int
	// QKVBias gives every layer's Q, K and V projections a bias (Qwen2).
	QKVBias bool
	// Pre, when not empty, replaces the vocabulary file's
	// tokenizer.ggml.pre: the pre-tokenizer of the model the preset
	// stands for, where its own vocabulary is not at hand.
	Pre string
}

// Architecture is the preset's general.architecture.
func (p Preset) Architecture() string {
	if p.Arch == "" {
		return "llama"
	}
	return p.Arch
}

// HeadSize is the features per attention head.
func (p Preset) HeadSize() int {
	if p.HeadDim != 0 {
		return p.HeadDim
	}
	return p.Dim / p.Heads
}

// Llama3Rope is the rope_scaling of a Hugging Face config.json whose
// rope_type is "llama3".
type Llama3Rope struct {
	Factor, LowFreqFactor, HighFreqFactor float64
	OriginalContext                       int // original_max_position_embeddings
}

var presets = map[string]Preset{
	"stories15m": {Name: "stories15m", Layers: 6, Dim: 288, Heads: 6, KVHeads: 6, FFN: 768, Vocab: 32000, Context: 256,
		RopeBase: 10000, Eps: 1e-5, Source: "karpathy/llama2.c stories15M (dim 288, 6 layers, 6 heads, hidden 768)"},
	"tinyllama-1.1b": {Name: "tinyllama-1.1b", Layers: 22, Dim: 2048, Heads: 32, KVHeads: 4, FFN: 5632, Vocab: 32000, Context: 2048,
		RopeBase: 10000, Eps: 1e-5, Source: "TinyLlama/TinyLlama-1.1B-Chat-v1.0 config.json"},
	"llama-7b": {Name: "llama-7b", Layers: 32, Dim: 4096, Heads: 32, KVHeads: 32, FFN: 11008, Vocab: 32000, Context: 4096,
		RopeBase: 10000, Eps: 1e-5, Source: "meta-llama/Llama-2-7b-hf config.json"},
	// The real model's context is 131072; 4096 keeps the KV cache of a
	// benchmark small. Its rope is unaffected: the llama3 factors depend
	// on original_max_position_embeddings, not on the context.
	"llama-3.2-1b": {Name: "llama-3.2-1b", Layers: 16, Dim: 2048, Heads: 32, KVHeads: 8, FFN: 8192, Vocab: 128256, Context: 4096,
		RopeBase: 500000, Eps: 1e-5, Tied: true,
		Llama3Rope: &Llama3Rope{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192},
		VocabFrom:  "a Llama 3 vocabulary (tokenizer.ggml.pre llama-bpe), e.g. ggml-vocab-llama-bpe.gguf",
		Source:     "meta-llama/Llama-3.2-1B config.json"},
	// Qwen2.5's context is 32768; 4096 as for llama-3.2-1b. Its
	// embedding table has 151936 rows, as the qwen2 vocabulary file has
	// tokens (the converter pads the tokenizer's to config.json's size).
	"qwen2.5-0.5b": {Name: "qwen2.5-0.5b", Arch: "qwen2", Layers: 24, Dim: 896, Heads: 14, KVHeads: 2, FFN: 4864, Vocab: 151936, Context: 4096,
		RopeBase: 1000000, Eps: 1e-6, Tied: true, QKVBias: true,
		VocabFrom: "a Qwen2 vocabulary (tokenizer.ggml.pre qwen2), e.g. ggml-vocab-qwen2.gguf",
		Source:    "Qwen/Qwen2.5-0.5B config.json"},
	"qwen3-0.6b": {Name: "qwen3-0.6b", Arch: "qwen3", Layers: 28, Dim: 1024, Heads: 16, KVHeads: 8, HeadDim: 128, FFN: 3072, Vocab: 151936, Context: 4096,
		RopeBase: 1000000, Eps: 1e-6, Tied: true,
		VocabFrom: "a Qwen2 vocabulary (tokenizer.ggml.pre qwen2), e.g. ggml-vocab-qwen2.gguf",
		Source:    "Qwen/Qwen3-0.6B config.json"},
	// SmolLM2's own vocabulary (49152 tokens) is not among the files at
	// hand: the preset takes GPT-2's byte-level BPE vocabulary (50257
	// tokens, so 0.6M more embedding parameters) with SmolLM2's
	// pre-tokenizer, which splits digits one by one.
	"smollm2-135m": {Name: "smollm2-135m", Layers: 30, Dim: 576, Heads: 9, KVHeads: 3, FFN: 1536, Vocab: 50257, Context: 8192,
		RopeBase: 100000, Eps: 1e-5, Tied: true, Pre: "smollm",
		VocabFrom: "a GPT-2 vocabulary (ggml-vocab-gpt-2.gguf; its tokenizer.ggml.pre becomes smollm)",
		Source:    "HuggingFaceTB/SmolLM2-135M config.json (vocabulary: GPT-2's, see above)"},
}

// LookupPreset returns the preset named name.
func LookupPreset(name string) (Preset, error) {
	if p, ok := presets[strings.ToLower(name)]; ok {
		return p, nil
	}
	return Preset{}, fmt.Errorf("synth: unknown preset %q (have %s)", name, strings.Join(PresetNames(), ", "))
}

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	var ns []string
	for n := range presets {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// Params is the parameter count of the preset's weights.
func (p Preset) Params() int64 {
	kv := int64(p.KVHeads * p.HeadSize())
	q := int64(p.Heads * p.HeadSize())
	d := int64(p.Dim)
	perLayer := 2*q*d + 2*kv*d + 3*int64(p.FFN)*d + 2*d
	if p.QKVBias {
		perLayer += q + 2*kv
	}
	if llama.ArchQKNorm(p.Architecture()) {
		perLayer += 2 * int64(p.HeadSize())
	}
	embd := 2 * int64(p.Vocab) * d
	if p.Tied {
		embd /= 2
	}
	return int64(p.Layers)*perLayer + embd + d
}
