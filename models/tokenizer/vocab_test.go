package tokenizer

import (
	"hybrid/internal/testmodels"
	"hybrid/models/gguf"

	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// vocabNames are the vocabularies of the shared vocab folder: llama.cpp's
// own tokenizer test files (see its README.md).
var vocabNames = []string{"llama-bpe", "qwen2", "gpt-2", "deepseek-llm", "llama-spm", "phi-3"}

// vocabPath returns the path of ggml-vocab-NAME.gguf in the shared vocab
// folder; a missing file skips t, or fails it in CI.
func vocabPath(t testing.TB, name string) string {
	t.Helper()
	return testmodels.Path(t, filepath.Join("vocab", "ggml-vocab-"+name+".gguf"))
}

var loaded = struct {
	sync.Mutex
	m map[string]*Tokenizer
}{m: map[string]*Tokenizer{}}

// loadGGUF returns the tokenizer of the GGUF file at path, through
// FromGGUF, loading each file once per test binary.
func loadGGUF(t testing.TB, path string) *Tokenizer {
	t.Helper()
	loaded.Lock()
	defer loaded.Unlock()
	if tok := loaded.m[path]; tok != nil {
		return tok
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	loaded.m[path] = tok
	return tok
}

// readVocabTests reads the texts of a .inp file and the ids of its .out
// file, as llama.cpp's tests/test-tokenizer-0.cpp does: texts are separated
// by "\n__ggml_vocab_test__\n", ids are one line a text.
func readVocabTests(t *testing.T, inp, out string) ([]string, [][]int32) {
	t.Helper()
	raw, err := os.ReadFile(inp)
	if err != nil {
		t.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	var texts []string
	for s := string(raw); s != ""; {
		i := strings.Index(s, sep)
		if i < 0 {
			texts = append(texts, s)
			break
		}
		texts = append(texts, s[:i])
		s = s[i+len(sep):]
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%s has %d texts, %s %d lines of ids", inp, len(texts), out, len(lines))
	}
	ids := make([][]int32, len(lines))
	for i, line := range lines {
		ids[i] = []int32{}
		for _, f := range strings.Fields(line) {
			n, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				t.Fatalf("%s line %d: %v", out, i+1, err)
			}
			ids[i] = append(ids[i], int32(n))
		}
	}
	return texts, ids
}

// TestVocabFiles checks EncodePlain(text, false), llama.cpp's
// add_special=false and parse_special=false, on every case of every
// vocabulary in the shared vocab folder, and that decoding gives the text
// back.
func TestVocabFiles(t *testing.T) {
	for _, name := range vocabNames {
		t.Run(name, func(t *testing.T) {
			path := vocabPath(t, name)
			inp := testmodels.Path(t, filepath.Join("vocab", "ggml-vocab-"+name+".gguf.inp"))
			out := testmodels.Path(t, filepath.Join("vocab", "ggml-vocab-"+name+".gguf.out"))
			tok := loadGGUF(t, path)
			texts, want := readVocabTests(t, inp, out)
			if len(texts) < 40 {
				t.Fatalf("only %d cases in %s", len(texts), inp)
			}
			for i, text := range texts {
				got := tok.EncodePlain(text, false)
				if !slices.Equal(got, want[i]) {
					t.Errorf("case %d: EncodePlain(%q) =\n  %v\nllama.cpp:\n  %v", i, text, got, want[i])
					continue
				}
				// SentencePiece drops the space prefix it added, but not
				// a space the text itself began with; BPE gives every
				// byte back.
				if tok.bpe == nil && strings.HasPrefix(text, " ") {
					continue
				}
				if s := tok.Decode(got); s != text {
					t.Errorf("case %d: Decode(EncodePlain(%q)) = %q", i, text, s)
				}
			}
		})
	}
}

// TestBPEStream checks that streaming llama-bpe's tokens of text whose
// characters are split over several tokens (the llama's four bytes take
// three) returns only whole characters, and all of the text.
func TestBPEStream(t *testing.T) {
	tok := loadGGUF(t, vocabPath(t, "llama-bpe"))
	for _, text := range []string{" this is 🦙.cpp", "👨‍👩‍👧‍👦 日本語のテキスト", "Привет"} {
		ids := tok.Encode(text, true)
		s := tok.NewStream(true)
		var sb strings.Builder
		held := 0
		for _, id := range ids {
			out := s.Add(id)
			if !utf8.ValidString(out) {
				t.Fatalf("%q: Add(%d) = %q, not valid UTF-8", text, id, out)
			}
			if out == "" && len(tok.Piece(id)) > 0 {
				held++
			}
			sb.WriteString(out)
		}
		sb.WriteString(s.Flush())
		if sb.String() != text {
			t.Errorf("streamed %q, want %q", sb.String(), text)
		}
		if strings.Contains(text, "🦙") && held == 0 {
			t.Errorf("%q: no token was held back, but the llama is split over tokens %v", text, ids)
		}
	}
}

// TestBPESpecialTokens checks what llama.cpp does with special tokens of
// the Llama 3 and Qwen2 vocabularies: which end generation, what their
// pieces print, and that a BOS is added only for Llama 3.
func TestBPESpecialTokens(t *testing.T) {
	llama3 := loadGGUF(t, vocabPath(t, "llama-bpe"))
	qwen2 := loadGGUF(t, vocabPath(t, "qwen2"))
	for _, c := range []struct {
		name string
		tok  *Tokenizer
		id   int32
		eog  bool
	}{
		{"llama3 <|begin_of_text|>", llama3, 128000, false},
		{"llama3 <|end_of_text|>", llama3, 128001, true},
		{"llama3 <|reserved_special_token_4|>", llama3, 128008, false},
		{"llama3 <|eot_id|>", llama3, 128009, true},
		{"llama3 Hello", llama3, 9906, false},
		{"qwen2 <|endoftext|>", qwen2, 151643, true},
		{"qwen2 <|im_start|>", qwen2, 151644, false},
		{"qwen2 <|im_end|>", qwen2, 151645, true},
	} {
		if got := c.tok.IsEOG(c.id); got != c.eog {
			t.Errorf("%s: IsEOG(%d) = %v, want %v", c.name, c.id, got, c.eog)
		}
	}
	if p, ps := llama3.Piece(128009), llama3.PieceSpecial(128009); len(p) != 0 || string(ps) != "<|eot_id|>" {
		t.Errorf("Piece, PieceSpecial(<|eot_id|>) = %q, %q; want \"\", \"<|eot_id|>\"", p, ps)
	}
	if !llama3.AddsBOS() || qwen2.AddsBOS() {
		t.Errorf("AddsBOS: llama3 %v, qwen2 %v; want true, false", llama3.AddsBOS(), qwen2.AddsBOS())
	}
	text := "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
	if got, want := llama3.Encode(text, true), []int32{128000, 128006, 882, 128007, 271, 13347, 128009}; !slices.Equal(got, want) {
		t.Errorf("Encode(%q) = %v, want %v", text, got, want)
	}
	// Without parse_special the control tokens' texts are text.
	if got := llama3.EncodePlain("<|eot_id|>", false); slices.Contains(got, 128009) || len(got) < 3 {
		t.Errorf("EncodePlain(<|eot_id|>) = %v, want the text's tokens", got)
	}
	if got := llama3.Decode(llama3.EncodePlain(text, false)); got != text {
		t.Errorf("Decode(EncodePlain(%q)) = %q", text, got)
	}
	// deepseek-llm's single letters "ø", ... are user-defined tokens: cut
	// out even without parse_special, and printed as they are.
	ds := loadGGUF(t, vocabPath(t, "deepseek-llm"))
	if got := ds.EncodePlain("ø", false); !slices.Equal(got, []int32{100002}) || !bytes.Equal(ds.Piece(100002), []byte("ø")) {
		t.Errorf("deepseek-llm EncodePlain(ø) = %v, piece %q; want [100002], \"ø\"", got, ds.Piece(100002))
	}
}
