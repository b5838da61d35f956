package main

import (
	"hybrid/internal/testmodels"
	"hybrid/models/builtin"
	"hybrid/models/gguf"

	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokenize runs `hybrid tokenize` on the shared vocabulary-only files
// of Llama 3 (adds a BOS) and Qwen2 (does not) and on the built-in
// SentencePiece model, checking the output against the ids llama.cpp gives
// (llama-tokenize's defaults: BOS as the model adds it, special tokens
// parsed) and the format of its lines.
func TestTokenize(t *testing.T) {
	llama3 := testmodels.Path(t, filepath.Join("vocab", "ggml-vocab-llama-bpe.gguf"))
	qwen2 := testmodels.Path(t, filepath.Join("vocab", "ggml-vocab-qwen2.gguf"))
	dir := t.TempDir()
	stories := filepath.Join(dir, "stories260K.gguf")
	if err := os.WriteFile(stories, builtin.Model(), 0o644); err != nil {
		t.Fatal(err)
	}
	textFile := filepath.Join(dir, "text.txt")
	if err := os.WriteFile(textFile, []byte("Hello world\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		in   string // standard input
		want string
	}{
		{"llama3 lines", []string{"--model", llama3, "--prompt", "Hello world"}, "",
			"128000 -> '<|begin_of_text|>'\n  9906 -> 'Hello'\n  1917 -> ' world'\n"},
		{"llama3 json", []string{"--model", llama3, "--prompt", "Hello world", "--json"}, "",
			`{"tokens": [128000, 9906, 1917]}` + "\n"},
		{"llama3 special tokens", []string{"--model", llama3, "--json", "--prompt", "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"}, "",
			`{"tokens": [128000, 128006, 882, 128007, 271, 13347, 128009]}` + "\n"},
		{"llama3 split character", []string{"--model", llama3, "--prompt", " 🦙"}, "",
			"128000 -> '<|begin_of_text|>'\n 11410 -> ' \xf0\x9f'\n    99 -> '\xa6'\n   247 -> '\x99'\n"},
		{"llama3 file", []string{"--model", llama3, "--file", textFile, "--json"}, "",
			`{"tokens": [128000, 9906, 1917, 198]}` + "\n"},
		{"llama3 stdin", []string{"--model", llama3, "--file", "-", "--json"}, "Hello world\n",
			`{"tokens": [128000, 9906, 1917, 198]}` + "\n"},
		{"qwen2 adds no BOS", []string{"--model", qwen2, "--prompt", "<|im_start|>user\nHello world<|im_end|>"}, "",
			"151644 -> '<|im_start|>'\n   872 -> 'user'\n   198 -> '\n'\n  9707 -> 'Hello'\n  1879 -> ' world'\n151645 -> '<|im_end|>'\n"},
		{"qwen2 empty", []string{"--model", qwen2, "--prompt", "", "--json"}, "", `{"tokens": []}` + "\n"},
		{"sentencepiece", []string{"--model", stories, "--prompt", "Once upon a time"}, "",
			"     1 -> '<s>'\n   403 -> ' Once'\n   407 -> ' upon'\n   261 -> ' a'\n   378 -> ' time'\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var in io.Reader
			if c.in != "" {
				in = strings.NewReader(c.in)
			}
			code, stdout, stderr := mainOf(t, in, append([]string{"tokenize"}, c.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if stdout != c.want {
				t.Errorf("output:\n%q\nwant:\n%q", stdout, c.want)
			}
		})
	}
}

// TestTokenizeErrors checks that a bad command line is a usage error (exit
// 2) and a bad file a failed run (exit 1), with one line naming what is
// wrong.
func TestTokenizeErrors(t *testing.T) {
	dir := t.TempDir()
	stories := filepath.Join(dir, "stories260K.gguf")
	if err := os.WriteFile(stories, builtin.Model(), 0o644); err != nil {
		t.Fatal(err)
	}
	notGGUF := filepath.Join(dir, "text.gguf")
	if err := os.WriteFile(notGGUF, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	latin1 := filepath.Join(dir, "latin1.txt")
	if err := os.WriteFile(latin1, []byte("caf\xe9"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A BPE vocabulary whose pre-tokenizer is unknown, and one without merges.
	f, err := gguf.Parse(builtin.Model(), builtin.Name)
	if err != nil {
		t.Fatal(err)
	}
	var bpe []gguf.KV
	for _, kv := range f.KV {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			bpe = append(bpe, kv)
		}
	}
	bpe = setKV("tokenizer.ggml.model", "gpt2")(bpe)
	noMerges := writeVocab(t, dir, "nomerges.gguf", bpe)
	merges := gguf.KV{Key: "tokenizer.ggml.merges", Value: gguf.Array{Type: gguf.TypeString, Values: []string{"a b"}}}
	badPre := writeVocab(t, dir, "badpre.gguf", append(bpe, merges, gguf.KV{Key: "tokenizer.ggml.pre", Value: "nonsense"}))

	for _, c := range []struct {
		name string
		args []string
		code int
		has  []string
	}{
		{"no model", []string{"--prompt", "hi"}, 2, []string{"--model"}},
		{"no text", []string{"--model", stories}, 2, []string{"--prompt", "--file"}},
		{"both texts", []string{"--model", stories, "--prompt", "hi", "--file", latin1}, 2, []string{"--prompt", "--file"}},
		{"empty file name", []string{"--model", stories, "--file", ""}, 2, []string{"--file"}},
		{"stray argument", []string{"--model", stories, "--prompt", "hi", "extra"}, 2, []string{"extra"}},
		{"unknown flag", []string{"--nope"}, 2, nil},
		{"missing model", []string{"--model", filepath.Join(dir, "nope.gguf"), "--prompt", "hi"}, 1, []string{"nope.gguf"}},
		{"not a GGUF file", []string{"--model", notGGUF, "--prompt", "hi"}, 1, []string{"text.gguf"}},
		{"unknown pre-tokenizer", []string{"--model", badPre, "--prompt", "hi"}, 1, []string{"badpre.gguf", "nonsense", "tokenizer.ggml.pre"}},
		{"no merges", []string{"--model", noMerges, "--prompt", "hi"}, 1, []string{"nomerges.gguf", "tokenizer.ggml.merges"}},
		{"text not UTF-8", []string{"--model", stories, "--file", latin1}, 1, []string{"latin1.txt", "UTF-8"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			oneLineError(t, append([]string{"tokenize"}, c.args...), c.code, c.has...)
		})
	}
}

// writeVocab writes a GGUF file of metadata only.
func writeVocab(t *testing.T, dir, name string, kvs []gguf.KV) string {
	t.Helper()
	path := filepath.Join(dir, name)
	w, err := gguf.Create(path, kvs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
