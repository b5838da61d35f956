package tokenizer

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// bpeModel is the byte-level BPE half of a Tokenizer whose model is "gpt2":
// llama.cpp's llm_tokenizer_bpe and its session, without their caches.
type bpeModel struct {
	pre *preTokenizer
	// pairRank holds the rank of each merge whose two sides are both
	// tokens, keyed by their ids (left<<32 | right); strRank the others,
	// rare, keyed by mergeKey. A merge listed twice keeps its first rank,
	// as llama.cpp's map emplace does.
	pairRank map[uint64]int32
	strRank  map[string]int32
	// mergeID[rank] is the token of the merge's result, or -1: the id of
	// a merged symbol without looking its text up.
	mergeID []int32
	// byteChar[b] is the text that stands for byte b (GPT-2's
	// bytes_to_unicode), and byteCharID[b] its token or -1.
	byteChar   [256]string
	byteCharID [256]int32
}

// mergeKey keys strRank: the two sides' lengths disambiguate sides that
// contain spaces.
func mergeKey(left, right string) string {
	return strconv.Itoa(len(left)) + ":" + left + right
}

// gpt2ByteChars returns GPT-2's byte-to-unicode table: the printable bytes
// of Latin-1 stand for themselves, the other 68 for U+0100 onwards in
// byte order (llama.cpp's unicode_byte_to_utf8).
func gpt2ByteChars() (chars [256]rune) {
	n := rune(0)
	for b := range chars {
		if '!' <= b && b <= '~' || 0xA1 <= b && b <= 0xAC || 0xAE <= b && b <= 0xFF {
			chars[b] = rune(b)
		} else {
			chars[b] = 0x100 + n
			n++
		}
	}
	return chars
}

// charByte is the inverse of gpt2ByteChars.
var charByte = func() map[rune]byte {
	m := make(map[rune]byte, 256)
	for b, c := range gpt2ByteChars() {
		m[c] = byte(b)
	}
	return m
}()

// newBPE builds the BPE model of t's vocabulary from its merges ("left
// right", highest priority first) and pre-tokenizer.
func newBPE(t *Tokenizer, pre *preTokenizer, merges []string) (*bpeModel, error) {
	if len(merges) > math.MaxInt32 {
		return nil, fmt.Errorf("tokenizer: %d merges do not fit int32 ranks", len(merges))
	}
	m := &bpeModel{
		pre:      pre,
		pairRank: make(map[uint64]int32, len(merges)),
		mergeID:  make([]int32, len(merges)),
	}
	for b, c := range gpt2ByteChars() {
		m.byteChar[b] = string(c)
		m.byteCharID[b] = t.lookup(m.byteChar[b])
	}
	var buf []byte
	for rank, s := range merges {
		m.mergeID[rank] = -1
		// llama.cpp splits at the first space after the first byte; a
		// line without one leaves both sides empty, which no symbol
		// matches, so it merges nothing.
		i := -1
		if len(s) > 1 {
			if j := strings.IndexByte(s[1:], ' '); j >= 0 {
				i = j + 1
			}
		}
		if i < 0 {
			continue
		}
		left, right := s[:i], s[i+1:]
		buf = append(append(buf[:0], left...), right...)
		m.mergeID[rank] = t.lookup(string(buf))
		l, r := t.lookup(left), t.lookup(right)
		if l >= 0 && r >= 0 {
			k := uint64(l)<<32 | uint64(r)
			if _, dup := m.pairRank[k]; !dup {
				m.pairRank[k] = int32(rank)
			}
			continue
		}
		if m.strRank == nil {
			m.strRank = map[string]int32{}
		}
		k := mergeKey(left, right)
		if _, dup := m.strRank[k]; !dup {
			m.strRank[k] = int32(rank)
		}
	}
	return m, nil
}

// lookup returns the token whose text is s, or -1.
func (t *Tokenizer) lookup(s string) int32 {
	if id, ok := t.ids[s]; ok {
		return id
	}
	return -1
}

// bpeSym is a symbol of the word being merged: word[start:start+n], its
// token (-1 if its text is none), and its neighbours (-1 at the ends). A
// symbol merged into its left neighbour has n == 0.
type bpeSym struct {
	start, n, prev, next, id int32
}

// bpeBigram is a candidate merge of the symbol left with its right
// neighbour, of the given rank, into a symbol of size bytes; a candidate
// whose symbols no longer add up to size was overtaken by another merge.
type bpeBigram struct {
	rank, left, size int32
}

// before orders candidates as llama.cpp's llm_bigram_bpe comparator does:
// lowest rank first and, for equal ranks, the leftmost.
func (a bpeBigram) before(b bpeBigram) bool {
	return a.rank < b.rank || a.rank == b.rank && a.left < b.left
}

// bpeScratch holds one Encode call's buffers, reused from word to word.
type bpeScratch struct {
	cpts []rune
	word []byte
	syms []bpeSym
	heap []bpeBigram
}

// encode appends the tokens of text, a run of text between special tokens,
// to out: text is cut into words by the pre-tokenizer and each word,
// turned into GPT-2's byte characters, is merged on its own.
func (m *bpeModel) encode(t *Tokenizer, text string, sc *bpeScratch, out []int32) []int32 {
	sc.cpts = decodeCpts(sc.cpts[:0], text)
	word := func(w []rune) { out = m.word(t, w, sc, out) }
	// Chain the stages: each hands its pieces to the next, the last to
	// word, so that no list of pieces is ever built.
	emit := word
	for i := len(m.pre.stages) - 1; i >= 0; i-- {
		stage, next := m.pre.stages[i], emit
		emit = func(seg []rune) { stage(seg, next) }
	}
	emit(sc.cpts)
	return out
}

// word appends the tokens of one pre-tokenized word to out, as llama.cpp's
// llm_tokenizer_bpe_session::tokenize does for each word.
func (m *bpeModel) word(t *Tokenizer, w []rune, sc *bpeScratch, out []int32) []int32 {
	if len(w) == 0 {
		return out
	}
	sc.word = sc.word[:0]
	sc.syms = sc.syms[:0]
	if n := len(w); cap(sc.syms) < n {
		// A word has at least a byte a code point; a long one would
		// otherwise be copied several times as it grows.
		sc.syms = make([]bpeSym, 0, n)
		sc.word = make([]byte, 0, 2*n)
	}
	var utf [4]byte
	for _, c := range w {
		for _, b := range appendCpt(utf[:0], c) {
			start := len(sc.word)
			sc.word = append(sc.word, m.byteChar[b]...)
			sc.syms = append(sc.syms, bpeSym{start: int32(start), n: int32(len(sc.word) - start), id: m.byteCharID[b]})
		}
		if len(sc.word) > math.MaxInt32-8 {
			// Symbol positions are int32, as llama.cpp's are (its
			// llm_symbol::index is an int); a word of 2 GiB is cut.
			out = m.merge(t, sc, out)
			sc.word, sc.syms = sc.word[:0], sc.syms[:0]
		}
	}
	return m.merge(t, sc, out)
}

// merge runs the BPE merges over sc.syms, the symbols of sc.word, and
// appends the resulting tokens to out.
func (m *bpeModel) merge(t *Tokenizer, sc *bpeScratch, out []int32) []int32 {
	syms := sc.syms
	if len(syms) == 0 {
		return out
	}
	if m.pre.ignoreMerges {
		if id, ok := t.ids[string(sc.word)]; ok {
			return append(out, id)
		}
	}
	for i := range syms {
		syms[i].prev = int32(i) - 1
		syms[i].next = int32(i) + 1
	}
	syms[len(syms)-1].next = -1

	h := sc.heap[:0]
	for i := 1; i < len(syms); i++ {
		if b, ok := m.bigram(sc, int32(i-1), int32(i)); ok {
			h = append(h, b)
		}
	}
	heapInit(h)
	for len(h) > 0 {
		var b bpeBigram
		b, h = heapPop(h)
		l := &syms[b.left]
		if l.n == 0 || l.next < 0 {
			continue
		}
		r := &syms[l.next]
		// Symbols only grow or vanish, so sizes that no longer add up
		// mean one of the two changed since this candidate was made.
		if l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		l.id = m.mergeID[b.rank]
		if l.prev >= 0 {
			if nb, ok := m.bigram(sc, l.prev, b.left); ok {
				h = heapPush(h, nb)
			}
		}
		if l.next >= 0 {
			if nb, ok := m.bigram(sc, b.left, l.next); ok {
				h = heapPush(h, nb)
			}
		}
	}
	sc.heap = h

	for i := int32(0); i >= 0; i = syms[i].next {
		s := syms[i]
		if s.id >= 0 {
			out = append(out, s.id)
			continue
		}
		// A symbol that is no token (a byte character missing from the
		// vocabulary, or a merge whose result is not in it): llama.cpp
		// looks up each byte of its text alone and drops those that
		// are not tokens either.
		for _, b := range sc.word[s.start : s.start+s.n] {
			if id, ok := t.ids[string([]byte{b})]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}

// bigram returns the candidate merge of symbols left and right, if the
// merges have one for their texts.
func (m *bpeModel) bigram(sc *bpeScratch, left, right int32) (bpeBigram, bool) {
	l, r := &sc.syms[left], &sc.syms[right]
	rank, ok := int32(0), false
	if l.id >= 0 && r.id >= 0 {
		rank, ok = m.pairRank[uint64(l.id)<<32|uint64(r.id)]
	} else if m.strRank != nil {
		lt := string(sc.word[l.start : l.start+l.n])
		rt := string(sc.word[r.start : r.start+r.n])
		rank, ok = m.strRank[mergeKey(lt, rt)]
	}
	return bpeBigram{rank: rank, left: left, size: l.n + r.n}, ok
}

// The candidates form a binary min-heap under before, written out rather
// than through container/heap, whose interface calls cost more than the
// merging itself.

func heapInit(h []bpeBigram) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		heapDown(h, i)
	}
}

func heapPush(h []bpeBigram, b bpeBigram) []bpeBigram {
	h = append(h, b)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func heapPop(h []bpeBigram) (bpeBigram, []bpeBigram) {
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	heapDown(h, 0)
	return top, h
}

func heapDown(h []bpeBigram, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && h[r].before(h[l]) {
			c = r
		}
		if !h[c].before(h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// decodeText returns the bytes a normal token's text stands for, reading
// each of its characters back through GPT-2's byte table as llama.cpp's
// llama_decode_text does, including its marker for a character that
// stands for no byte: "[UNK_BYTE_0x" then the character's UTF-8 bytes in
// hex, then the whole token text, then "]".
func decodeText(text string) []byte {
	out := make([]byte, 0, len(text))
	for i := 0; i < len(text); {
		c, n := decodeCpt(text, i)
		i += n
		if b, ok := charByte[c]; ok {
			out = append(out, b)
			continue
		}
		out = append(out, "[UNK_BYTE_0x"...)
		for _, b := range appendCpt(nil, c) {
			out = append(out, fmt.Sprintf("%02x", b)...)
		}
		out = append(out, text...)
		out = append(out, ']')
	}
	return out
}
