package tokenizer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// testVocab returns a small Llama vocabulary: <unk> 0, <s> 1, </s> 2, the
// 256 byte tokens <0x00>..<0xFF> as ids 3..258, then words with the given
// scores, in order.
func testVocab(words []string, scores []float32) Vocab {
	v := NewVocab("llama")
	v.Tokens = []string{"<unk>", "<s>", "</s>"}
	v.Scores = []float32{0, 0, 0}
	v.Types = []int32{TypeUnknown, TypeControl, TypeControl}
	for b := 0; b < 256; b++ {
		v.Tokens = append(v.Tokens, fmt.Sprintf("<0x%02X>", b))
		v.Scores = append(v.Scores, 0)
		v.Types = append(v.Types, TypeByte)
	}
	for i, w := range words {
		v.Tokens = append(v.Tokens, w)
		v.Scores = append(v.Scores, scores[i])
		v.Types = append(v.Types, TypeNormal)
	}
	return v
}

// byteID is the id of byte b's token in testVocab.
func byteID(b byte) int32 { return 3 + int32(b) }

// wordsBase is the id of the first word in testVocab.
const wordsBase = 259

func mustNew(t *testing.T, v Vocab) *Tokenizer {
	t.Helper()
	tok, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// helloVocab has the pieces of "hello world" and a few more, scored so
// that longer pieces win.
func helloVocab() Vocab {
	words := []string{"▁", "h", "e", "l", "o", "w", "r", "d", "he", "ll", "llo", "hello", "▁hello", "▁w", "or", "ld", "▁wor", "▁world", "▁▁", "x"}
	scores := make([]float32, len(words))
	for i, w := range words {
		scores[i] = float32(utf8.RuneCountInString(w)) - float32(i)/100
	}
	return testVocab(words, scores)
}

func TestNewErrors(t *testing.T) {
	base := func() Vocab { return helloVocab() }
	tests := []struct {
		name   string
		modify func(*Vocab)
		want   string
	}{
		{"t5", func(v *Vocab) { v.Model = "t5" }, `tokenizer: model "t5" is not supported (only the Llama SentencePiece tokenizer, "llama", and byte-level BPE, "gpt2")`},
		{"unknown pre", func(v *Vocab) { v.Model, v.Pre = "gpt2", "nonsense" }, `tokenizer: pre-tokenizer "nonsense" (tokenizer.ggml.pre) is not supported`},
		{"empty model", func(v *Vocab) { v.Model = "" }, `model "" is not supported`},
		{"no tokens", func(v *Vocab) { v.Tokens, v.Scores, v.Types = nil, nil, nil }, "vocabulary is empty"},
		{"scores length", func(v *Vocab) { v.Scores = v.Scores[1:] }, "scores for"},
		{"types length", func(v *Vocab) { v.Types = v.Types[1:] }, "token types for"},
		{"duplicate", func(v *Vocab) { v.Tokens[len(v.Tokens)-1] = "▁hello" }, "same text"},
		{"BOS range", func(v *Vocab) { v.BOS = int32(len(v.Tokens)) }, "BOS token id"},
		{"EOS range", func(v *Vocab) { v.EOS = -2 }, "EOS token id"},
		{"add BOS without BOS", func(v *Vocab) { v.BOS = -1 }, "no BOS token"},
		{"add EOS without EOS", func(v *Vocab) { v.AddEOS, v.EOS = true, -1 }, "no EOS token"},
		{"no byte token nor UNK", func(v *Vocab) { v.Tokens[3+0x41] = "<0x41>x"; v.UNK = -1 }, "no token for byte 0x41"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := base()
			tt.modify(&v)
			_, err := New(v)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	v := NewVocab("llama")
	if v.BOS != 1 || v.EOS != 2 || v.UNK != 0 || v.PAD != -1 || v.EOT != -1 || !v.AddBOS || v.AddEOS || !v.AddSpacePrefix {
		t.Errorf("NewVocab(\"llama\") = %+v", v)
	}
	// Optional arrays: no scores means all zero, no types all normal.
	v = helloVocab()
	v.Scores, v.Types = nil, nil
	tok := mustNew(t, v)
	if tok.Type(1) != TypeNormal {
		t.Errorf("Type(1) = %d without token types, want %d", tok.Type(1), TypeNormal)
	}
}

// TestEncode checks hand-worked encodings on helloVocab.
func TestEncode(t *testing.T) {
	tok := mustNew(t, helloVocab())
	id := func(w string) int32 {
		i, ok := tok.ids[w]
		if !ok {
			t.Fatalf("no token %q", w)
		}
		return i
	}
	bytesOf := func(s string) []int32 {
		var ids []int32
		for i := 0; i < len(s); i++ {
			ids = append(ids, byteID(s[i]))
		}
		return ids
	}
	tests := []struct {
		name       string
		text       string
		addSpecial bool
		want       []int32
	}{
		{"empty", "", false, nil},
		{"empty with BOS", "", true, []int32{1}},
		{"hello world", "hello world", true, []int32{1, id("▁hello"), id("▁world")}},
		{"no BOS", "hello world", false, []int32{id("▁hello"), id("▁world")}},
		{"one space", " ", false, []int32{id("▁▁")}},
		{"three spaces", "   ", false, []int32{id("▁▁"), id("▁▁")}},
		// "▁hello" outscores "▁▁", so the extra space stands alone.
		{"leading space", " hello", false, []int32{id("▁"), id("▁hello")}},
		{"trailing space", "hello ", false, []int32{id("▁hello"), id("▁")}},
		{"two spaces", "hello  world", false, []int32{id("▁hello"), id("▁"), id("▁world")}},
		{"newline", "hello\nworld", false, append(append([]int32{id("▁hello")}, byteID('\n')), id("w"), id("or"), id("ld"))},
		{"byte fallback", "日本", false, append([]int32{id("▁")}, bytesOf("日本")...)},
		{"emoji", "x🙂", false, append([]int32{id("▁"), id("x")}, bytesOf("🙂")...)},
		{"control text parsed", "hello</s>", false, []int32{id("▁hello"), 2}},
		{"space prefix after special", "<s>hello", false, []int32{1, id("▁hello")}},
		{"unknown text parsed", "<unk>", false, []int32{0}},
		{"invalid UTF-8", "\xff\xe6", false, append([]int32{id("▁")}, bytesOf("\xff\xe6")...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tok.Encode(tt.text, tt.addSpecial)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Encode(%q, %v) = %v, want %v", tt.text, tt.addSpecial, got, tt.want)
			}
		})
	}
}

func TestEncodePlain(t *testing.T) {
	v := helloVocab()
	// A user-defined token is cut out even without parsing special tokens.
	v.Tokens = append(v.Tokens, "<ud>")
	v.Scores = append(v.Scores, 0)
	v.Types = append(v.Types, TypeUserDefined)
	ud := int32(len(v.Tokens) - 1)
	tok := mustNew(t, v)
	lt, gt := byteID('<'), byteID('>')
	slash := byteID('/')

	got := tok.EncodePlain("x</s>", false)
	want := []int32{tok.ids["▁"], tok.ids["x"], lt, slash, byteID('s'), gt}
	if !slices.Equal(got, want) {
		t.Errorf("EncodePlain(%q) = %v, want %v", "x</s>", got, want)
	}
	got = tok.EncodePlain("x<ud>x", false)
	want = []int32{tok.ids["▁"], tok.ids["x"], ud, tok.ids["▁"], tok.ids["x"]}
	if !slices.Equal(got, want) {
		t.Errorf("EncodePlain(%q) = %v, want %v", "x<ud>x", got, want)
	}
	if got := tok.Decode(tok.Encode("x<ud>x", true)); got != "x<ud>x" {
		t.Errorf("Decode(Encode(%q)) = %q", "x<ud>x", got)
	}
}

func TestEncodeOptions(t *testing.T) {
	v := helloVocab()
	v.AddEOS = true
	v.AddSpacePrefix = false
	tok := mustNew(t, v)
	got := tok.Encode("hello world", true)
	want := []int32{1, tok.ids["hello"], tok.ids["▁world"], 2}
	if !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	if s := tok.Decode(got); s != "hello world" {
		t.Errorf("Decode(%v) = %q", got, s)
	}
	v.AddBOS = false
	tok = mustNew(t, v)
	if got := tok.Encode("", true); !slices.Equal(got, []int32{2}) {
		t.Errorf("Encode(\"\") = %v, want [2]", got)
	}
}

// TestTieBreak checks that among merges of equal score the leftmost goes
// first, and that a higher score beats position.
func TestTieBreak(t *testing.T) {
	tests := []struct {
		name   string
		scores []float32 // for "ab", "bc"
		want   []string
	}{
		{"equal scores: leftmost", []float32{1, 1}, []string{"▁", "ab", "c"}},
		{"right scores higher", []float32{1, 2}, []string{"▁", "a", "bc"}},
		{"left scores higher", []float32{2, 1}, []string{"▁", "ab", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			words := []string{"ab", "bc", "▁", "a", "b", "c"}
			tok := mustNew(t, testVocab(words, append(tt.scores, 0, 0, 0, 0)))
			var got []string
			for _, id := range tok.Encode("abc", false) {
				got = append(got, tok.Token(id))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Encode(\"abc\") = %q, want %q", got, tt.want)
			}
		})
	}
}

// naiveSPM is a slow, obvious version of the merge loop: over and over,
// merge the adjacent pair whose union is the token of highest score,
// leftmost among equals.
func naiveSPM(t *Tokenizer, text string) []int32 {
	var syms []string
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		syms = append(syms, text[off:off+n])
		off += n
	}
	for {
		best := -1
		var bestScore float32
		for i := 0; i+1 < len(syms); i++ {
			id, ok := t.ids[syms[i]+syms[i+1]]
			if ok && (best < 0 || t.scores[id] > bestScore) {
				best, bestScore = i, t.scores[id]
			}
		}
		if best < 0 {
			break
		}
		syms = slices.Replace(syms, best, best+2, syms[best]+syms[best+1])
	}
	var out []int32
	for _, s := range syms {
		if id, ok := t.ids[s]; ok {
			out = append(out, id)
		} else {
			out = t.byteFallback(s, out)
		}
	}
	return out
}

// TestSPMAgainstNaive compares the priority-queue merge with naiveSPM on
// random vocabularies over a small alphabet, with many tied scores.
func TestSPMAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "c", "▁", "é"}
	randStr := func(n int) string {
		var sb strings.Builder
		for range n {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return sb.String()
	}
	for trial := range 300 {
		seen := map[string]bool{}
		var words []string
		var scores []float32
		for range 5 + rng.IntN(40) {
			w := randStr(1 + rng.IntN(4))
			if seen[w] {
				continue
			}
			seen[w] = true
			words = append(words, w)
			scores = append(scores, float32(rng.IntN(4)))
		}
		tok := mustNew(t, testVocab(words, scores))
		for range 20 {
			text := randStr(rng.IntN(16))
			got := tok.spm(text, nil)
			want := naiveSPM(tok, text)
			if !slices.Equal(got, want) {
				t.Fatalf("trial %d: vocab %q scores %v: spm(%q) = %v, naive %v", trial, words, scores, text, got, want)
			}
		}
	}
}

// randomText returns a string mixing ASCII, spaces, newlines and runes
// from the whole Unicode range.
func randomText(rng *rand.Rand) string {
	var sb strings.Builder
	for range rng.IntN(20) {
		switch rng.IntN(6) {
		case 0:
			sb.WriteByte(' ')
		case 1:
			sb.WriteByte("\n\t\r"[rng.IntN(3)])
		case 2:
			sb.WriteString([]string{"hello", "world", "ll", "or"}[rng.IntN(4)])
		case 3:
			sb.WriteRune(rune(0x80 + rng.IntN(0x800)))
		case 4:
			r := rune(rng.IntN(0x110000))
			if !utf8.ValidRune(r) {
				r = '?'
			}
			sb.WriteRune(r)
		default:
			sb.WriteByte(byte('a' + rng.IntN(26)))
		}
	}
	return sb.String()
}

func TestRoundTrip(t *testing.T) {
	tok := mustNew(t, helloVocab())
	fixed := []string{"", " ", "  ", "\n", " \n ", "hello", " hello ", "hello  world", "日本", "🙂 x 🙂", "a\x00b", "tab\there"}
	rng := rand.New(rand.NewPCG(3, 4))
	texts := fixed
	for range 2000 {
		texts = append(texts, randomText(rng))
	}
	for _, text := range texts {
		for _, addSpecial := range []bool{false, true} {
			ids := tok.Encode(text, addSpecial)
			if got := tok.Decode(ids); got != text {
				t.Fatalf("Decode(Encode(%q, %v)) = %q (ids %v)", text, addSpecial, got, ids)
			}
		}
	}
}

// TestRoundTripStories260K round-trips random text through the real
// vocabulary, whose byte fallback covers everything outside its 512 tokens.
func TestRoundTripStories260K(t *testing.T) {
	tok := stories260K(t)
	rng := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		text := randomText(rng)
		if got := tok.Decode(tok.Encode(text, true)); got != text {
			t.Fatalf("Decode(Encode(%q)) = %q", text, got)
		}
	}
}

func TestUnknownFallback(t *testing.T) {
	// A vocabulary without byte tokens writes <unk> once for each
	// character it has no token for.
	v := NewVocab("llama")
	v.Tokens = []string{"<unk>", "<s>", "</s>", "▁", "a"}
	v.Types = []int32{TypeUnknown, TypeControl, TypeControl, TypeNormal, TypeNormal}
	tok := mustNew(t, v)
	got := tok.Encode("a日a", false)
	want := []int32{3, 4, 0, 4}
	if !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	if s := tok.Decode(got); s != "aa" {
		t.Errorf("Decode = %q, want %q", s, "aa")
	}
}

func TestPiece(t *testing.T) {
	v := helloVocab()
	v.Tokens = append(v.Tokens, "<ud▁x>", "<unused>", "<0xzz>")
	v.Scores = append(v.Scores, 0, 0, 0)
	v.Types = append(v.Types, TypeUserDefined, TypeUnused, TypeByte)
	tok := mustNew(t, v)
	n := int32(len(v.Tokens))
	tests := []struct {
		id   int32
		want string
	}{
		{0, ""}, {1, ""}, {2, ""},
		{byteID(0x41), "A"},
		{byteID(0xE6), "\xe6"},
		{tok.ids["▁hello"], " hello"},
		{tok.ids["▁▁"], "  "},
		{n - 3, "<ud▁x>"},
		{n - 2, ""},
		{n - 1, "<0xzz>"},
		{-1, ""},
		{n, ""},
	}
	for _, tt := range tests {
		if got := string(tok.Piece(tt.id)); got != tt.want {
			t.Errorf("Piece(%d) = %q, want %q", tt.id, got, tt.want)
		}
	}
}

func TestDecodeSpacePrefix(t *testing.T) {
	tok := mustNew(t, helloVocab())
	hello, world, sp := tok.ids["▁hello"], tok.ids["▁world"], tok.ids["▁▁"]
	tests := []struct {
		name string
		ids  []int32
		want string
	}{
		{"start", []int32{hello, world}, "hello world"},
		{"after BOS", []int32{1, hello, world}, "hello world"},
		{"only first piece", []int32{sp, hello}, "  hello"},
		{"after control", []int32{1, hello, 2, world}, "helloworld"},
		{"byte first", []int32{byteID(' '), hello}, " hello"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tok.Decode(tt.ids); got != tt.want {
				t.Errorf("Decode(%v) = %q, want %q", tt.ids, got, tt.want)
			}
		})
	}
}

func TestEOG(t *testing.T) {
	v := helloVocab()
	v.Tokens = append(v.Tokens, "<|eot_id|>")
	v.Scores = append(v.Scores, 0)
	v.Types = append(v.Types, TypeNormal)
	eot := int32(len(v.Tokens) - 1)
	tok := mustNew(t, v)
	if tok.EOT() != eot || !tok.IsEOG(eot) || !tok.IsEOG(2) || tok.IsEOG(1) || tok.IsEOG(-1) {
		t.Errorf("EOT() = %d (want %d); IsEOG(eot, 2, 1, -1) = %v %v %v %v", tok.EOT(), eot,
			tok.IsEOG(eot), tok.IsEOG(2), tok.IsEOG(1), tok.IsEOG(-1))
	}
	// Like llama.cpp, a detected EOT becomes a control token.
	if tok.Type(eot) != TypeControl || len(tok.Piece(eot)) != 0 {
		t.Errorf("EOT type %d, piece %q; want control, empty", tok.Type(eot), tok.Piece(eot))
	}
	// An explicit EOT id wins over detection; "<|eot_id|>" still ends
	// generation by its text, as llama.cpp's end-of-generation set has it.
	v.EOT = tok.ids["x"]
	tok = mustNew(t, v)
	if tok.EOT() != v.EOT || !tok.IsEOG(v.EOT) || !tok.IsEOG(eot) {
		t.Errorf("EOT() = %d, want %d; IsEOG(EOT, <|eot_id|>) = %v %v", tok.EOT(), v.EOT, tok.IsEOG(v.EOT), tok.IsEOG(eot))
	}
}
