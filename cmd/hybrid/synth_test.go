package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"hybrid/internal/testmodels"
	"hybrid/models/llama"
)

// TestSynthVocab checks --vocab: the preset that needs it says so, a
// vocabulary of the wrong size or a missing file is refused in one line,
// and a vocabulary of the right size gives the model its tokenizer.
func TestSynthVocab(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "m.gguf")
	bpe := filepath.Join(testmodels.Dir(t), "vocab", "ggml-vocab-llama-bpe.gguf")
	oneLineError(t, []string{"synth", "--preset", "llama-3.2-1b", "-o", out}, 1, "needs a vocabulary file (--vocab)")
	oneLineError(t, []string{"synth", "--preset", "llama-3.2-1b", "--vocab", filepath.Join(dir, "none.gguf"), "-o", out}, 1, "none.gguf")
	oneLineError(t, []string{"synth", "--preset", "stories15m", "--vocab", bpe, "-o", out}, 1, "the vocabulary has 128256 tokens, the preset 32000")

	// A vocabulary of the preset's size: stories15m's own generated one,
	// written by a first synth, then copied by --vocab into a second.
	first := filepath.Join(dir, "first.gguf")
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"synth", "--preset", "stories15m", "--type", "Q8_0", "-o", first}, &stdout, &stderr); code != 0 {
		t.Fatalf("synth: exit %d: %s", code, stderr.String())
	}
	second := filepath.Join(dir, "second.gguf")
	if code := Main([]string{"synth", "--preset", "stories15m", "--type", "Q8_0", "--seed", "2", "--vocab", first, "-o", second}, &stdout, &stderr); code != 0 {
		t.Fatalf("synth --vocab: exit %d: %s", code, stderr.String())
	}
	m, err := llama.Load(second)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := m.Tokenizer.Decode(m.Tokenizer.Encode("Once upon a time", false)); !strings.Contains(got, "Once upon a time") {
		t.Errorf("round trip through the copied vocabulary gives %q", got)
	}
}
