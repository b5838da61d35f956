package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// piece computes Piece(id) the way llama.cpp's token_to_piece does with
// special=false.
func (t *Tokenizer) piece(id int32) []byte {
	text := t.tokens[id]
	switch t.types[id] {
	case TypeNormal:
		if t.bpe != nil {
			return decodeText(text)
		}
		return []byte(strings.ReplaceAll(text, spaceEscape, " "))
	case TypeUserDefined:
		return []byte(text)
	case TypeByte:
		if b, ok := parseByteToken(text); ok {
			return []byte{b}
		}
		// A byte-typed token not spelled "<0xXX>": llama.cpp reads garbage
		// hex here; its text is the most useful reading.
		return []byte(text)
	}
	// Control, unknown, unused and undefined tokens print nothing.
	return nil
}

// parseByteToken reads the byte of a token spelled "<0xXX>".
func parseByteToken(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	var b byte
	for _, c := range []byte(s[3:5]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		default:
			return 0, false
		}
		b = b<<4 | c
	}
	return b, true
}

// Piece returns the bytes token id contributes to decoded text: a normal
// token's text with "▁" turned back into spaces (SentencePiece) or its
// byte characters turned back into bytes (BPE), a byte token's single raw
// byte (so a multi-byte character may span several pieces, as it may with
// BPE's normal tokens), a user-defined token's text as is, and nothing for
// control, unknown and unused tokens or for an id out of range. The slice
// must not be modified.
//
// Piece does not remove the space prefix that Encode adds; Decode and
// Stream do.
func (t *Tokenizer) Piece(id int32) []byte {
	if id < 0 || int(id) >= len(t.pieces) {
		return nil
	}
	return t.pieces[id]
}

// PieceSpecial is Piece as llama.cpp's token_to_piece with special=true
// gives it, what llama-tokenize prints: control and unknown tokens show
// their text instead of nothing.
func (t *Tokenizer) PieceSpecial(id int32) []byte {
	switch t.Type(id) {
	case TypeControl, TypeUnknown:
		return []byte(t.tokens[id])
	}
	return t.Piece(id)
}

// Decode returns the text of ids, taken as a whole sequence from its start
// (a BOS first or not): the concatenation of their pieces, with the space
// prefix that Encode adds removed (see Stream for the exact rule). The
// result holds the raw bytes of byte tokens, so it is valid UTF-8 only if
// they form valid sequences. For valid UTF-8 text with no special-token
// texts and no "▁" in it, Decode(Encode(text, addSpecial)) == text,
// provided the vocabulary has "▁" and a token for every byte (for BPE:
// with no control-token texts in it, provided every byte's character is a
// token).
//
// Decode is the text a model's tokens print as, as llama.cpp prints them
// while it generates: it does not apply the clean-up llama_detokenize
// does for some BPE vocabularies (removing the space before "." or "'s",
// its clean_spaces), which would make Decode(Encode(text)) differ from
// text.
func (t *Tokenizer) Decode(ids []int32) string {
	var sb strings.Builder
	strip := t.addSpacePrefix
	for _, id := range ids {
		var p []byte
		p, strip = t.nextPiece(id, strip)
		sb.Write(p)
	}
	return sb.String()
}

// nextPiece returns the piece of id with the space prefix removed if strip
// says one is due, and whether one is due for the next token.
func (t *Tokenizer) nextPiece(id int32, strip bool) ([]byte, bool) {
	if t.isSpecial(id) {
		return t.Piece(id), t.addSpacePrefix
	}
	p := t.Piece(id)
	if len(p) == 0 {
		return p, strip
	}
	if strip && p[0] == ' ' {
		p = p[1:]
	}
	return p, false
}

// Stream decodes tokens one at a time, as a model generates them, and
// returns text only in whole UTF-8 characters: the bytes of a character
// split over several byte tokens are held back until it is complete.
// Bytes that can never form a valid character come out as U+FFFD, so every
// string a Stream returns is valid UTF-8.
//
// When the tokenizer adds a space prefix, Stream removes it as Decode
// does: the first non-empty piece of each run of text that starts the
// sequence or follows a special (control, user-defined or unknown) token
// loses one leading space. llama.cpp's detokenizer removes it only from the
// very first token; the two agree on sequences Encode produces from text
// with no special-token texts in it.
type Stream struct {
	t       *Tokenizer
	pending []byte
	strip   bool
}

// NewStream returns a Stream. With atStart the first tokens added are the
// start of a sequence (as returned by Encode, BOS or not), whose space
// prefix is removed; without it, as when streaming the tokens generated
// after a prompt, the first piece is kept whole.
func (t *Tokenizer) NewStream(atStart bool) *Stream {
	return &Stream{t: t, strip: atStart && t.addSpacePrefix}
}

// Add decodes one more token and returns the text now complete, which may
// be empty.
func (s *Stream) Add(id int32) string {
	var p []byte
	p, s.strip = s.t.nextPiece(id, s.strip)
	s.pending = append(s.pending, p...)

	var sb strings.Builder
	i := 0
	for i < len(s.pending) {
		r, n := utf8.DecodeRune(s.pending[i:])
		if r == utf8.RuneError && n <= 1 {
			if !utf8.FullRune(s.pending[i:]) {
				break // the start of a character still arriving
			}
			sb.WriteRune(utf8.RuneError)
			i++
			continue
		}
		sb.Write(s.pending[i : i+n])
		i += n
	}
	s.pending = append(s.pending[:0], s.pending[i:]...)
	return sb.String()
}

// Flush returns what Add held back, each byte as U+FFFD since it never
// became a whole character, and empties the Stream's buffer. The Stream
// can go on being used.
func (s *Stream) Flush() string {
	out := strings.Repeat(string(utf8.RuneError), len(s.pending))
	s.pending = s.pending[:0]
	return out
}
