package tokenizer

import (
	"slices"
	"testing"
)

// TestStdHash checks stdHash against values libstdc++'s
// std::hash<std::string> gave (GCC 12, x86-64), and mapOrder against the
// order its std::unordered_map iterated 15 one-letter keys inserted "a" to
// "o": one rehash, from 13 buckets to 29. TestLlamaCppSpecialIDs checks
// mapOrder on whole vocabularies.
func TestStdHash(t *testing.T) {
	for _, tt := range []struct {
		s    string
		want uint64
	}{
		{"", 6142509188972423790},
		{"a", 4993892634952068459},
		{"<|eot_id|>", 16025401802141084834},
		{"<|end_of_text|>", 9809926064213887094},
		{"hello, world!", 11337894577627512872},
	} {
		if got := stdHash(tt.s); got != tt.want {
			t.Errorf("stdHash(%q) = %d, want %d", tt.s, got, tt.want)
		}
	}
	var keys []string
	for c := 'a'; c <= 'o'; c++ {
		keys = append(keys, string(c))
	}
	if got, want := mapOrder(keys), []int32{14, 0, 1, 7, 13, 3, 10, 2, 8, 5, 6, 4, 9, 11, 12}; !slices.Equal(got, want) {
		t.Errorf("mapOrder(a..o) = %v, want %v", got, want)
	}
}

// stripVocab is helloVocab with the special tokens "<|end|>" (control),
// "<|user|>" (user-defined) and "[MASK]" (control), named name.
func stripVocab(name string) Vocab {
	v := helloVocab()
	v.Name = name
	v.Tokens = append(v.Tokens, "<|end|>", "<|user|>", "[MASK]")
	v.Scores = append(v.Scores, 0, 0, 0)
	v.Types = append(v.Types, TypeControl, TypeUserDefined, TypeControl)
	return v
}

// TestStrip checks that Encode drops the whitespace next to special
// tokens with a strip attribute, as llama.cpp's tokenizer_st_partition
// does: after Phi-3's special tokens but "<s>", "<unk>" and
// "<|endoftext|>", before ModernBERT's "[MASK]", and nowhere for other
// models. Each text must encode as its pair does.
func TestStrip(t *testing.T) {
	for _, tt := range []struct {
		name         string
		parseSpecial bool
		text, same   string
		differ       bool // the pair must encode differently: nothing stripped
	}{
		{"Phi-3-mini-4k", true, "hello<|end|> \t\n\v\f\r world", "hello<|end|>world", false},
		{"PHI3", true, "hello <|end|>  ", "hello <|end|>", false},
		{"phi3", true, "<|end|>  <|end|> x", "<|end|><|end|>x", false},
		{"phi3", false, "<|user|>  hello", "<|user|>hello", false},
		{"phi3", true, "<|end|>\u00a0hello", "<|end|>hello", true},
		{"phi3", true, "<s> hello", "<s>hello", true},
		{"phi3", true, "<unk> hello", "<unk>hello", true},
		{"phi3", true, "hello </s>  world", "hello </s>world", false},
		{"llama", true, "hello<|end|> world", "hello<|end|>world", true},
		{"modern-bert-base", true, "hello \n [MASK] world", "hello[MASK] world", false},
		{"modern-bert-base", true, "[MASK] world", "[MASK]world", true},
		{"modern-bert-base", true, "hello [MASK]  [MASK]", "hello[MASK][MASK]", false},
		{"modern-bert-base", false, "hello [MASK]", "hello[MASK]", true},
	} {
		tok := mustNew(t, stripVocab(tt.name))
		enc := tok.EncodePlain
		if tt.parseSpecial {
			enc = tok.Encode
		}
		got, want := enc(tt.text, false), enc(tt.same, false)
		if slices.Equal(got, want) == tt.differ {
			t.Errorf("%s: %q encodes as %v, %q as %v; want them %s", tt.name, tt.text, got, tt.same, want,
				map[bool]string{false: "equal", true: "different"}[tt.differ])
		}
	}
}

// TestFindSpecials checks that of several end-of-turn and FIM texts the
// token that llama.cpp's token map meets first wins, whatever the texts'
// order in llama.cpp's lists or by value, and becomes a control token;
// and that an id the file names is kept.
func TestFindSpecials(t *testing.T) {
	v := helloVocab()
	extra := []string{"<|end_of_text|>", "<|eot_id|>", "<|endoftext|>", "<PRE>", "<|fim_prefix|>"}
	for _, s := range extra {
		v.Tokens = append(v.Tokens, s)
		v.Scores = append(v.Scores, 0)
		v.Types = append(v.Types, TypeNormal)
	}
	id := func(s string) int32 { return int32(slices.Index(v.Tokens, s)) }
	first := func(texts ...string) int32 {
		for _, i := range mapOrder(v.Tokens) {
			if slices.Contains(texts, v.Tokens[i]) {
				return i
			}
		}
		return -1
	}
	tok := mustNew(t, v)
	eot, pre := first(extra[:3]...), first(extra[3:]...)
	if tok.EOT() != eot || tok.fim[0] != pre {
		t.Errorf("EOT %d, FIM prefix %d; want %d (%q), %d (%q)", tok.EOT(), tok.fim[0], eot, v.Tokens[eot], pre, v.Tokens[pre])
	}
	if tok.Type(eot) != TypeControl || tok.Type(pre) != TypeControl {
		t.Errorf("types of EOT and FIM prefix %d, %d; want control", tok.Type(eot), tok.Type(pre))
	}
	v.EOT = id("<|endoftext|>")
	if tok := mustNew(t, v); tok.EOT() != v.EOT {
		t.Errorf("EOT %d, want the file's %d", tok.EOT(), v.EOT)
	}
}
