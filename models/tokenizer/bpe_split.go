package tokenizer

import "sort"

// Pre-tokenizers: how a byte-level BPE vocabulary cuts text into words
// before merging, one per tokenizer.ggml.pre value, as llama.cpp's
// llm_tokenizer_bpe (src/llama-vocab.cpp) and unicode_regex_split
// (src/unicode.cpp) do it.
//
// The splitters are written by hand rather than run as regular
// expressions. Go's regexp has no look-ahead (\s+(?!\S)), and a regexp2
// port of the patterns would still not be llama.cpp: for the GPT-2, Llama 3
// and Qwen2 patterns llama.cpp does not run the pattern at all but its own
// hand-written splitters, which differ from the regex (a lone space before
// a digit, "\s+(?!\S)" at the end of the text, case folding of the
// contractions), and its other patterns run through std::regex over a
// "collapsed" text in which every non-ASCII code point stands for its
// category. Each stage below follows what llama.cpp actually executes for
// its pattern, and is linear in the length of the text: every pattern
// here matches at a position in constant time or consumes what it scans.
//
// The stages run in order; each one cuts every piece the previous one
// produced, independently of the others, and a piece's code points
// outside it count as absent (llama.cpp's OUT_OF_RANGE), exactly as
// unicode_regex_split passes its offsets from one pattern to the next.

// splitStage cuts seg into pieces, in order and covering it, and passes
// each non-empty piece to emit.
type splitStage func(seg []rune, emit func([]rune))

// preTokenizer is what a tokenizer.ggml.pre value selects in llama.cpp.
type preTokenizer struct {
	stages []splitStage
	// ignoreMerges: a word that is a token as a whole becomes that token
	// without merging (llama.cpp's ignore_merges).
	ignoreMerges bool
	// addBOS is llama.cpp's default for tokenizer.ggml.add_bos_token.
	addBOS bool
	// noBOS: the default BOS id is none rather than BPE's 11.
	noBOS bool
}

var (
	// (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
	llama3Split = llama3Stage(3, cptLetter)
	// The same with \p{N} for \p{N}{1,3}.
	qwen2Split = llama3Stage(1, cptLetter)
	// Qwen2's with [\p{L}\p{M}]+ for \p{L}+ (and \p{M} out of the punctuation run).
	qwen35Split = llama3Stage(1, cptLetter|cptMark)
)

// preTokenizers maps each supported tokenizer.ggml.pre value to llama.cpp's
// splitting for it. The names are grouped as llama.cpp groups them; those
// llama.cpp gives other behaviour (an added separator token, special
// end-of-turn rules) are left out, as are the encoders' "jina-v2-es",
// "jina-v2-de" and "modern-bert".
var preTokenizers = func() map[string]*preTokenizer {
	m := map[string]*preTokenizer{}
	add := func(p *preTokenizer, names ...string) {
		for _, n := range names {
			m[n] = p
		}
	}
	add(&preTokenizer{stages: []splitStage{llama3Split}, ignoreMerges: true, addBOS: true},
		"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano")
	add(&preTokenizer{stages: []splitStage{llama3Split}}, "dbrx", "smaug-bpe")
	add(&preTokenizer{stages: []splitStage{llama3Split}, noBOS: true}, "glm4", "chatglm-bpe")
	add(&preTokenizer{stages: []splitStage{qwen2Split}},
		"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan")
	add(&preTokenizer{stages: []splitStage{qwen35Split}}, "qwen35")
	add(&preTokenizer{stages: []splitStage{gpt2Split}},
		"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "a.x-4.0", "mellum", "exaone4",
		"mpt", "olmo", "jais", "trillion", "granite-docling")
	// \p{N}, then GPT-2's
	add(&preTokenizer{stages: []splitStage{matchStage(oneOf(isNumber)), gpt2Split}},
		"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2")
	// [\p{P}\$\+<=>\^~\|`]+, GPT-2's, [0-9][0-9][0-9]
	add(&preTokenizer{stages: []splitStage{matchStage(runOf(isFalconPunct)), gpt2Split, matchStage(asciiDigits3)}},
		"falcon")
	// [\r\n], \s?[letters]+, \s?[punctuation]+, \s+$, [CJK]+, \p{N}+
	add(&preTokenizer{stages: []splitStage{
		matchStage(oneOf(isCRLF)),
		matchStage(spaceThenRun(inClass(deepseekLetters))),
		matchStage(spaceThenRun(inClass(deepseekPunct))),
		trailingSpaceStage,
		matchStage(runOf(inClass(deepseekCJK))),
		matchStage(runOf(isNumber)),
	}}, "deepseek-llm")
	// [\r\n], \s?\p{L}+, \s?\p{P}+, [CJK]+, \p{N}
	add(&preTokenizer{stages: []splitStage{
		matchStage(oneOf(isCRLF)),
		matchStage(spaceThenRun(isLetter)),
		matchStage(spaceThenRun(isPunct)),
		matchStage(runOf(inClass(deepseekCJK))),
		matchStage(oneOf(isNumber)),
	}}, "deepseek-coder")
	// llama.cpp's "default", also what a file without tokenizer.ggml.pre
	// gets: [\p{P}\$\+<=>\^~\|]+, GPT-2's, \p{N}+, [0-9][0-9][0-9]
	add(&preTokenizer{stages: []splitStage{
		matchStage(runOf(isDefaultPunct)),
		gpt2Split,
		matchStage(runOf(isNumber)),
		matchStage(asciiDigits3),
	}}, "default", "")
	return m
}()

// outside stands for a code point beyond the piece being split.
const outside rune = -1

// piece gives a splitter llama.cpp's view of one piece: code points and
// flags past its end are absent, and add emits the text up to a position.
type piece struct {
	seg   []rune
	start int // where the next emitted word starts (llama.cpp's _prev_end)
	emit  func([]rune)
}

func (p *piece) cpt(i int) rune {
	if i < len(p.seg) {
		return p.seg[i]
	}
	return outside
}

func (p *piece) flags(i int) uint16 {
	if i < len(p.seg) {
		return cptFlags(p.seg[i])
	}
	return 0
}

// add emits seg[start:end] if it is not empty; end becomes the new start.
func (p *piece) add(end int) {
	if end > p.start {
		p.emit(p.seg[p.start:end])
	}
	p.start = end
}

// contraction returns the length of the contraction 's, 't, 'm, 'd, 're,
// 've or 'll at pos, or 0; fold compares letters as llama.cpp's
// unicode_tolower does (the Llama 3 and Qwen2 patterns are case
// insensitive, GPT-2's is not).
func (p *piece) contraction(pos int, fold bool) int {
	n := len(p.seg)
	if p.seg[pos] != '\'' || pos+1 >= n {
		return 0
	}
	low := func(c rune) rune {
		if fold {
			return lowerASCII(c)
		}
		return c
	}
	switch low(p.seg[pos+1]) {
	case 's', 't', 'm', 'd':
		return 2
	}
	if pos+2 < n {
		a, b := low(p.seg[pos+1]), low(p.seg[pos+2])
		if a == 'r' && b == 'e' || a == 'v' && b == 'e' || a == 'l' && b == 'l' {
			return 3
		}
	}
	return 0
}

// gpt2Split is llama.cpp's unicode_regex_split_custom_gpt2, which it runs
// for 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S).
func gpt2Split(seg []rune, emit func([]rune)) {
	p := piece{seg: seg, emit: emit}
	const other = cptWhitespace | cptLetter | cptNumber
	for pos := 0; pos < len(seg); {
		c := seg[pos]
		if n := p.contraction(pos, false); n > 0 {
			pos += n
			p.add(pos)
			continue
		}
		// An optional space, then a run of one class: the class is the
		// code point's after the space.
		f := p.flags(pos)
		if c == ' ' {
			f = p.flags(pos + 1)
		}
		var run func(uint16) bool
		switch {
		case f&cptLetter != 0:
			run = func(f uint16) bool { return f&cptLetter != 0 }
		case f&cptNumber != 0:
			run = func(f uint16) bool { return f&cptNumber != 0 }
		case f&other == 0 && f != 0:
			run = func(f uint16) bool { return f&other == 0 && f != 0 }
		}
		if run != nil {
			if c == ' ' {
				pos++
			}
			for run(f) {
				pos++
				f = p.flags(pos)
			}
			p.add(pos)
			continue
		}
		nws := 0
		for p.flags(pos+nws)&cptWhitespace != 0 {
			nws++
		}
		switch {
		case nws > 1 && pos+nws < len(seg):
			// \s+(?!\S): all but the last space, which goes with
			// what follows. At the end of the piece llama.cpp takes
			// the whole run (as \s+ would).
			pos += nws - 1
		case nws > 0:
			pos += nws
		default:
			pos++
		}
		p.add(pos)
	}
}

// llama3Stage returns llama.cpp's splitter for the Llama 3 pattern
// (unicode_regex_split_custom_llama3) and its Qwen2 and Qwen3.5 variants,
// which differ only in how many digits a number piece takes (3 or 1) and
// in what counts as a letter (letters, or letters and marks).
func llama3Stage(maxDigits int, letters uint16) splitStage {
	return func(seg []rune, emit func([]rune)) {
		p := piece{seg: seg, emit: emit}
		other := cptWhitespace | letters | cptNumber
		for pos := 0; pos < len(seg); {
			c := seg[pos]
			f := p.flags(pos)
			if n := p.contraction(pos, true); n > 0 {
				pos += n
				p.add(pos)
				continue
			}
			// [^\r\n\p{L}\p{N}]?\p{L}+
			if c != '\r' && c != '\n' && f&cptNumber == 0 && (f&letters != 0 || p.flags(pos+1)&letters != 0) {
				pos++
				for p.flags(pos)&letters != 0 {
					pos++
				}
				p.add(pos)
				continue
			}
			// \p{N}{1,3} or \p{N}
			if f&cptNumber != 0 {
				if maxDigits == 1 {
					pos++
					p.add(pos)
					continue
				}
				ini := pos
				for p.flags(pos)&cptNumber != 0 {
					pos++
					if pos-ini >= maxDigits {
						p.add(pos)
						ini = pos
					}
				}
				p.add(pos)
				continue
			}
			// ' ?[^\s\p{L}\p{N}]+[\r\n]*'. llama.cpp tests the code
			// point's own flags for being real here, not those after
			// the space, so a space that ends the piece lands here too.
			f2 := f
			if c == ' ' {
				f2 = p.flags(pos + 1)
			}
			if f2&other == 0 && f != 0 {
				if c == ' ' {
					pos++
				}
				for f2&other == 0 && f2 != 0 {
					pos++
					f2 = p.flags(pos)
				}
				for c2 := p.cpt(pos); c2 == '\r' || c2 == '\n'; c2 = p.cpt(pos) {
					pos++
				}
				p.add(pos)
				continue
			}
			nws, lastCRLF := 0, -1
			for p.flags(pos+nws)&cptWhitespace != 0 {
				if c2 := p.cpt(pos + nws); c2 == '\r' || c2 == '\n' {
					lastCRLF = pos + nws + 1
				}
				nws++
			}
			switch {
			case lastCRLF >= 0:
				// \s*[\r\n]+: up to the last \r or \n of the run
				pos = lastCRLF
			case nws > 1 && pos+nws < len(seg):
				pos += nws - 1 // \s+(?!\S)
			case nws > 0:
				pos += nws // \s+
			default:
				pos++
			}
			p.add(pos)
		}
	}
}

// A matcher returns the length of its pattern's match at seg[pos:], or 0
// if it does not match there. It is what std::regex finds at the leftmost
// position where a search succeeds: for the patterns below, greedy and
// without alternatives, the longest run the pattern allows.
type matcher func(seg []rune, pos int) int

// matchStage cuts seg as llama.cpp's unicode_regex_split_stl does with a
// regex_iterator: each leftmost non-overlapping match becomes a piece, and
// so does the text between matches.
func matchStage(m matcher) splitStage {
	return func(seg []rune, emit func([]rune)) {
		gap := 0
		for pos := 0; pos < len(seg); {
			n := m(seg, pos)
			if n == 0 {
				pos++
				continue
			}
			if pos > gap {
				emit(seg[gap:pos])
			}
			emit(seg[pos : pos+n])
			pos += n
			gap = pos
		}
		if gap < len(seg) {
			emit(seg[gap:])
		}
	}
}

// oneOf matches a single code point of the class.
func oneOf(class func(rune) bool) matcher {
	return func(seg []rune, pos int) int {
		if class(seg[pos]) {
			return 1
		}
		return 0
	}
}

// runOf matches class+.
func runOf(class func(rune) bool) matcher {
	return func(seg []rune, pos int) int {
		n := 0
		for pos+n < len(seg) && class(seg[pos+n]) {
			n++
		}
		return n
	}
}

// spaceThenRun matches \s?class+: greedy, so a whitespace code point is
// taken when a class run follows it.
func spaceThenRun(class func(rune) bool) matcher {
	run := runOf(class)
	return func(seg []rune, pos int) int {
		if isWhitespace(seg[pos]) && pos+1 < len(seg) {
			if n := run(seg, pos+1); n > 0 {
				return 1 + n
			}
		}
		return run(seg, pos)
	}
}

// asciiDigits3 matches [0-9][0-9][0-9].
func asciiDigits3(seg []rune, pos int) int {
	if pos+3 > len(seg) {
		return 0
	}
	for _, c := range seg[pos : pos+3] {
		if c < '0' || c > '9' {
			return 0
		}
	}
	return 3
}

// trailingSpaceStage cuts off the whitespace that ends seg, llama.cpp's
// \s+$: the search fails at every earlier whitespace run, and at the first
// code point of the last one matches to the end.
func trailingSpaceStage(seg []rune, emit func([]rune)) {
	i := len(seg)
	for i > 0 && isWhitespace(seg[i-1]) {
		i--
	}
	if i > 0 {
		emit(seg[:i])
	}
	if i < len(seg) {
		emit(seg[i:])
	}
}

// The classes of the std::regex patterns. llama.cpp runs a pattern with
// \p{..} over a collapsed text (ASCII as it is, any other code point as
// one byte for its category, whitespace as \v), so \p{N} is an ASCII digit
// or a non-ASCII code point of category N, and so on: the same as the
// category flag, since ASCII's categories agree. A pattern without \p{..}
// runs as std::wregex over the code points, with non-ASCII whitespace
// replaced by \v (so a class never contains it) and \s the C locale's,
// which with that replacement is again the whitespace flag.

func isNumber(c rune) bool { return cptFlags(c)&(cptNumber|cptWhitespace) == cptNumber }
func isLetter(c rune) bool { return cptFlags(c)&(cptLetter|cptWhitespace) == cptLetter }
func isPunct(c rune) bool  { return cptFlags(c)&(cptPunct|cptWhitespace) == cptPunct }
func isCRLF(c rune) bool   { return c == '\r' || c == '\n' }

// isDefaultPunct is [\p{P}\$\+<=>\^~\|] and isFalconPunct the same with `.
func isDefaultPunct(c rune) bool {
	switch c {
	case '$', '+', '<', '=', '>', '^', '~', '|':
		return true
	}
	return isPunct(c)
}

func isFalconPunct(c rune) bool { return c == '`' || isDefaultPunct(c) }

// runeRange is an inclusive range of code points in a character class.
type runeRange struct{ lo, hi rune }

// inClass returns the test for a std::wregex character class: c, with
// non-ASCII whitespace replaced by \v as llama.cpp does, lies in one of
// the ranges.
func inClass(ranges []runeRange) func(rune) bool {
	// The union of the ranges as sorted disjoint ranges, searched by
	// binary search, with a table for ASCII.
	sorted := append([]runeRange(nil), ranges...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].lo < sorted[j].lo })
	var union []runeRange
	for _, r := range sorted {
		if n := len(union); n > 0 && r.lo <= union[n-1].hi+1 {
			union[n-1].hi = max(union[n-1].hi, r.hi)
			continue
		}
		union = append(union, r)
	}
	in := func(c rune) bool {
		i := sort.Search(len(union), func(i int) bool { return union[i].lo > c })
		return i > 0 && c <= union[i-1].hi
	}
	var ascii [0x80]bool
	for c := range ascii {
		ascii[c] = in(rune(c))
	}
	return func(c rune) bool {
		if c < 0x80 {
			return ascii[c]
		}
		if isWhitespace(c) {
			return ascii['\v']
		}
		return in(c)
	}
}

// The character classes of llama.cpp's DeepSeek patterns, as the code
// point ranges of the pattern text, in its order.
var (
	// \s?[A-Za-zµÀ-ÖØ-öø-ƺ...𞤀-𞥃]+
	deepseekLetters = []runeRange{
		{0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA},
		{0x1BC, 0x1BF}, {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x376},
		{0x377, 0x377}, {0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A},
		{0x38C, 0x38C}, {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F},
		{0x531, 0x556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
		{0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15},
		{0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59},
		{0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC},
		{0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB},
		{0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107},
		{0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
		{0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F},
		{0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2183}, {0x2184, 0x2184}, {0x2C00, 0x2C7B},
		{0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF2}, {0x2CF3, 0x2CF3}, {0xA640, 0xA66D},
		{0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF},
		{0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F},
		{0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2},
		{0x118A0, 0x118DF}, {0x1E900, 0x1E943},
	}
	// \s?[!-/:-~！-／：-～‘-‟　-。]+
	deepseekPunct = []runeRange{
		{0x21, 0x2F}, {0x3A, 0x7E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002},
	}
	// [一-龥ࠀ-一가-퟿]+
	deepseekCJK = []runeRange{{0x4E00, 0x9FA5}, {0x800, 0x4E00}, {0xAC00, 0xD7FF}}
)
