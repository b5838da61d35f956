package tokenizer

import "strings"

// llama.cpp recognises special tokens by their text as well as by the ids
// a file names, and changes their types (llama_vocab::impl::load): a token
// so recognised becomes a control token, so that Encode cuts it out only
// when it parses special tokens and Piece prints nothing for it. It does
// so for every vocabulary type; these are its lists.

// Special ids that llama.cpp finds by text when the file names none, in
// the order of specialTexts.
const (
	specialEOT = iota
	specialEOM
	specialFIMPre
	specialFIMSuf
	specialFIMMid
	specialFIMPad
	specialFIMRep
	specialFIMSep
	numSpecial
)

// specialTexts are, for each special id, the texts llama.cpp takes for it.
var specialTexts = [numSpecial][]string{
	specialEOT: {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
		"<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"},
	specialEOM:    {"<|eom_id|>"},
	specialFIMPre: {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"},
	specialFIMSuf: {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"},
	specialFIMMid: {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"},
	specialFIMPad: {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"},
	specialFIMRep: {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
	specialFIMSep: {"<|file_sep|>"},
}

var (
	// eogTexts are the texts of tokens that end generation.
	eogTexts = []string{
		"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
		"<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
		"<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
		"<｜end▁of▁sentence｜>", "[e~[",
	}

	// alwaysUserDefined are gpt-oss's tokens, which llama.cpp always makes
	// user-defined so that they print even when special tokens do not.
	alwaysUserDefined = []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}
)

// findSpecials fills in the special ids that are -1 (the file names none)
// with the token llama.cpp finds by its text, and makes each token so
// found a control token. llama.cpp walks its token_to_id map and takes,
// for each id, the first token it meets with one of the id's texts; where
// several are present (Llama 3 has "<|eot_id|>" and "<|end_of_text|>"),
// mapOrder gives the order it meets them in.
func (t *Tokenizer) findSpecials(ids *[numSpecial]int32) {
	var found [numSpecial][]int32
	several := false
	for k, texts := range specialTexts {
		if ids[k] >= 0 {
			continue
		}
		for _, text := range texts {
			if id, ok := t.ids[text]; ok {
				found[k] = append(found[k], id)
			}
		}
		several = several || len(found[k]) > 1
	}
	var rank map[int32]int
	if several {
		rank = map[int32]int{}
		for _, ids := range found {
			for _, id := range ids {
				rank[id] = 0
			}
		}
		for i, id := range mapOrder(t.tokens) {
			if _, ok := rank[id]; ok {
				rank[id] = i
			}
		}
	}
	for k, cands := range found {
		if len(cands) == 0 {
			continue
		}
		best := cands[0]
		for _, id := range cands[1:] {
			if rank[id] < rank[best] {
				best = id
			}
		}
		ids[k] = best
		t.types[best] = TypeControl
	}
}

// markSpecials finds the special tokens the file does not name, builds
// the end-of-generation set, and changes token types as llama.cpp does
// when it loads a vocabulary. Where llama.cpp adds the control attribute
// to a token's others, this sets the type to TypeControl: the control
// attribute decides everything Encode and Piece do with a token.
func (t *Tokenizer) markSpecials(v Vocab) {
	ids := [numSpecial]int32{v.EOT, v.EOM, v.FIMPre, v.FIMSuf, v.FIMMid, v.FIMPad, v.FIMRep, v.FIMSep}
	t.findSpecials(&ids)
	t.eot, t.eom = ids[specialEOT], ids[specialEOM]
	copy(t.fim[:], ids[specialFIMPre:])

	t.eog = map[int32]bool{}
	for _, id := range ids[specialFIMPad:] {
		if id >= 0 {
			t.eog[id] = true
		}
	}
	for _, text := range eogTexts {
		if id, ok := t.ids[text]; ok {
			t.eog[id] = true
			t.types[id] = TypeControl
		}
	}
	for _, text := range alwaysUserDefined {
		if id, ok := t.ids[text]; ok {
			t.types[id] = TypeUserDefined
		}
	}
	for _, id := range []int32{t.eos, t.eot, t.eom} {
		if id >= 0 {
			t.eog[id] = true
		}
	}

	// gpt-oss and Solar Open end a message with "<|end|>" but go on
	// generating after it: with their "<|return|>"/"<|call|>" or
	// "<|calls|>"/"<|flush|>", it is an ordinary printable token.
	has := func(text string) bool { id, ok := t.ids[text]; return ok && t.eog[id] }
	if end, ok := t.ids["<|end|>"]; ok && t.eog[end] {
		call := has("<|call|>") || has("<|calls|>")
		if call && (has("<|return|>") || has("<|flush|>")) {
			delete(t.eog, end)
			t.types[end] = TypeUserDefined
		}
	}
	// Gemma 4's "</s>" is text, not the end of anything.
	if s, ok := t.ids["</s>"]; ok && t.eog[s] && has("<|tool_response>") {
		delete(t.eog, s)
		t.types[s] = TypeNormal
	}
}

// Strip attributes of a special token (llama.cpp's LLAMA_TOKEN_ATTR_LSTRIP
// and LLAMA_TOKEN_ATTR_RSTRIP): where Encode cuts the token out of its
// input, it drops the whitespace before (lstrip) or after (rstrip) it.
const (
	stripLeft uint8 = 1 << iota
	stripRight
)

// setStrip gives tokens the strip attributes llama.cpp's load gives them
// for some models, told apart by name: "<mask>" lstrip for the
// pre-tokenizers "jina-v2-de", "jina-v2-es" and "jina-v2-code" and the
// architectures "nomic-bert-moe" and "jina-bert-v3"; for a general.name
// containing "phi-3" or "phi3" (in any case), rstrip for every special
// token and "</s>" but not "<unk>", "<s>" or "<|endoftext|>"; and for one
// containing "modern-bert", "[MASK]" lstrip. It runs after t.special is
// built, as llama.cpp sets them after its special-token cache. A named
// token the vocabulary lacks is skipped (llama.cpp fails to load a Phi-3
// vocabulary without "</s>").
func (t *Tokenizer) setStrip(v Vocab) {
	set := func(id int32, flag uint8, on bool) {
		if t.strip == nil {
			t.strip = make([]uint8, len(t.tokens))
		}
		if on {
			t.strip[id] |= flag
		} else {
			t.strip[id] &^= flag
		}
	}
	setText := func(text string, flag uint8, on bool) {
		if id, ok := t.ids[text]; ok {
			set(id, flag, on)
		}
	}
	containsAny := func(s string, subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(s, sub) {
				return true
			}
		}
		return false
	}
	name := cLower(v.Name)
	switch {
	case containsAny(v.Pre, "jina-v2-de", "jina-v2-es", "jina-v2-code") ||
		containsAny(v.Architecture, "nomic-bert-moe", "jina-bert-v3"):
		setText("<mask>", stripLeft, true)
	case containsAny(name, "phi-3", "phi3"):
		for _, id := range t.special {
			set(id, stripRight, true)
		}
		setText("</s>", stripRight, true)
		for _, text := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			setText(text, stripRight, false)
		}
	case containsAny(name, "modern-bert"):
		setText("[MASK]", stripLeft, true)
	}
}

// cLower lowers the case of ASCII letters only, as C's tolower does
// byte by byte.
func cLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// isSpace is C's isspace in the "C" locale: the bytes llama.cpp strips
// next to a token with a strip attribute.
func isSpace(c byte) bool {
	return c == ' ' || '\t' <= c && c <= '\r'
}
