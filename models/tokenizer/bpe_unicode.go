package tokenizer

import "sync"

// The byte-level BPE tokenizer sees text as llama.cpp's unicode.cpp does:
// code points decoded by its own rules (not Go's, which differ on invalid
// input), classified by its own table (not Go's unicode package, which is
// a different Unicode version and would disagree on letters and numbers
// added or recategorised since), and turned into bytes by its own encoder.
// unicode_table.go holds the classes, generated from a built libllama so
// that they are the ones llama.cpp runs with:
//
//go:generate sh testdata/llamacpp/gen_unicode_table.sh

// Code point flags, with the bit values of llama.cpp's unicode_cpt_flags.
// Every code point has exactly one category bit (0x01-0x80); the
// whitespace bit is added to the 25 code points of Unicode's White_Space.
const (
	cptUndefined  = 0x0001 // unassigned, and anything past U+10FFFF
	cptNumber     = 0x0002 // \p{N}
	cptLetter     = 0x0004 // \p{L}
	cptSeparator  = 0x0008 // \p{Z}
	cptMark       = 0x0010 // \p{M}
	cptPunct      = 0x0020 // \p{P}
	cptSymbol     = 0x0040 // \p{S}
	cptControl    = 0x0080 // \p{C}
	cptWhitespace = 0x0100 // \s
)

// cptRange starts a run of code points with the same flags in cptRanges.
type cptRange struct {
	start rune
	flags uint16
}

// flagTable is cptRanges expanded into a two-level table: a block of 256
// code points is found by index[cpt>>8], and blocks with the same flags
// are stored once. A lookup is two loads, which the splitters do for
// every code point of the text, often several times.
type flagTable struct {
	index  [0x110000 >> 8]uint16
	blocks [][256]uint16
}

var cptTable = sync.OnceValue(func() *flagTable {
	t := &flagTable{}
	seen := map[[256]uint16]uint16{}
	r := 0
	for b := range t.index {
		var block [256]uint16
		for i := range block {
			c := rune(b<<8 | i)
			for r+1 < len(cptRanges) && cptRanges[r+1].start <= c {
				r++
			}
			block[i] = cptRanges[r].flags
		}
		k, ok := seen[block]
		if !ok {
			k = uint16(len(t.blocks))
			t.blocks = append(t.blocks, block)
			seen[block] = k
		}
		t.index[b] = k
	}
	return t
})

// cptFlags returns llama.cpp's flags of code point c (unicode_cpt_flags_from_cpt).
func cptFlags(c rune) uint16 {
	if c < 0 || c >= 0x110000 {
		return cptUndefined
	}
	t := cptTable()
	return t.blocks[t.index[c>>8]][c&0xFF]
}

// isWhitespace reports whether c is one of llama.cpp's whitespace code points.
func isWhitespace(c rune) bool { return cptFlags(c)&cptWhitespace != 0 }

// lowerASCII returns what llama.cpp's unicode_tolower makes of c when that
// is an ASCII letter (the contractions "'s", "'RE", ... compare only with
// those), else c itself.
func lowerASCII(c rune) rune {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	if c >= 0x80 {
		if l, ok := asciiLower[c]; ok {
			return rune(l)
		}
	}
	return c
}

// decodeCpt decodes the code point at s[i:] as llama.cpp's
// unicode_cpts_from_utf8 does: the length comes from the lead byte, the
// continuation bytes must be there and be continuation bytes, and nothing
// else is checked, so overlong forms, surrogates and values up to
// 0x1FFFFF decode as they are; anything else is U+FFFD for one byte.
func decodeCpt(s string, i int) (rune, int) {
	c := s[i]
	cont := func(k int) bool { return i+k < len(s) && s[i+k]&0xC0 == 0x80 }
	switch {
	case c < 0x80:
		return rune(c), 1
	case c&0x40 == 0:
		// a continuation byte where a character should start
	case c&0x20 == 0:
		if cont(1) {
			return rune(c&0x1F)<<6 | rune(s[i+1]&0x3F), 2
		}
	case c&0x10 == 0:
		if cont(1) && cont(2) {
			return rune(c&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), 3
		}
	case c&0x08 == 0:
		if cont(1) && cont(2) && cont(3) {
			return rune(c&0x07)<<18 | rune(s[i+1]&0x3F)<<12 | rune(s[i+2]&0x3F)<<6 | rune(s[i+3]&0x3F), 4
		}
	}
	return 0xFFFD, 1
}

// decodeCpts appends the code points of s, decoded by decodeCpt, to dst.
func decodeCpts(dst []rune, s string) []rune {
	if free := cap(dst) - len(dst); free < len(s) {
		// s has at most one code point a byte; growing by appends
		// would copy a long text several times over.
		dst = append(make([]rune, 0, len(dst)+len(s)), dst...)
	}
	for i := 0; i < len(s); {
		if s[i] < 0x80 {
			dst = append(dst, rune(s[i]))
			i++
			continue
		}
		c, n := decodeCpt(s, i)
		dst = append(dst, c)
		i += n
	}
	return dst
}

// appendCpt appends the UTF-8 bytes of c as llama.cpp's unicode_cpt_to_utf8
// writes them: surrogates are encoded like any other code point (Go's
// encoder would write U+FFFD). Past U+10FFFF llama.cpp throws, and
// llama_tokenize with it; such a code point (only decodeCpt of a four-byte
// form with lead byte 0xF4-0xF7 makes one) is written as U+FFFD instead.
func appendCpt(dst []byte, c rune) []byte {
	switch {
	case c < 0x80:
		return append(dst, byte(c))
	case c < 0x800:
		return append(dst, 0xC0|byte(c>>6), 0x80|byte(c&0x3F))
	case c < 0x10000:
		return append(dst, 0xE0|byte(c>>12), 0x80|byte(c>>6&0x3F), 0x80|byte(c&0x3F))
	case c < 0x110000:
		return append(dst, 0xF0|byte(c>>18), 0x80|byte(c>>12&0x3F), 0x80|byte(c>>6&0x3F), 0x80|byte(c&0x3F))
	}
	return append(dst, 0xEF, 0xBF, 0xBD)
}
