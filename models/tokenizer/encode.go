package tokenizer

import "strings"

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
// tokens ("<s>", "</s>", ...) in text become those tokens, and the text
// between them is tokenized by SentencePiece. With addSpecial, BOS comes
// first if AddBOS is set and EOS last if AddEOS is set.
//
// When AddSpacePrefix is set, a space is put before each run of text that
// starts the input or follows a special token, so "Hi" is tokenized as
// " Hi"; Decode and Stream take it away again.
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
// llama.cpp also strips spaces next to tokens marked lstrip or rstrip, but
// it marks them only for a few named non-Llama models, so that is left out.
func (t *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	frags := []fragment{{token: -1, text: text}}
	for _, id := range t.special {
		if !parseSpecial && t.types[id] != TypeUserDefined {
			continue
		}
		tok := t.tokens[id]
		var next []fragment
		for _, f := range frags {
			if f.token >= 0 || !strings.Contains(f.text, tok) {
				next = append(next, f)
				continue
			}
			rest := f.text
			for {
				i := strings.Index(rest, tok)
				if i < 0 {
					break
				}
				if i > 0 {
					next = append(next, fragment{token: -1, text: rest[:i]})
				}
				next = append(next, fragment{token: id})
				rest = rest[i+len(tok):]
			}
			if rest != "" {
				next = append(next, fragment{token: -1, text: rest})
			}
		}
		frags = next
	}
	return frags
}
