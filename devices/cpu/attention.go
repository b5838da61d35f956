package cpu

import (
	"fmt"
	"math"

	"hybrid/devices/cpu/kernels"
	"hybrid/ops"
	"hybrid/quant"
)

// faTileQ is the query count from which llama.cpp's CPU flash attention
// switches from its one-row kernel (f16 query, f16 output accumulator) to its
// tiled kernel (f32 throughout, keys and values widened from f16), and
// faTileLanes the head size that kernel needs a multiple of (its f32 SIMD
// width on AVX-512; on AVX2 it is 8, so heads of 8 differ there).
const (
	faTileQ     = 64
	faTileLanes = 16
)

// attention appends the step's keys and values to the layer's f16 KV cache and
// computes causal grouped-query attention: query head h reads KV head
// h/(Heads/KVHeads). It follows the numerics of llama.cpp's CPU flash
// attention, which its CPU backend uses by default, so that logits agree to
// f32 rounding: for fewer than faTileQ query rows, the query is rounded to
// f16 and values are accumulated into an f16 vector with an online softmax;
// for more, everything past the cache is f32. Work is split over (token, head)
// pairs; a decode step is bound by reading the cache.
func (d *Device) attention(op *ops.Op, st ops.Step, q, k, v, out []float32) error {
	a := op.Attn
	n := len(st.Tokens)
	if st.Pos < 0 || st.Pos+n > a.Context {
		return fmt.Errorf("cpu: op %s: positions %d..%d exceed the context of %d", op, st.Pos, st.Pos+n-1, a.Context)
	}
	c := d.cache(op.Layer, a)
	dim, hd := c.dim, a.HeadDim
	kernels.ToF16(c.k[st.Pos*dim:(st.Pos+n)*dim], k[:n*dim])
	kernels.ToF16(c.v[st.Pos*dim:(st.Pos+n)*dim], v[:n*dim])
	group := a.Heads / a.KVHeads
	qw := a.Heads * hd
	scale := 1 / float32(math.Sqrt(float64(hd))) // 1.0f/sqrtf(head_dim), as llama.cpp
	tiled := n >= faTileQ && hd%faTileLanes == 0
	d.pool.Run(n*a.Heads, func(lo, hi int) {
		qh := make([]float32, hd)
		acc := make([]uint16, hd)
		var scores []float32
		if tiled {
			scores = make([]float32, st.Pos+n)
		}
		for idx := lo; idx < hi; idx++ {
			i, h := idx/a.Heads, idx%a.Heads
			kh := (h / group) * hd
			qi := q[i*qw+h*hd : i*qw+(h+1)*hd]
			o := out[i*qw+h*hd : i*qw+(h+1)*hd]
			span := st.Pos + i + 1
			if tiled {
				attendF32(qi, c, kh, hd, span, scale, scores, o)
			} else {
				attendF16(qi, c, kh, hd, span, scale, qh, acc, o)
			}
		}
	})
	return nil
}

// attendF16 is llama.cpp's one-row flash attention: the query rounded to f16,
// f32 scores, and an online softmax whose value accumulator is f16, rescaled
// when the running maximum grows.
func attendF16(qi []float32, c *kvCache, kh, hd, span int, scale float32, qh []float32, acc []uint16, o []float32) {
	f16 := quant.F16Table()
	for j, x := range qi {
		qh[j] = f16[quant.F32ToF16(x)]
	}
	clear(acc)
	m := float32(math.Inf(-1))
	var sum float32
	dim := c.dim
	for j := 0; j < span; j++ {
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
	inv := float32(0)
	if sum != 0 {
		inv = 1 / sum
	}
	for j, h := range acc {
		o[j] = f16[h] * inv
	}
}

// attendF32 is llama.cpp's tiled flash attention in effect: f32 query and
// accumulator over the f16 cache.
func attendF32(qi []float32, c *kvCache, kh, hd, span int, scale float32, scores, o []float32) {
	f16 := quant.F16Table()
	dim := c.dim
	s := scores[:span]
	m := float32(math.Inf(-1))
	for j := range s {
		s[j] = kernels.DotF16(c.k[j*dim+kh:j*dim+kh+hd], qi) * scale
		m = max(m, s[j])
	}
	var sum float32
	for j, x := range s {
		e := expf(x - m)
		s[j] = e
		sum += e
	}
	clear(o)
	for j, p := range s {
		vj := c.v[j*dim+kh : j*dim+kh+hd]
		for t, h := range vj {
			o[t] += p * f16[h]
		}
	}
	inv := 1 / sum
	for t := range o {
		o[t] *= inv
	}
}
