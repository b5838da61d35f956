package tokenizer

import (
	"fmt"
	"strings"

	"hybrid/models/gguf"
)

// FromGGUF builds the tokenizer described by a GGUF file's tokenizer.ggml.*
// metadata. It reads only metadata, so a vocabulary-only file (no tensors)
// is enough. Keys the file leaves out keep NewVocabPre's defaults; a key
// that is present with the wrong type is an error naming the file (once)
// and the key, as is a missing or unsupported tokenizer.ggml.model, a
// "gpt2" vocabulary without tokenizer.ggml.merges, and an unsupported
// tokenizer.ggml.pre.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	model, err := f.GetString("tokenizer.ggml.model")
	if err != nil {
		return nil, fmt.Errorf("no tokenizer: %w", err) // gguf's error names the file
	}
	if model != "llama" && model != "gpt2" {
		return nil, fmt.Errorf("%s: tokenizer.ggml.model is %q: only the Llama SentencePiece tokenizer (\"llama\") and byte-level BPE (\"gpt2\") are supported", f.Path, model)
	}
	// A missing key is llama.cpp's "default" pre-tokenizer. "llama"
	// reads it too, for setStrip.
	pre := ""
	if _, ok := f.Value("tokenizer.ggml.pre"); ok {
		if pre, err = f.GetString("tokenizer.ggml.pre"); err != nil {
			return nil, err // gguf's error names the file and the key
		}
	}
	if model == "gpt2" {
		if _, ok := preTokenizers[pre]; !ok {
			return nil, fmt.Errorf("%s: tokenizer.ggml.pre is %q: not a pre-tokenizer this tokenizer supports (%s)",
				f.Path, pre, strings.Join(PreTokenizers()[1:], ", "))
		}
	}
	v := NewVocabPre(model, pre)
	if v.Tokens, err = f.GetStrings("tokenizer.ggml.tokens"); err != nil {
		return nil, err // gguf's error names the file and the key
	}
	if model == "gpt2" {
		if _, ok := f.Value("tokenizer.ggml.merges"); !ok {
			return nil, fmt.Errorf("%s: tokenizer.ggml.model is \"gpt2\" but the file has no tokenizer.ggml.merges", f.Path)
		}
		if v.Merges, err = f.GetStrings("tokenizer.ggml.merges"); err != nil {
			return nil, err // gguf's error names the file and the key
		}
		// llama.cpp drops a default id that the vocabulary is too small
		// to have.
		for _, id := range []*int32{&v.BOS, &v.EOS} {
			if int(*id) >= len(v.Tokens) {
				*id = -1
			}
		}
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
		{"tokenizer.ggml.eom_token_id", &v.EOM},
		{"tokenizer.ggml.fim_pre_token_id", &v.FIMPre},
		{"tokenizer.ggml.fim_suf_token_id", &v.FIMSuf},
		{"tokenizer.ggml.fim_mid_token_id", &v.FIMMid},
		{"tokenizer.ggml.fim_pad_token_id", &v.FIMPad},
		{"tokenizer.ggml.fim_rep_token_id", &v.FIMRep},
		{"tokenizer.ggml.fim_sep_token_id", &v.FIMSep},
		// Later keys win: the deprecated FIM names override the new.
		{"tokenizer.ggml.prefix_token_id", &v.FIMPre},
		{"tokenizer.ggml.suffix_token_id", &v.FIMSuf},
		{"tokenizer.ggml.middle_token_id", &v.FIMMid},
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
	for _, key := range []struct {
		key string
		dst *string
	}{{"general.name", &v.Name}, {"general.architecture", &v.Architecture}} {
		if _, ok := f.Value(key.key); !ok {
			continue
		}
		if *key.dst, err = f.GetString(key.key); err != nil {
			return nil, err // gguf's error names the file and the key
		}
	}
	t, err := New(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return t, nil
}
