package tokenizer

import (
	"fmt"

	"hybrid/models/gguf"
)

// FromGGUF builds the tokenizer described by a GGUF file's tokenizer.ggml.*
// metadata. Keys the file leaves out keep NewVocab's defaults; a key that is
// present with the wrong type is an error naming the file (once) and the key,
// as is a missing or unsupported tokenizer.ggml.model.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	model, err := f.GetString("tokenizer.ggml.model")
	if err != nil {
		return nil, fmt.Errorf("no tokenizer: %w", err) // gguf's error names the file
	}
	if model != "llama" {
		return nil, fmt.Errorf("%s: tokenizer.ggml.model is %q: only the Llama SentencePiece tokenizer (\"llama\") is supported", f.Path, model)
	}
	v := NewVocab(model)
	if v.Tokens, err = f.GetStrings("tokenizer.ggml.tokens"); err != nil {
		return nil, err // gguf's error names the file and the key
	}
	if _, ok := f.Value("tokenizer.ggml.scores"); ok {
		if v.Scores, err = f.GetFloat32s("tokenizer.ggml.scores"); err != nil {
			return nil, err // gguf's error names the file and the key
		}
	}
	if _, ok := f.Value("tokenizer.ggml.token_type"); ok {
		if v.Types, err = f.GetInt32s("tokenizer.ggml.token_type"); err != nil {
			return nil, err // gguf's error names the file and the key
		}
	}
	ids := []struct {
		key string
		dst *int32
	}{
		{"tokenizer.ggml.bos_token_id", &v.BOS},
		{"tokenizer.ggml.eos_token_id", &v.EOS},
		{"tokenizer.ggml.unknown_token_id", &v.UNK},
		{"tokenizer.ggml.padding_token_id", &v.PAD},
		{"tokenizer.ggml.eot_token_id", &v.EOT},
	}
	for _, id := range ids {
		if _, ok := f.Value(id.key); !ok {
			continue
		}
		n, err := f.GetInt(id.key)
		if err != nil {
			return nil, err // gguf's error names the file and the key
		}
		if n < 0 || n >= int64(len(v.Tokens)) {
			// llama.cpp ignores an id outside the vocabulary (files write
			// uint32(-1) for "none") and keeps its default.
			continue
		}
		*id.dst = int32(n)
	}
	flags := []struct {
		key string
		dst *bool
	}{
		{"tokenizer.ggml.add_bos_token", &v.AddBOS},
		{"tokenizer.ggml.add_eos_token", &v.AddEOS},
		{"tokenizer.ggml.add_space_prefix", &v.AddSpacePrefix},
	}
	for _, fl := range flags {
		if _, ok := f.Value(fl.key); !ok {
			continue
		}
		b, err := f.GetBool(fl.key)
		if err != nil {
			return nil, err // gguf's error names the file and the key
		}
		*fl.dst = b
	}
	t, err := New(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return t, nil
}
