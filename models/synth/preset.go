// Package synth writes synthetic Llama models: deterministic random weights at
// the shapes of real models, quantized with llama.cpp's recipes, as GGUF files
// that llama.cpp also loads. Benchmarks run on them, since nothing is
// downloaded.
package synth

import (
	"fmt"
	"sort"
	"strings"
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
}

var presets = map[string]Preset{
	"stories15m": {Name: "stories15m", Layers: 6, Dim: 288, Heads: 6, KVHeads: 6, FFN: 768, Vocab: 32000, Context: 256,
		RopeBase: 10000, Eps: 1e-5, Source: "karpathy/llama2.c stories15M (dim 288, 6 layers, 6 heads, hidden 768)"},
	"tinyllama-1.1b": {Name: "tinyllama-1.1b", Layers: 22, Dim: 2048, Heads: 32, KVHeads: 4, FFN: 5632, Vocab: 32000, Context: 2048,
		RopeBase: 10000, Eps: 1e-5, Source: "TinyLlama/TinyLlama-1.1B-Chat-v1.0 config.json"},
	"llama-7b": {Name: "llama-7b", Layers: 32, Dim: 4096, Heads: 32, KVHeads: 32, FFN: 11008, Vocab: 32000, Context: 4096,
		RopeBase: 10000, Eps: 1e-5, Source: "meta-llama/Llama-2-7b-hf config.json"},
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
	kv := int64(p.KVHeads * (p.Dim / p.Heads))
	d := int64(p.Dim)
	perLayer := 2*d*d + 2*kv*d + 3*int64(p.FFN)*d + 2*d
	return int64(p.Layers)*perLayer + 2*int64(p.Vocab)*d + d
}
