package cpu

import (
	"fmt"
	"math"
	"sync"

	"hybrid/devices/cpu/kernels"
	"hybrid/ops"
	"hybrid/quant"
)

// faTileQ is the query count from which llama.cpp's CPU flash attention
// switches from its one-row kernel (f16 query, f16 output accumulator) to its
// tiled kernel (f32 throughout, keys and values widened from f16). The tiled
// kernel also needs the head size to be a multiple of the build's f32 SIMD
// width: 16 lanes on AVX-512, 8 on AVX2 (faLanes).
const faTileQ = 64

// faRows is about how many query rows (tokens times the query heads of one
// KV head) attendTiled takes at a time: each key and value tile is widened
// once for all of them and stays in cache while they use it.
const faRows = 128

func faLanes() int {
	if kernels.HasAVX512() {
		return 16
	}
	return 8
}

// attention appends the step's keys and values to the layer's f16 KV cache and
// computes causal grouped-query attention: query head h reads KV head
// h/(Heads/KVHeads). It follows the numerics of llama.cpp's CPU flash
// attention, which its CPU backend uses by default: for fewer than faTileQ
// query rows, the query is rounded to f16 and values are accumulated into an
// f16 vector with an online softmax, one (token, head) pair at a time, a
// decode step bound by reading the cache; for more, everything past the
// cache is f32, computed a block of tokens and one KV head with its query
// heads at a time (attendTiled), equal to ggml's output bit for bit
// (TestTiledAttentionMatchesGGML).
//
// A sequence whose cells start at st.Base sees the cache from that cell on
// as its own (a view), so that it is computed exactly as a sequence alone;
// a batched step (st.Rows) attends row by row, each row as a decode step of
// its sequence alone.
func (d *Device) attention(op *ops.Op, st ops.Step, q, k, v, out []float32) error {
	a := op.Attn
	if err := st.CheckCells(a.Context); err != nil {
		return fmt.Errorf("cpu: op %s: %w", op, err)
	}
	if s := &d.kvs; s.op != "" && s.op == op.Name {
		// Its cache streamed in (StreamKV): the sequence's cells from 0.
		if st.Rows != nil || st.Pos != s.pos {
			return fmt.Errorf("cpu: op %s: a KV cache streamed for position %d, run at %d", op, s.pos, st.Pos)
		}
		s.op, s.n = "", len(st.Tokens)
		d.attend(a, ops.Step{Tokens: st.Tokens, Pos: st.Pos}, s.cache, q, k, v, out)
		return nil
	}
	c := d.cache(op.Layer, a)
	if st.Rows != nil {
		qw, kw := a.Heads*a.HeadDim, c.dim
		for i, r := range st.Rows {
			row := ops.Step{Tokens: st.Tokens[i : i+1], Pos: r.Pos}
			view := c.from(r.Base)
			d.attend(a, row, view, q[i*qw:(i+1)*qw], k[i*kw:(i+1)*kw], v[i*kw:(i+1)*kw], out[i*qw:(i+1)*qw])
		}
		return nil
	}
	d.attend(a, st, c.from(st.Base), q, k, v, out)
	return nil
}

// from is the part of the cache from cell base on.
func (c *kvCache) from(base int) *kvCache {
	if base == 0 {
		return c
	}
	return &kvCache{k: c.k[base*c.dim:], v: c.v[base*c.dim:], dim: c.dim}
}

// appendF16 writes a step's keys or values (rows of dim) into the f16
// cache: a prompt's, a few MB a layer for a 7B model, over the pool.
func (d *Device) appendF16(dst []uint16, src []float32, dim int) {
	rows := len(src) / dim
	if rows < 16 {
		kernels.ToF16(dst, src)
		return
	}
	d.pool.Run(rows, func(lo, hi int) {
		kernels.ToF16(dst[lo*dim:hi*dim], src[lo*dim:hi*dim])
	})
}

// attend is attention for the tokens of st, at positions st.Pos.. of the
// sequence whose cells c starts at.
func (d *Device) attend(a ops.AttnParams, st ops.Step, c *kvCache, q, k, v, out []float32) {
	n := len(st.Tokens)
	dim, hd := c.dim, a.HeadDim
	d.appendF16(c.k[st.Pos*dim:(st.Pos+n)*dim], k[:n*dim], dim)
	d.appendF16(c.v[st.Pos*dim:(st.Pos+n)*dim], v[:n*dim], dim)
	group := a.Heads / a.KVHeads
	qw := a.Heads * hd
	scale := 1 / float32(math.Sqrt(float64(hd))) // 1.0f/sqrtf(head_dim), as llama.cpp
	if n >= faTileQ && hd%faLanes() == 0 {
		bt := max(1, faRows/group) // tokens per block
		nb := (n + bt - 1) / bt
		d.pool.Run(nb*a.KVHeads, func(lo, hi int) {
			sc := scratchPool.Get().(*tileScratch)
			defer scratchPool.Put(sc)
			for idx := lo; idx < hi; idx++ {
				// The last blocks, which see the most keys, first, so that
				// the pool's dynamic chunks even the load out.
				b, kvh := nb-1-idx/a.KVHeads, idx%a.KVHeads
				t0, t1 := b*bt, min(n, (b+1)*bt)
				attendTiled(q, out, qw, c, kvh, group, hd, st.Pos, t0, t1, scale, sc)
			}
		})
		return
	}
	// llama.cpp attends over n_kv cells of the cache: the cells in use
	// (the step's last position + 1) rounded up to 256, at least 256 (its
	// cache is a multiple of 256 cells); masked cells cost nothing. For one query row and 512
	// or more cells it splits them into one chunk per thread and combines
	// the chunks' partial results (its split-KV path), which changes the
	// sums; hybrid does the same with its own thread count.
	nkv := max(256, (st.Pos+n+255)/256*256)
	if n == 1 && nkv >= 512 {
		d.attendSplit(q, out, c, a, st.Pos+1, nkv, scale)
		return
	}
	w := headsPerTask(a)
	units := a.Heads / w
	d.pool.Run(n*units, func(lo, hi int) {
		sc := scratchPool.Get().(*tileScratch)
		defer scratchPool.Put(sc)
		qh, state, acc := sc.row(hd)
		for idx := lo; idx < hi; idx++ {
			i, h := idx/units, (idx%units)*w
			qi := q[i*qw+h*hd : i*qw+(h+w)*hd]
			attendHeads(qi, c, (h/group)*hd, 0, st.Pos+i+1, scale, qh[:w*hd], state[:w*(2+hd)], acc)
			for u := range w {
				s := state[u*(2+hd) : (u+1)*(2+hd)]
				inv := float32(0)
				if s[1] != 0 {
					inv = 1 / s[1]
				}
				o := out[i*qw+(h+u)*hd : i*qw+(h+u+1)*hd]
				for j, v := range s[2:] {
					o[j] = v * inv
				}
			}
		}
	})
	return
}

// headsPerTask is how many query heads one-row attention takes at a time:
// two where consecutive heads share their keys and values (an even group
// of grouped-query attention), so that the two-head kernel reads each key
// and value once for both; else one.
func headsPerTask(a ops.AttnParams) int {
	if (a.Heads/a.KVHeads)%2 == 0 {
		return 2
	}
	return 1
}

// attendHeads runs one-row attention for the w = len(q)/len(acc) query
// heads in q (consecutive, sharing the KV head at kh) over cells from..to-1
// from fresh states, left in st (w states of M, S and the values), through
// the two-head kernel where there is one. qh is scratch of len(q).
func attendHeads(q []float32, c *kvCache, kh, from, to int, scale float32, qh, st []float32, acc []uint16) {
	hd := len(acc)
	w := len(q) / hd
	roundQ(qh, q)
	for u := range w {
		rowStart(st[u*(2+hd) : (u+1)*(2+hd)])
	}
	if to <= from {
		return
	}
	dim := c.dim
	if w == 2 && kernels.AttnRow2(qh, c.k[from*dim+kh:], c.v[from*dim+kh:], dim, to-from, scale, st, &expTab) {
		return
	}
	for u := range w {
		attendRow(qh[u*hd:(u+1)*hd], c, kh, from, to, scale, st[u*(2+hd):(u+1)*(2+hd)], acc)
	}
}

// attendSplit is llama.cpp's split-KV decode attention: the nkv cells in
// one chunk per thread, each head's chunk attended from a fresh state (cells
// at or past span masked), then the chunks' partials combined in order
// (ggml_flash_attn_ext_reduce_partials).
func (d *Device) attendSplit(q, out []float32, c *kvCache, a ops.AttnParams, span, nkv int, scale float32) {
	hd, group := a.HeadDim, a.Heads/a.KVHeads
	nth := d.pool.Threads()
	chunk := (nkv + nth - 1) / nth
	size := 2 + hd
	if need := a.Heads * nth * size; len(d.partials) < need {
		d.partials = make([]float32, need)
	}
	parts := d.partials
	w := headsPerTask(a)
	units := a.Heads / w
	d.pool.Run(units*nth, func(lo, hi int) {
		sc := scratchPool.Get().(*tileScratch)
		defer scratchPool.Put(sc)
		qh, state, acc := sc.row(hd)
		for idx := lo; idx < hi; idx++ {
			h, ch := (idx/nth)*w, idx%nth
			from, to := ch*chunk, min((ch+1)*chunk, nkv, span)
			attendHeads(q[h*hd:(h+w)*hd], c, (h/group)*hd, from, to, scale, qh[:w*hd], state[:w*size], acc)
			for u := range w {
				copy(parts[((h+u)*nth+ch)*size:((h+u)*nth+ch+1)*size], state[u*size:(u+1)*size])
			}
		}
	})
	d.pool.Run(a.Heads, func(lo, hi int) {
		for h := lo; h < hi; h++ {
			o := out[h*hd : (h+1)*hd]
			clear(o)
			m, s := float32(math.Inf(-1)), float32(0)
			for ch := range nth {
				if ch*chunk >= nkv {
					continue
				}
				p := parts[(h*nth+ch)*size : (h*nth+ch+1)*size]
				if p[1] == 0 {
					continue
				}
				mNew := max(m, p[0])
				so, sn := expf(m-mNew), expf(p[0]-mNew)
				// GCC contracts a·so + b·sn into fma(a, so, b·sn).
				for j, v := range p[2:] {
					o[j] = fma32(o[j], so, v*sn)
				}
				s = fma32(s, so, p[1]*sn)
				m = mNew
			}
			if s != 0 {
				inv := 1 / s
				for j := range o {
					o[j] *= inv
				}
			}
		}
	})
}

// roundQ rounds a query head to binary16, as llama.cpp converts it for its
// f16 dot products.
func roundQ(qh, q []float32) {
	f16 := quant.F16Table()
	for j, x := range q {
		qh[j] = f16[quant.F32ToF16(x)]
	}
}

// rowStart resets a one-row attention state: M = -Inf, S = 0, no values.
func rowStart(st []float32) {
	clear(st)
	st[0] = float32(math.Inf(-1))
}

// attendRow is llama.cpp's one-row flash attention over cells from..to-1
// (ggml_compute_forward_flash_attn_ext_f16_one_chunk): f32 scores of the
// f16-rounded query, an online softmax whose value accumulator is f16,
// rescaled when the running maximum grows. The state st is M, S and the
// accumulator's values (as f32); acc is scratch of the head size. The
// assembly kernel, where there is one, gives the same bits.
func attendRow(qh []float32, c *kvCache, kh, from, to int, scale float32, st []float32, acc []uint16) {
	hd, dim := len(qh), c.dim
	if to <= from {
		return
	}
	if kernels.AttnRow(qh, c.k[from*dim+kh:], c.v[from*dim+kh:], dim, to-from, scale, st, &expTab) {
		return
	}
	m, sum := st[0], st[1]
	for j, v := range st[2:] {
		acc[j] = quant.F32ToF16(v)
	}
	for j := from; j < to; j++ {
		s := kernels.DotF16(c.k[j*dim+kh:j*dim+kh+hd], qh) * scale
		ms, vs := float32(1), float32(1)
		if s > m {
			ms = expf(m - s)
			m = s
			kernels.ScaleF16(acc, ms)
		} else {
			vs = expf(s - m)
		}
		kernels.MadF16(acc, c.v[j*dim+kh:j*dim+kh+hd], vs)
		sum = fma32(sum, ms, vs) // GCC fuses S*ms + vs
	}
	f16 := quant.F16Table()
	st[0], st[1] = m, sum
	for j, h := range acc {
		st[2+j] = f16[h]
	}
}

// tileScratch is attention's working memory, reused across its calls on
// one worker and, through scratchPool, across steps: a step's attention
// allocating its own made garbage enough for a prompt and its decode to
// raise the peak RSS by tens of megabytes.
type tileScratch struct {
	q, o, s, kt []float32
	m, sum      []float32
	// One-row attention's query, state and f16 accumulator.
	qh, state []float32
	acc       []uint16
}

var scratchPool = sync.Pool{New: func() any { return new(tileScratch) }}

// row returns one-row attention's scratch for head size hd, for up to two
// heads: queries (2·hd), states (2·(2+hd)) and one f16 accumulator (hd).
func (sc *tileScratch) row(hd int) (qh, state []float32, acc []uint16) {
	if len(sc.acc) != hd {
		sc.qh, sc.state, sc.acc = make([]float32, 2*hd), make([]float32, 2*(2+hd)), make([]uint16, hd)
	}
	return sc.qh, sc.state, sc.acc
}

func (sc *tileScratch) size(rows, hd int) {
	if len(sc.q) < rows*hd || len(sc.kt) != hd*kernels.AttnTile {
		sc.q = make([]float32, rows*hd)
		sc.o = make([]float32, rows*hd)
		sc.s = make([]float32, rows*kernels.AttnTile)
		sc.kt = make([]float32, hd*kernels.AttnTile)
		sc.m = make([]float32, rows)
		sc.sum = make([]float32, rows)
	}
}

// attendTiled is llama.cpp's tiled flash attention
// (ggml_compute_forward_flash_attn_ext_tiled) for tokens t0..t1-1 of the step
// and the query heads of KV head kvh: row r is token t0+r/group, query head
// kvh*group+r%group. Per row the arithmetic is llama.cpp's to the bit, which
// does not depend on how rows are grouped into tiles: the cache is taken in
// tiles of kernels.AttnTile cells from cell 0; a tile's scores are f32 dot
// products (AttnScores); the running maximum M grows per tile, rescaling the
// f32 accumulator and the running sum S by glibc's expf(M_old-M_new) when it
// does; the weights are ggml_v_expf of score minus M, summed in double onto
// S (AttnSoftMax); the values are added with FMA (AttnAccum); and the output
// is the accumulator times 1/S. Cells past a row's position are masked to
// -Inf, weight 0, as llama.cpp's causal mask does, and tiles wholly past it
// skipped, as llama.cpp skips a tile whose scores are all -Inf.
func attendTiled(q, out []float32, qw int, c *kvCache, kvh, group, hd, pos, t0, t1 int, scale float32, sc *tileScratch) {
	const tile = kernels.AttnTile
	rows := (t1 - t0) * group
	sc.size(rows, hd)
	qb, ob, s, kt := sc.q[:rows*hd], sc.o[:rows*hd], sc.s[:rows*tile], sc.kt
	m, sum := sc.m[:rows], sc.sum[:rows]
	gw := group * hd // a token's query heads of this KV head, contiguous
	for t := t0; t < t1; t++ {
		copy(qb[(t-t0)*gw:(t-t0+1)*gw], q[t*qw+kvh*gw:t*qw+(kvh+1)*gw])
	}
	clear(ob)
	clear(sum)
	for r := range m {
		m[r] = float32(math.Inf(-1))
	}
	dim, kh := c.dim, kvh*hd
	end := pos + t1 // cells the last token sees
	for j0 := 0; j0 < end; j0 += tile {
		nk := min(tile, end-j0)
		// Rows before r0 see no cell of this tile.
		r0 := max(0, j0-pos-t0) * group
		nr := rows - r0
		kernels.AttnPackK(kt, c.k[j0*dim+kh:], dim, nk, hd)
		kernels.AttnScores(s[r0*tile:], qb[r0*hd:], kt, nr, hd, scale)
		for r := r0; r < rows; r++ {
			sr := s[r*tile : (r+1)*tile]
			lim := pos + t0 + r/group + 1 - j0 // cells of the tile row r sees
			if lim < tile {
				for j := range sr[lim:] {
					sr[lim+j] = float32(math.Inf(-1))
				}
			}
			// The tile's maximum: the cells past lim are -Inf by now.
			mx := kernels.AttnRowMax(sr)
			if mx == float32(math.Inf(-1)) {
				clear(sr) // llama.cpp skips the row: no weight, M and S kept
				continue
			}
			if mx > m[r] {
				ms := expf(m[r] - mx)
				or := ob[r*hd : (r+1)*hd]
				for i := range or {
					or[i] *= ms
				}
				sum[r] *= ms
				m[r] = mx
			}
			sum[r] = float32(float64(sum[r]) + kernels.AttnSoftMax(sr, m[r]))
		}
		kernels.AttnAccum(ob[r0*hd:], s[r0*tile:], c.v[j0*dim+kh:], dim, nr, nk, hd)
	}
	for r := range rows {
		inv := float32(0)
		if sum[r] != 0 {
			inv = 1 / sum[r]
		}
		t, h := t0+r/group, r%group
		o := out[t*qw+kvh*gw+h*hd : t*qw+kvh*gw+(h+1)*hd]
		for i, x := range ob[r*hd : (r+1)*hd] {
			o[i] = x * inv
		}
	}
}
