package tokenizer

import (
	"hybrid/internal/testmodels"
	"hybrid/models/gguf"

	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"
)

// split returns the words pre-tokenizer pre cuts text into.
func split(t *testing.T, pre, text string) []string {
	t.Helper()
	p := preTokenizers[pre]
	if p == nil {
		t.Fatalf("no pre-tokenizer %q", pre)
	}
	var words []string
	emit := func(w []rune) {
		var b []byte
		for _, c := range w {
			b = appendCpt(b, c)
		}
		words = append(words, string(b))
	}
	for i := len(p.stages) - 1; i >= 0; i-- {
		stage, next := p.stages[i], emit
		emit = func(seg []rune) { stage(seg, next) }
	}
	emit(decodeCpts(nil, text))
	return words
}

// TestSplit checks hand-worked splits, chosen for where llama.cpp's
// splitting differs from what its regex says or from one pre-tokenizer to
// the next. The tokenizations these splits lead to are checked against
// llama.cpp itself in TestLlamaCppBPE and TestVocabFiles.
func TestSplit(t *testing.T) {
	tests := []struct {
		pre, text string
		want      []string
	}{
		{"llama-bpe", "Hello world", []string{"Hello", " world"}},
		{"llama-bpe", "  Hello", []string{" ", " Hello"}},
		// \s+(?!\S): all but the last space, unless the run ends the text
		{"llama-bpe", "a   b", []string{"a", "  ", " b"}},
		{"llama-bpe", "x   ", []string{"x", "   "}},
		// a space before a digit stands alone
		{"llama-bpe", " 123", []string{" ", "123"}},
		{"llama-bpe", "1234567", []string{"123", "456", "7"}},
		{"qwen2", "1234", []string{"1", "2", "3", "4"}},
		// contractions: case-insensitive for Llama 3 and Qwen2, not GPT-2
		{"llama-bpe", "WE'VE I'M", []string{"WE", "'VE", " I", "'M"}},
		{"qwen2", "IT'S", []string{"IT", "'S"}},
		{"gpt-2", "IT'S it's", []string{"IT", "'", "S", " it", "'s"}},
		// punctuation takes the line breaks after it; \s*[\r\n]+
		{"llama-bpe", "hi!!\n\nthere", []string{"hi", "!!\n\n", "there"}},
		{"llama-bpe", "a \n\n b", []string{"a", " \n\n", " b"}},
		// Qwen3.5 keeps combining marks with their letters
		{"qwen2", "e\u0301x", []string{"e", "\u0301x"}},
		{"qwen35", "e\u0301x", []string{"e\u0301x"}},
		// \p{N} first, one digit a piece, then GPT-2's
		{"smollm", "abc 123", []string{"abc", " ", "1", "2", "3"}},
		// llama.cpp's default: punctuation runs, GPT-2's, \p{N}+, [0-9]{3}
		{"", "a1234,,b", []string{"a", "123", "4", ",,", "b"}},
		{"default", "a1234,,b", []string{"a", "123", "4", ",,", "b"}},
		{"falcon", "a`b", []string{"a", "`", "b"}},
		// DeepSeek: \s?letters, \s?punctuation, trailing \s+, CJK runs
		{"deepseek-llm", "hello   ", []string{"hello", "   "}},
		{"deepseek-llm", "Hi 你好!", []string{"Hi", " ", "你好", "!"}},
		{"deepseek-coder", "x=12", []string{"x", "=", "1", "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.pre+" "+tt.text, func(t *testing.T) {
			if got := split(t, tt.pre, tt.text); !slices.Equal(got, tt.want) {
				t.Errorf("split(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

// TestUnicodeTable checks the generated table's shape and a few code
// points whose classes matter.
func TestUnicodeTable(t *testing.T) {
	if cptRanges[0].start != 0 {
		t.Fatalf("table starts at %#x", cptRanges[0].start)
	}
	for i, r := range cptRanges {
		if i > 0 && r.start <= cptRanges[i-1].start {
			t.Fatalf("range %d at %#x is out of order", i, r.start)
		}
		if cat := r.flags & 0xFF; cat == 0 || cat&(cat-1) != 0 {
			t.Fatalf("range %d at %#x has flags %#x: want exactly one category", i, r.start, r.flags)
		}
	}
	for _, c := range []struct {
		cpt   rune
		flags uint16
	}{
		{'A', cptLetter}, {'z', cptLetter}, {'0', cptNumber}, {'$', cptSymbol}, {'!', cptPunct},
		{' ', cptSeparator | cptWhitespace}, {'\t', cptControl | cptWhitespace}, {0x1C, cptControl},
		{0x85, cptControl | cptWhitespace}, {0xA0, cptSeparator | cptWhitespace}, {0x3000, cptSeparator | cptWhitespace},
		{0x200B, cptControl}, {0x0301, cptMark}, {0x00B2, cptNumber}, {0x216B, cptNumber}, {0x0660, cptNumber},
		{0x4E00, cptLetter}, {0x1F600, cptSymbol}, {0x0378, cptUndefined}, {0xD800, cptControl},
		{0x10FFFF, cptUndefined}, {0x110000, cptUndefined}, {-1, cptUndefined},
	} {
		if got := cptFlags(c.cpt); got != c.flags {
			t.Errorf("cptFlags(%#x) = %#x, want %#x", c.cpt, got, c.flags)
		}
	}
	if lowerASCII('S') != 's' || lowerASCII(0x212A) != 'k' || lowerASCII('s') != 's' || lowerASCII(0xDF) != 0xDF {
		t.Error("lowerASCII does not fold as llama.cpp's unicode_tolower")
	}
}

// TestDecodeCpt checks llama.cpp's reading of UTF-8, which accepts what
// Go's rejects, and its writing.
func TestDecodeCpt(t *testing.T) {
	for _, c := range []struct {
		in  string
		cpt rune
		n   int
	}{
		{"a", 'a', 1}, {"é", 0xE9, 2}, {"🦙", 0x1F999, 4},
		{"\xc0\x80", 0, 2},                // overlong NUL
		{"\xed\xa0\x80", 0xD800, 3},       // surrogate
		{"\xf7\xbf\xbf\xbf", 0x1FFFFF, 4}, // past U+10FFFF
		{"\x80", 0xFFFD, 1}, {"\xe6\x97", 0xFFFD, 1}, {"\xc3(", 0xFFFD, 1}, {"\xf8\x80\x80\x80", 0xFFFD, 1},
	} {
		if cpt, n := decodeCpt(c.in, 0); cpt != c.cpt || n != c.n {
			t.Errorf("decodeCpt(%q) = %#x, %d; want %#x, %d", c.in, cpt, n, c.cpt, c.n)
		}
	}
	if got := string(appendCpt(nil, 0xD800)); got != "\xed\xa0\x80" {
		t.Errorf("appendCpt(U+D800) = %q", got)
	}
	if got := string(appendCpt(nil, 0x1FFFFF)); got != "\uFFFD" {
		t.Errorf("appendCpt(0x1FFFFF) = %q, want U+FFFD", got)
	}
}

func TestGPT2ByteChars(t *testing.T) {
	chars := gpt2ByteChars()
	seen := map[rune]bool{}
	for _, c := range chars {
		seen[c] = true
	}
	if len(seen) != 256 || chars[' '] != 'Ġ' || chars['\n'] != 'Ċ' || chars['A'] != 'A' || chars[0xAD] != 0x143 || chars[0xFF] != 0xFF {
		t.Errorf("gpt2ByteChars: %d distinct, ' ' %q, '\\n' %q, 0xAD %U", len(seen), chars[' '], chars['\n'], chars[0xAD])
	}
	if got := string(decodeText("ĠhelloĊ")); got != " hello\n" {
		t.Errorf("decodeText(ĠhelloĊ) = %q", got)
	}
	// A character that stands for no byte: llama.cpp's marker.
	if got := string(decodeText("a日")); got != "a[UNK_BYTE_0xe697a5a日]" {
		t.Errorf("decodeText(a日) = %q", got)
	}
}

func TestNewVocabPre(t *testing.T) {
	for _, c := range []struct {
		pre      string
		bos      int32
		addBOS   bool
		eos, unk int32
	}{
		{"", 11, false, 11, -1},
		{"llama-bpe", 11, true, 11, -1},
		{"llama3", 11, true, 11, -1},
		{"qwen2", 11, false, 11, -1},
		{"glm4", -1, false, 11, -1},
	} {
		v := NewVocabPre("gpt2", c.pre)
		if v.BOS != c.bos || v.AddBOS != c.addBOS || v.EOS != c.eos || v.UNK != c.unk || v.AddEOS || v.Pre != c.pre {
			t.Errorf("NewVocabPre(gpt2, %q) = %+v", c.pre, v)
		}
	}
	if v := NewVocab("gpt2"); v.Pre != "" || v.BOS != 11 {
		t.Errorf("NewVocab(gpt2) = %+v", v)
	}
}

// writeGGUF writes a vocabulary-only GGUF file with the given metadata.
func writeGGUF(t *testing.T, kvs []gguf.KV) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vocab.gguf")
	w, err := gguf.Create(path, kvs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFromGGUFBPE(t *testing.T) {
	v := bpeTestVocab("llama-bpe")
	tokens := gguf.KV{Key: "tokenizer.ggml.tokens", Value: gguf.Array{Type: gguf.TypeString, Values: v.Tokens}}
	merges := gguf.KV{Key: "tokenizer.ggml.merges", Value: gguf.Array{Type: gguf.TypeString, Values: v.Merges}}
	types := gguf.KV{Key: "tokenizer.ggml.token_type", Value: gguf.Array{Type: gguf.TypeInt32, Values: v.Types}}
	model := gguf.KV{Key: "tokenizer.ggml.model", Value: "gpt2"}
	pre := func(p any) gguf.KV { return gguf.KV{Key: "tokenizer.ggml.pre", Value: p} }
	tests := []struct {
		name string
		kvs  []gguf.KV
		want []string // in the error; nil for success
	}{
		{"llama-bpe", []gguf.KV{model, pre("llama-bpe"), tokens, merges, types}, nil},
		{"no pre is default", []gguf.KV{model, tokens, merges, types}, nil},
		{"no merges", []gguf.KV{model, pre("llama-bpe"), tokens, types}, []string{"tokenizer.ggml.merges", `"gpt2"`}},
		{"unknown pre", []gguf.KV{model, pre("nonsense"), tokens, merges, types}, []string{"tokenizer.ggml.pre", `"nonsense"`}},
		{"pre not a string", []gguf.KV{model, pre(uint32(3)), tokens, merges, types}, []string{"tokenizer.ggml.pre"}},
		{"merges not strings", []gguf.KV{model, pre("qwen2"), tokens, types,
			{Key: "tokenizer.ggml.merges", Value: gguf.Array{Type: gguf.TypeInt32, Values: []int32{1}}}}, []string{"tokenizer.ggml.merges"}},
		{"unsupported model", []gguf.KV{{Key: "tokenizer.ggml.model", Value: "bert"}, tokens}, []string{"tokenizer.ggml.model", `"bert"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeGGUF(t, tt.kvs)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			tok, err := FromGGUF(f)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				text := "Hello world, it's 2024!"
				if got := tok.Decode(tok.EncodePlain(text, false)); got != text {
					t.Errorf("Decode(EncodePlain(%q)) = %q", text, got)
				}
				return
			}
			if err == nil {
				t.Fatal("FromGGUF succeeded")
			}
			for _, w := range append(tt.want, path) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// bpeCorpus trains bpeTestVocab's merges.
const bpeCorpus = `The quick brown fox jumps over the lazy dog. It's the 3rd time we've seen 12345 of them!
Hello, world! Hello again; hello hello. Привет мир, привет! 你好世界，你好。 こんにちは、世界。
func main() { fmt.Println("hello") } // tabs	and	spaces    and newlines
Don't stop; they'll come. I'M HERE! ١٢٣ مرحبا 🦙🦙 🙂 naïve café résumé`

var bpeTestBase = func() Vocab {
	var v Vocab
	for _, c := range gpt2ByteChars() {
		v.Tokens = append(v.Tokens, string(c))
		v.Types = append(v.Types, TypeNormal)
	}
	ids := map[string]bool{}
	for _, s := range v.Tokens {
		ids[s] = true
	}
	// Words as lists of symbols, in GPT-2's byte characters.
	chars := gpt2ByteChars()
	var words [][]string
	p := preTokenizers["llama-bpe"]
	p.stages[0](decodeCpts(nil, bpeCorpus), func(w []rune) {
		var syms []string
		for _, c := range w {
			for _, b := range appendCpt(nil, c) {
				syms = append(syms, string(chars[b]))
			}
		}
		words = append(words, syms)
	})
	// The most frequent pair becomes the next merge (ties: the smallest
	// pair), 300 times.
	for range 300 {
		count := map[[2]string]int{}
		for _, w := range words {
			for i := 1; i < len(w); i++ {
				count[[2]string{w[i-1], w[i]}]++
			}
		}
		if len(count) == 0 {
			break
		}
		pairs := make([][2]string, 0, len(count))
		for p := range count {
			pairs = append(pairs, p)
		}
		sort.Slice(pairs, func(i, j int) bool {
			a, b := pairs[i], pairs[j]
			if count[a] != count[b] {
				return count[a] > count[b]
			}
			return a[0]+" "+a[1] < b[0]+" "+b[1]
		})
		best := pairs[0]
		v.Merges = append(v.Merges, best[0]+" "+best[1])
		if merged := best[0] + best[1]; !ids[merged] {
			ids[merged] = true
			v.Tokens = append(v.Tokens, merged)
			v.Types = append(v.Types, TypeNormal)
		}
		for k, w := range words {
			var out []string
			for i := 0; i < len(w); i++ {
				if i+1 < len(w) && w[i] == best[0] && w[i+1] == best[1] {
					out = append(out, w[i]+w[i+1])
					i++
					continue
				}
				out = append(out, w[i])
			}
			words[k] = out
		}
	}
	for _, s := range []struct {
		text string
		typ  int32
	}{
		{"<|endoftext|>", TypeControl}, {"<|im_start|>", TypeControl}, {"<|im_end|>", TypeControl},
		{"[UD]", TypeUserDefined}, {"★", TypeUserDefined},
	} {
		v.Tokens = append(v.Tokens, s.text)
		v.Types = append(v.Types, s.typ)
	}
	return v
}()

// bpeTestVocab returns a small byte-level BPE vocabulary with pre-tokenizer
// pre: GPT-2's 256 byte characters, 300 merges learned from bpeCorpus,
// control tokens "<|endoftext|>" (BOS and EOS), "<|im_start|>" and
// "<|im_end|>", and user-defined tokens "[UD]" and "★".
func bpeTestVocab(pre string) Vocab {
	v := NewVocabPre("gpt2", pre)
	v.Tokens = slices.Clone(bpeTestBase.Tokens)
	v.Types = slices.Clone(bpeTestBase.Types)
	v.Merges = slices.Clone(bpeTestBase.Merges)
	v.BOS = int32(slices.Index(v.Tokens, "<|endoftext|>"))
	v.EOS = v.BOS
	return v
}

// bpeFuzzPres are pre-tokenizers with different splitting, one of each.
var bpeFuzzPres = []string{"llama-bpe", "dbrx", "qwen2", "qwen35", "gpt-2", "smollm", "falcon", "deepseek-llm", "deepseek-coder", ""}

// llamaText is text as llama.cpp's BPE reads it: invalid UTF-8 becomes
// U+FFFD a byte, overlong forms their code point, as decodeCpt says.
func llamaText(s string) string {
	var b []byte
	for _, c := range decodeCpts(nil, s) {
		b = appendCpt(b, c)
	}
	return string(b)
}

// checkBPE checks the properties FuzzBPEEncode wants of text on tok: no
// panic, ids in range, Decode gives back the text as llama.cpp reads it
// (with control-token texts parsed, when there are none), and a Stream
// returns valid UTF-8 that adds up to Decode's, U+FFFD for bytes that are
// not.
func checkBPE(t *testing.T, tok *Tokenizer, text string) {
	want := llamaText(text)
	plain := tok.EncodePlain(text, false)
	special := tok.Encode(text, true)
	for _, id := range append(slices.Clone(plain), special...) {
		if id < 0 || int(id) >= tok.VocabSize() {
			t.Fatalf("Encode(%q): id %d out of range", text, id)
		}
	}
	if got := tok.Decode(plain); got != want {
		t.Fatalf("Decode(EncodePlain(%q)) = %q, want %q", text, got, want)
	}
	control := false
	for _, s := range []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"} {
		control = control || strings.Contains(text, s)
	}
	if got := tok.Decode(special); !control && got != want {
		t.Fatalf("Decode(Encode(%q)) = %q, want %q", text, got, want)
	}
	s := tok.NewStream(true)
	var sb strings.Builder
	for _, id := range special {
		out := s.Add(id)
		if !utf8.ValidString(out) {
			t.Fatalf("Encode(%q): Stream.Add(%d) = %q, not valid UTF-8", text, id, out)
		}
		sb.WriteString(out)
	}
	sb.WriteString(s.Flush())
	if got, dec := sb.String(), strings.ToValidUTF8(tok.Decode(special), "\uFFFD"); utf8.ValidString(want) && got != dec {
		t.Fatalf("Encode(%q): streamed %q, Decode %q", text, got, dec)
	}
}

func bpeFuzzTokenizers(tb testing.TB) []*Tokenizer {
	var toks []*Tokenizer
	for _, pre := range bpeFuzzPres {
		tok, err := New(bpeTestVocab(pre))
		if err != nil {
			tb.Fatal(err)
		}
		toks = append(toks, tok)
	}
	return toks
}

// TestBPERandom runs FuzzBPEEncode's checks on random text.
func TestBPERandom(t *testing.T) {
	toks := bpeFuzzTokenizers(t)
	rng := rand.New(rand.NewPCG(3, 4))
	bytes := []string{"\xff", "\x80", "\xc3", "\xe6\x97", "\xc0\x80", "\xed\xa0\x80", "\xf7\xbf\xbf\xbf", "<|im_end|>", "[UD]", "★", "'S", "'ll", "123", "\r\n"}
	for range 2000 {
		text := randomText(rng)
		for range rng.IntN(3) {
			i := rng.IntN(len(text) + 1)
			text = text[:i] + bytes[rng.IntN(len(bytes))] + text[i:]
		}
		for _, tok := range toks {
			checkBPE(t, tok, text)
		}
	}
}

// FuzzBPEEncode checks that encoding never panics on any bytes and that
// decoding gives back what llama.cpp reads (for valid UTF-8, the text), on
// a small trained vocabulary under each kind of pre-tokenizer.
func FuzzBPEEncode(f *testing.F) {
	for _, s := range []string{"", " ", "Hello world", "  Hello  ", "it's I'M we'VE", "1234567 ١٢٣", "\n\n \r\n\t",
		"<|im_start|>user\nhi<|im_end|>", "[UD]★", "\xff\xc0\x80\xed\xa0\x80\xf7\xbf\xbf\xbf", "你好 🦙 e\u0301"} {
		f.Add(s)
	}
	// Seeded from llama.cpp's own tokenizer tests where the shared files are.
	if dir, ok := testmodels.Find(); ok {
		if raw, err := os.ReadFile(filepath.Join(dir, "vocab", "ggml-vocab-llama-bpe.gguf.inp")); err == nil {
			for _, s := range strings.Split(string(raw), "\n__ggml_vocab_test__\n") {
				f.Add(s)
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			f.Fatal(err)
		}
	}
	toks := bpeFuzzTokenizers(f)
	f.Fuzz(func(t *testing.T, text string) {
		for _, tok := range toks {
			checkBPE(t, tok, text)
		}
	})
}

// BenchmarkEncodeBPE encodes 1 MiB of mixed text with the Llama 3
// vocabulary.
func BenchmarkEncodeBPE(b *testing.B) {
	tok := loadGGUF(b, vocabPath(b, "llama-bpe"))
	const chunk = "The quick brown fox, it's said, jumped 1234 times!\n\tПривет мир 你好世界 🦙 <|eot_id|> "
	text := strings.Repeat(chunk, (1<<20)/len(chunk))
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Encode(text, true)
	}
}
