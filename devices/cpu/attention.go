package cpu

import (
	"fmt"
	"math"

	"hybrid/devices/cpu/kernels"
	"hybrid/ops"
)

// attention appends the step's keys and values to the layer's f32 KV cache and
// computes causal grouped-query attention: query head h reads KV head
// h/(Heads/KVHeads). Work is split over (token, head) pairs; for decode it is
// bound by reading the cache.
func (d *Device) attention(op *ops.Op, st ops.Step, q, k, v, out []float32) error {
	a := op.Attn
	n := len(st.Tokens)
	if st.Pos < 0 || st.Pos+n > a.Context {
		return fmt.Errorf("cpu: op %s: positions %d..%d exceed the context of %d", op, st.Pos, st.Pos+n-1, a.Context)
	}
	c := d.cache(op.Layer, a)
	dim, hd := c.dim, a.HeadDim
	copy(c.k[st.Pos*dim:(st.Pos+n)*dim], k[:n*dim])
	copy(c.v[st.Pos*dim:(st.Pos+n)*dim], v[:n*dim])
	group := a.Heads / a.KVHeads
	qw := a.Heads * hd
	scale := float32(1 / math.Sqrt(float64(hd)))
	d.pool.Run(n*a.Heads, func(lo, hi int) {
		scores := make([]float32, st.Pos+n)
		for idx := lo; idx < hi; idx++ {
			i, h := idx/a.Heads, idx%a.Heads
			kh := (h / group) * hd
			qi := q[i*qw+h*hd : i*qw+(h+1)*hd]
			span := st.Pos + i + 1
			s := scores[:span]
			maxS := float32(math.Inf(-1))
			for j := range s {
				s[j] = kernels.Dot(qi, c.k[j*dim+kh:j*dim+kh+hd]) * scale
				maxS = max(maxS, s[j])
			}
			var sum float32
			for j, x := range s {
				e := float32(math.Exp(float64(x - maxS)))
				s[j] = e
				sum += e
			}
			o := out[i*qw+h*hd : i*qw+(h+1)*hd]
			clear(o)
			inv := 1 / sum
			for j, p := range s {
				kernels.Axpy(p*inv, c.v[j*dim+kh:j*dim+kh+hd], o)
			}
		}
	})
	return nil
}
