package synth

import (
	"fmt"
	"math"
	"strings"

	"hybrid/models/gguf"
)

// RopeFreqs returns the rope frequency factors of the preset's llama3 rope
// scaling, one per rotated pair, as llama.cpp's converter computes them
// (conversion/llama.py, LlamaModel.generate_extra_tensors): pairs whose
// wavelength is under original_context/high_freq_factor keep factor 1,
// those over original_context/low_freq_factor get factor, and the band
// between is interpolated. The converter works in torch float32, so each
// step here is rounded to f32 as it is there; powf is taken as the
// correctly rounded power, which torch's may miss by an ulp in the smooth
// band: a file made here and one converted from the real model can differ
// there in the last bit, which matters to neither hybrid nor llama.cpp
// reading the same file. nil when the preset has no llama3 scaling.
func (p Preset) RopeFreqs() []float32 {
	s := p.Llama3Rope
	if s == nil {
		return nil
	}
	dim := p.HeadSize()
	lowWave := float32(float64(s.OriginalContext) / s.LowFreqFactor)
	highWave := float32(float64(s.OriginalContext) / s.HighFreqFactor)
	out := make([]float32, dim/2)
	for i := range out {
		e := float32(2*i) / float32(dim)
		freq := 1 / float32(math.Pow(float64(p.RopeBase), float64(e)))
		wave := float32(2*math.Pi) / freq
		switch {
		case wave < highWave:
			out[i] = 1
		case wave > lowWave:
			out[i] = float32(s.Factor)
		default:
			smooth := (float32(s.OriginalContext)/wave - float32(s.LowFreqFactor)) / (float32(s.HighFreqFactor) - float32(s.LowFreqFactor))
			out[i] = 1 / ((1-smooth)/float32(s.Factor) + smooth)
		}
	}
	return out
}

// maxVocabKVs bounds the tokenizer keys a vocabulary file may bring.
const maxVocabKVs = 64

// VocabKVs returns every tokenizer.* key of a GGUF file (a llama.cpp
// vocabulary file or a model), for Options.Vocab; the file must hold a
// token list.
func VocabKVs(f *gguf.File, name string) ([]gguf.KV, error) {
	var kvs []gguf.KV
	for _, kv := range f.KV {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			kvs = append(kvs, kv)
		}
	}
	if len(kvs) > maxVocabKVs {
		return nil, fmt.Errorf("synth: vocabulary %s: %d tokenizer keys, more than %d", name, len(kvs), maxVocabKVs)
	}
	if _, err := f.GetStrings("tokenizer.ggml.tokens"); err != nil {
		return nil, fmt.Errorf("synth: vocabulary %s: %w", name, err)
	}
	return kvs, nil
}

// withPre returns kvs with tokenizer.ggml.pre set to pre (a copy: the
// caller's slice is left alone).
func withPre(kvs []gguf.KV, pre string) []gguf.KV {
	out := make([]gguf.KV, 0, len(kvs)+1)
	for _, kv := range kvs {
		if kv.Key != "tokenizer.ggml.pre" {
			out = append(out, kv)
		}
	}
	return append(out, gguf.KV{Key: "tokenizer.ggml.pre", Value: pre})
}

// vocabSize is the length of the tokenizer.ggml.tokens array among kvs, or
// -1 when there is none.
func vocabSize(kvs []gguf.KV) int {
	for _, kv := range kvs {
		if kv.Key != "tokenizer.ggml.tokens" {
			continue
		}
		if a, ok := kv.Value.(gguf.Array); ok {
			if v, ok := a.Values.([]string); ok {
				return len(v)
			}
		}
	}
	return -1
}
