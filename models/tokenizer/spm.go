package tokenizer

import "container/heap"

// symbol is a run text[start:start+n] of the text being encoded, linked to
// its neighbours by index (-1 at either end). A symbol absorbed into its
// left neighbour has n == 0.
type symbol struct {
	start, n   int
	prev, next int
}

// bigram is a candidate merge of two adjacent symbols into the token of
// the given score; size is the merged length in bytes, which tells a live
// candidate from one made stale by an earlier merge.
type bigram struct {
	left, right int
	score       float32
	size        int
}

// bigramQueue is a max-heap of candidates: highest score first and, among
// equal scores, the leftmost. This is the order of llama.cpp's
// llm_bigram_spm comparator, so merges happen in the same order.
type bigramQueue []bigram

func (q bigramQueue) Len() int { return len(q) }
func (q bigramQueue) Less(i, j int) bool {
	if q[i].score != q[j].score {
		return q[i].score > q[j].score
	}
	return q[i].left < q[j].left
}
func (q bigramQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *bigramQueue) Push(x any)   { *q = append(*q, x.(bigram)) }
func (q *bigramQueue) Pop() any {
	old := *q
	b := old[len(old)-1]
	*q = old[:len(old)-1]
	return b
}

// utf8Len returns the length of the UTF-8 sequence that starts with byte
// c, judged from its high four bits alone, as llama.cpp's
// unicode_len_utf8 does: continuation and invalid bytes count as 1.
func utf8Len(c byte) int {
	switch c >> 4 {
	case 0xC, 0xD:
		return 2
	case 0xE:
		return 3
	case 0xF:
		return 4
	}
	return 1
}

// spm appends to out the tokens of text, whose spaces are already escaped
// to "▁". It splits text into UTF-8 characters, repeatedly merges the
// adjacent pair that forms the vocabulary token of highest score, and
// writes each final symbol as its token or, if it has none, as byte tokens.
func (t *Tokenizer) spm(text string, out []int32) []int32 {
	if text == "" {
		return out
	}
	syms := make([]symbol, 0, len(text))
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		i := len(syms)
		next := i + 1
		if off+n == len(text) {
			next = -1
		}
		syms = append(syms, symbol{start: off, n: n, prev: i - 1, next: next})
		off += n
	}

	var q bigramQueue
	tryAdd := func(left, right int) {
		if left < 0 || right < 0 {
			return
		}
		l, r := syms[left], syms[right]
		merged := text[l.start : l.start+l.n+r.n]
		id, ok := t.ids[merged]
		if !ok {
			return
		}
		heap.Push(&q, bigram{left: left, right: right, score: t.scores[id], size: len(merged)})
	}
	for i := 1; i < len(syms); i++ {
		tryAdd(i-1, i)
	}

	for q.Len() > 0 {
		b := heap.Pop(&q).(bigram)
		l, r := &syms[b.left], &syms[b.right]
		// Symbols only grow or vanish, so a candidate whose symbols no
		// longer add up to its size was overtaken by another merge.
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		tryAdd(l.prev, b.left)
		tryAdd(b.left, l.next)
	}

	// Every merged symbol is a vocabulary token (a merge needs one), so
	// only unmerged characters can be missing; llama.cpp's resegment step
	// reduces to this lookup.
	for i := 0; i != -1; i = syms[i].next {
		s := text[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.ids[s]; ok {
			out = append(out, id)
			continue
		}
		out = t.byteFallback(s, out)
	}
	return out
}

// byteFallback appends the byte tokens of s, a symbol with no token of its
// own. Where the vocabulary lacks a byte's token, llama.cpp aborts; this
// package writes the unknown token instead, once for the whole symbol, as
// SentencePiece does for models without byte fallback.
func (t *Tokenizer) byteFallback(s string, out []int32) []int32 {
	for i := 0; i < len(s); i++ {
		if t.byteToken[s[i]] < 0 {
			return append(out, t.unk)
		}
	}
	for i := 0; i < len(s); i++ {
		out = append(out, t.byteToken[s[i]])
	}
	return out
}
