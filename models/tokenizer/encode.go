package tokenizer

import (
	"sort"
	"strings"
)

// spaceEscape is U+2581 LOWER ONE EIGHTH BLOCK, which SentencePiece
// vocabularies use in place of the space character.
const spaceEscape = "\u2581"

// fragment is a part of the input: either a special token found in it
// (token >= 0) or text still to be tokenized (token == -1).
type fragment struct {
	token int32
	text  string
}

// Encode returns the tokens of text as llama.cpp's llama_tokenize(text,
// addSpecial, parse_special=true) does, which is how llama-completion
// tokenizes its prompt: the texts of control, user-defined and unknown
// tokens ("<s>", "</s>", "<|eot_id|>", ...) in text become those tokens,
// and the text between them is tokenized by SentencePiece or BPE. With
// addSpecial, BOS comes first if AddBOS is set and EOS last if AddEOS is
// set.
//
// SentencePiece: when AddSpacePrefix is set, a space is put before each
// run of text that starts the input or follows a special token, so "Hi"
// is tokenized as " Hi"; Decode and Stream take it away again.
//
// The whitespace (C's isspace: space, \t, \n, \v, \f, \r) next to a
// special token with a strip attribute is dropped, as llama.cpp does: after
// Phi-3's special tokens, for one (see Vocab.Name).
//
// BPE: text that is not valid UTF-8 is read as llama.cpp reads it, each
// byte that does not start a well-formed sequence standing for U+FFFD.
func (t *Tokenizer) Encode(text string, addSpecial bool) []int32 {
	return t.encode(text, addSpecial, true)
}

// EncodePlain is Encode with llama.cpp's parse_special=false: the texts of
// control and unknown tokens in text are tokenized as ordinary text.
// User-defined tokens are still cut out, as llama.cpp does.
func (t *Tokenizer) EncodePlain(text string, addSpecial bool) []int32 {
	return t.encode(text, addSpecial, false)
}

func (t *Tokenizer) encode(text string, addSpecial, parseSpecial bool) []int32 {
	var frags []fragment
	if text != "" {
		frags = t.partition(text, parseSpecial)
	}

	out := make([]int32, 0, len(text)+2)
	if addSpecial && t.addBOS {
		out = append(out, t.bos)
	}
	if t.bpe != nil {
		var sc bpeScratch
		for _, f := range frags {
			if f.token >= 0 {
				out = append(out, f.token)
				continue
			}
			out = t.bpe.encode(t, f.text, &sc, out)
		}
		if addSpecial && t.addEOS {
			out = append(out, t.eos)
		}
		return out
	}
	// The start of the input counts as following a special token, whether
	// or not a BOS was written.
	prevSpecial := true
	for _, f := range frags {
		if f.token >= 0 {
			out = append(out, f.token)
			prevSpecial = true
			continue
		}
		s := f.text
		if t.addSpacePrefix && prevSpecial {
			s = " " + s
		}
		out = t.spm(strings.ReplaceAll(s, " ", spaceEscape), out)
		prevSpecial = false
	}
	if addSpecial && t.addEOS {
		out = append(out, t.eos)
	}
	return out
}

// partition splits text at every occurrence of a special token's text, as
// llama.cpp's tokenizer_st_partition does: special tokens are tried
// longest first, each against the text fragments the longer ones left,
// matching leftmost and without overlap. Without parseSpecial only
// user-defined tokens are looked for.
//
// Rather than rebuild the fragment list for every special token (there
// may be thousands, and the text may be cut into millions of fragments),
// it marks the bytes taken so far and builds the fragments once. An
// occurrence lies inside one fragment exactly when it overlaps no token
// taken before it, and since those are at least as long as it, any that
// overlaps it covers its first or its last byte.
//
// A token with a strip attribute (setStrip) also takes the whitespace
// before it (lstrip) or after it (rstrip) out of the fragment it was found
// in, as llama.cpp drops it from the text to its left or right. Those
// bytes are marked as taken too, so the argument above still holds: a
// stripped run touches its token, so an occurrence overlapping it, no
// longer than the token, starts or ends in the run or the token.
func (t *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	// Which bytes, and which pairs of adjacent bytes, the text has: most
	// special tokens are absent, and this rules them out without a search.
	var present [256]bool
	var pairs [1 << 16 / 64]uint64
	for i := 0; i < len(text); i++ {
		present[text[i]] = true
		if i > 0 {
			p := uint16(text[i-1])<<8 | uint16(text[i])
			pairs[p/64] |= 1 << (p % 64)
		}
	}
	// A span is a special token at text[start:], with the bytes
	// text[from:to] around it taken out.
	type span struct {
		start, from, to int
		token           int32
	}
	var spans []span
	var taken []bool // taken[i]: byte i belongs to a special token or was stripped; made on the first match
	for _, id := range t.special {
		if !parseSpecial && t.types[id] != TypeUserDefined {
			continue
		}
		tok := t.tokens[id] // never empty: New renames empty tokens
		if !present[tok[0]] {
			continue
		}
		if len(tok) > 1 {
			if p := uint16(tok[0])<<8 | uint16(tok[1]); pairs[p/64]&(1<<(p%64)) == 0 {
				continue
			}
		}
		for off := 0; off <= len(text)-len(tok); {
			i := strings.Index(text[off:], tok)
			if i < 0 {
				break
			}
			p := off + i
			if taken != nil && (taken[p] || taken[p+len(tok)-1]) {
				off = p + 1
				continue
			}
			if taken == nil {
				taken = make([]bool, len(text))
			}
			from, to := p, p+len(tok)
			if t.strip != nil && t.strip[id]&stripLeft != 0 {
				for from > 0 && !taken[from-1] && isSpace(text[from-1]) {
					from--
				}
			}
			if t.strip != nil && t.strip[id]&stripRight != 0 {
				for to < len(text) && !taken[to] && isSpace(text[to]) {
					to++
				}
			}
			for k := from; k < to; k++ {
				taken[k] = true
			}
			spans = append(spans, span{p, from, to, id})
			off = to
		}
	}
	if len(spans) == 0 {
		return []fragment{{token: -1, text: text}}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	frags := make([]fragment, 0, 2*len(spans)+1)
	pos := 0
	for _, s := range spans {
		if s.from > pos {
			frags = append(frags, fragment{token: -1, text: text[pos:s.from]})
		}
		frags = append(frags, fragment{token: s.token})
		pos = s.to
	}
	if pos < len(text) {
		frags = append(frags, fragment{token: -1, text: text[pos:]})
	}
	return frags
}
