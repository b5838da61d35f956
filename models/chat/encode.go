package chat

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"hybrid/models/tokenizer"
)

// Prompt renders the conversation msgs with t and tokenizes the result for
// tok, returning the token ids to prefill and the text they came from.
//
// The template's own text is tokenized with special tokens parsed (its
// "<|im_start|>" is that token); the messages' contents never are: a user
// who types "<|im_end|>" gets the tokens of that text, not the end of the
// turn. (User-defined tokens are still cut out of contents, as
// Tokenizer.EncodePlain does.)
//
// BOS and EOS follow llama.cpp's server: opts.BOSToken and opts.EOSToken,
// when empty, are the text of tok's BOS and EOS tokens; when the vocabulary
// adds a BOS (Tokenizer.AddsBOS) and the rendered text starts with the BOS
// text, that text is dropped before tokenizing, so a template that prints
// bos_token itself does not get a second BOS; the same for a trailing EOS
// of a vocabulary that adds one. The returned text is what was tokenized,
// without them.
//
// Without special-token text in any content the ids are exactly
// tok.Encode(text, true), llama.cpp's tokenization of the prompt. Otherwise
// the contents are located exactly by rendering them once more between
// markers; a template that changes such a content (anything other than
// trimming its whitespace) so that the markers do not come through is an
// error rather than a guess.
func Prompt(t *Template, tok *tokenizer.Tokenizer, msgs []Message, opts Options) (ids []int32, text string, err error) {
	return prompt(t, tok, msgs, opts, false)
}

// prompt is Prompt; protectAll locates every message's content, not only
// those with special-token text (tests compare the two paths).
func prompt(t *Template, tok *tokenizer.Tokenizer, msgs []Message, opts Options, protectAll bool) ([]int32, string, error) {
	if opts.BOSToken == "" && tok.BOS() >= 0 {
		opts.BOSToken = string(tok.PieceSpecial(tok.BOS()))
	}
	if opts.EOSToken == "" && tok.EOS() >= 0 {
		opts.EOSToken = string(tok.PieceSpecial(tok.EOS()))
	}
	text, err := t.Render(msgs, opts)
	if err != nil {
		return nil, "", err
	}
	bos, eos := addsSpecial(tok)

	var protect []bool
	for i, m := range msgs {
		if protectAll && strings.TrimSpace(m.Content) != "" || hasSpecialText(tok, m.Content) {
			if protect == nil {
				protect = make([]bool, len(msgs))
			}
			protect[i] = true
		}
	}
	if protect == nil {
		from, to := trimSpecial(text, nil, bos, eos, opts)
		text = text[from:to]
		return tok.Encode(text, true), text, nil
	}

	spans, err := locate(t, msgs, protect, opts, text)
	if err != nil {
		return nil, "", err
	}
	from, to := trimSpecial(text, spans, bos, eos, opts)
	text = text[from:to]
	for i := range spans {
		spans[i].from -= from
		spans[i].to -= from
	}

	out := make([]int32, 0, len(text)/3+2)
	if bos {
		out = append(out, tok.BOS())
	}
	out = encodeSpans(tok, text, spans, out)
	if eos {
		out = append(out, tok.EOS())
	}
	return out, text, nil
}

// addsSpecial reports whether tok's Encode with addSpecial puts a BOS first
// and an EOS last.
func addsSpecial(tok *tokenizer.Tokenizer) (bos, eos bool) {
	bos = tok.AddsBOS()
	n := 0
	if bos {
		n = 1
	}
	return bos, len(tok.Encode("", true)) > n
}

// hasSpecialText reports whether s holds the text of a token that Encode
// parses and EncodePlain does not (control and unknown tokens).
func hasSpecialText(tok *tokenizer.Tokenizer, s string) bool {
	if s == "" {
		return false
	}
	return !slices.Equal(tok.Encode(s, false), tok.EncodePlain(s, false))
}

// trimSpecial returns the part text[from:to] left after dropping a leading
// BOS text when the tokenizer adds a BOS, and a trailing EOS text when it
// adds an EOS (llama.cpp's common_chat_template_direct_apply), unless a
// content span overlaps it.
func trimSpecial(text string, spans []span, bos, eos bool, opts Options) (from, to int) {
	from, to = 0, len(text)
	if b := opts.BOSToken; bos && b != "" && strings.HasPrefix(text, b) &&
		!slices.ContainsFunc(spans, func(s span) bool { return s.from < len(b) }) {
		from = len(b)
	}
	if e := opts.EOSToken; eos && e != "" && strings.HasSuffix(text[from:], e) &&
		!slices.ContainsFunc(spans, func(s span) bool { return s.to > to-len(e) }) {
		to -= len(e)
	}
	return from, to
}

// span is a message's content at text[from:to].
type span struct{ from, to int }

// locate renders msgs again with the protected contents between markers
// made unique by a random nonce, and returns where those contents lie in
// text, the plain rendering. The markers wrap a content's text inside its
// leading and trailing whitespace, so that templates that trim contents
// keep them. It fails if removing the markers does not give text back.
func locate(t *Template, msgs []Message, protect []bool, opts Options, text string) ([]span, error) {
	var nb [8]byte
	if _, err := rand.Read(nb[:]); err != nil {
		return nil, err
	}
	nonce := hex.EncodeToString(nb[:])
	open := "\uE000" + nonce
	const close = "\uE001"

	marked := make([]Message, len(msgs))
	for i, m := range msgs {
		marked[i] = m
		if !protect[i] {
			continue
		}
		core := strings.TrimLeftFunc(m.Content, unicode.IsSpace)
		lead := m.Content[:len(m.Content)-len(core)]
		core = strings.TrimRightFunc(core, unicode.IsSpace)
		trail := m.Content[len(lead)+len(core):]
		n := strconv.Itoa(i)
		marked[i].Content = lead + open + "s" + n + close + core + open + "e" + n + close + trail
	}
	out, err := t.Render(marked, opts)
	if err != nil {
		return nil, fmt.Errorf("chat: render with the contents marked: %w", err)
	}

	var sb strings.Builder
	var spans []span
	openMsg := -1 // the message whose start marker came last, or -1
	for {
		i := strings.Index(out, open)
		if i < 0 {
			sb.WriteString(out)
			break
		}
		sb.WriteString(out[:i])
		out = out[i+len(open):]
		j := strings.Index(out, close)
		if j < 2 {
			return nil, errChanged(-1)
		}
		kind, n := out[0], out[1:j]
		out = out[j+len(close):]
		m, err := strconv.Atoi(n)
		if err != nil || m < 0 || m >= len(msgs) {
			return nil, errChanged(-1)
		}
		switch {
		case kind == 's' && openMsg < 0:
			openMsg = m
			spans = append(spans, span{from: sb.Len()})
		case kind == 'e' && openMsg == m:
			openMsg = -1
			spans[len(spans)-1].to = sb.Len()
		default:
			return nil, errChanged(m)
		}
	}
	if openMsg >= 0 {
		return nil, errChanged(openMsg)
	}
	if sb.String() != text {
		return nil, errChanged(-1)
	}
	return spans, nil
}

// ErrChangedContent is wrapped by Prompt's error when a message holds the
// text of a special token and the template changes that content so that it
// cannot be told apart from the template's own text.
var ErrChangedContent = errors.New("the template changes it so that it cannot be kept as plain text")

func errChanged(msg int) error {
	which := "a message"
	if msg >= 0 {
		which = fmt.Sprintf("message %d", msg)
	}
	return fmt.Errorf("chat: %s holds the text of a special token, and %w", which, ErrChangedContent)
}

// encodeSpans appends the tokens of text with special tokens parsed outside
// spans and not inside them, as one Encode of text would give if the
// contents had no special-token text: the special tokens of the template's
// text split the text into runs, and each run (template text and contents
// together) is tokenized as one plain text, with the whitespace next to a
// special token that strips it dropped, as Encode drops it.
func encodeSpans(tok *tokenizer.Tokenizer, text string, spans []span, out []int32) []int32 {
	type frag struct {
		id   int32 // a special token, or -1 for text
		text string
	}
	var frags []frag
	addText := func(s string) {
		if n := len(frags); n > 0 && frags[n-1].id < 0 {
			frags[n-1].text += s
			return
		}
		frags = append(frags, frag{-1, s})
	}
	// template appends the fragments of template text s: where Encode
	// finds special tokens in it, in order.
	template := func(s string) {
		for _, id := range tok.Encode(s, false) {
			if !isSpecial(tok, id) {
				continue
			}
			st := tok.Token(id)
			i := strings.Index(s, st)
			if i < 0 {
				continue // not cut out of s (an unknown token of a byte without a token): part of the text
			}
			addText(s[:i])
			frags = append(frags, frag{id: id})
			s = s[i+len(st):]
		}
		addText(s)
	}
	pos := 0
	for _, sp := range spans {
		if sp.from < pos || sp.from > sp.to {
			continue // content printed inside another (cannot happen with the markers)
		}
		template(text[pos:sp.from])
		addText(text[sp.from:sp.to])
		pos = sp.to
	}
	template(text[pos:])

	strip := map[int32][2]bool{}
	for i, f := range frags {
		if f.id < 0 {
			continue
		}
		s, ok := strip[f.id]
		if !ok {
			s = stripOf(tok, f.id)
			strip[f.id] = s
		}
		if s[0] && i > 0 && frags[i-1].id < 0 {
			frags[i-1].text = strings.TrimRightFunc(frags[i-1].text, isCSpace)
		}
		if s[1] && i+1 < len(frags) && frags[i+1].id < 0 {
			frags[i+1].text = strings.TrimLeftFunc(frags[i+1].text, isCSpace)
		}
	}
	for _, f := range frags {
		if f.id >= 0 {
			out = append(out, f.id)
		} else if f.text != "" {
			out = append(out, tok.EncodePlain(f.text, false)...)
		}
	}
	return out
}

func isSpecial(tok *tokenizer.Tokenizer, id int32) bool {
	switch tok.Type(id) {
	case tokenizer.TypeControl, tokenizer.TypeUserDefined, tokenizer.TypeUnknown:
		return true
	}
	return false
}

// stripOf reports whether Encode drops the whitespace before (lstrip) and
// after (rstrip) special token id, found by asking it.
func stripOf(tok *tokenizer.Tokenizer, id int32) [2]bool {
	st := tok.Token(id)
	one := []int32{id}
	return [2]bool{
		slices.Equal(tok.Encode(" "+st, false), one),
		slices.Equal(tok.Encode(st+" ", false), one),
	}
}

// isCSpace is C's isspace, the whitespace llama.cpp strips next to special
// tokens.
func isCSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return false
}
