//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"slices"

	"gorgonia.org/cu"

	"hybrid/devices"
	"hybrid/ops"
)

// Run implements devices.Device. It checks what it can at once and queues
// the op for the device's thread, which launches its kernels on the
// context's stream; an error found there is returned by the next Read,
// Write or Sync.
func (d *Device) Run(op *ops.Op, st ops.Step, in []devices.Buffer, out devices.Buffer) error {
	var ins [3]*Buffer
	if len(in) > len(ins) {
		return fmt.Errorf("cuda: op %s: %d inputs", op, len(in))
	}
	for i, b := range in {
		cb, err := d.buf(b)
		if err != nil {
			return err
		}
		ins[i] = cb
	}
	ob, err := d.buf(out)
	if err != nil {
		return err
	}
	var w *weight
	if op.Weight != nil {
		d.wmu.Lock()
		w = d.weights[op.Weight.Name]
		d.wmu.Unlock()
		if w == nil {
			return fmt.Errorf("cuda: op %s: weight %s was not loaded", op, op.Weight.Name)
		}
	}
	switch op.Kind {
	case ops.Embed:
		for _, t := range st.Tokens {
			if t < 0 || int(t) >= w.w.Rows {
				return fmt.Errorf("cuda: op %s: token id %d is outside the vocabulary of %d", op, t, w.w.Rows)
			}
		}
		st.Tokens = slices.Clone(st.Tokens) // the caller may reuse its slice before the op runs
	case ops.Attention:
		if st.Pos < 0 || st.Pos+len(st.Tokens) > op.Attn.Context {
			return fmt.Errorf("cuda: op %s: positions %d..%d exceed the context of %d", op, st.Pos, st.Pos+len(st.Tokens)-1, op.Attn.Context)
		}
	}
	n := len(in)
	return d.enqueue(func() error {
		if err := d.run(op, st, w, ins[:n], ob); err != nil {
			return fmt.Errorf("cuda: op %s: %w", op, err)
		}
		return nil
	})
}

// run launches op (device thread only).
func (d *Device) run(op *ops.Op, st ops.Step, w *weight, in []*Buffer, out *Buffer) error {
	const threads = 256
	blocks := func(n int) int { return (n + threads - 1) / threads }
	switch op.Kind {
	case ops.Embed:
		n, cols := len(st.Tokens), w.w.Cols
		if out.n < n*cols {
			return fmt.Errorf("%d tokens do not fit its output of %d", n, out.n)
		}
		if n == 0 {
			return nil
		}
		if err := d.uploadTokens(st.Tokens); err != nil {
			return err
		}
		return launch(d.k.byType[w.typ].embed, n, 1, 128, d.args().ptr(uintptr(w.ptr)).i64(int64(w.rowBytes)).ptr(uintptr(d.tokens)).ptr(uintptr(out.ptr)).i32(cols))
	case ops.RMSNorm:
		cols := w.w.Cols
		rows := in[0].n / cols
		if rows == 0 {
			return nil
		}
		return launch(d.k.rmsNorm, rows, 1, threads, d.args().ptr(uintptr(in[0].ptr)).ptr(uintptr(w.ptr)).ptr(uintptr(out.ptr)).i32(cols).f32(op.Eps))
	case ops.MatMul:
		rows, cols := w.w.Rows, w.w.Cols
		n := in[0].n / cols
		if out.n < n*rows {
			return fmt.Errorf("output of %d elements, want %d×%d", out.n, n, rows)
		}
		if n == 0 {
			return nil
		}
		tk := d.k.byType[w.typ]
		a := d.args().ptr(uintptr(w.ptr)).i64(int64(w.rowBytes)).ptr(uintptr(in[0].ptr)).ptr(uintptr(out.ptr)).i32(rows).i32(cols).i32(n)
		const warps = 4 // rows per block
		if n == 1 {
			return launch(tk.matvec, (rows+warps-1)/warps, 1, 32*warps, a)
		}
		return launch(tk.matmul8, (rows+warps-1)/warps, (n+7)/8, 32*warps, a)
	case ops.RoPE:
		r := op.Rope
		rows := len(st.Tokens)
		if rows == 0 {
			return nil
		}
		width := in[0].n / rows
		pairs := rows * (width / r.HeadDim) * (r.HeadDim / 2)
		// The CPU device's step, rounded to f32 the same way.
		scale := float32(math.Pow(float64(r.Base), float64(float32(-2)/float32(r.Dims))))
		return launch(d.k.rope, blocks(pairs), 1, threads, d.args().ptr(uintptr(in[0].ptr)).ptr(uintptr(out.ptr)).i32(rows).i32(width).i32(r.HeadDim).i32(r.Dims).f32(scale).i32(st.Pos))
	case ops.Attention:
		return d.attention(op, st, in, out)
	case ops.SiLUMul, ops.Add:
		n := out.n
		k := d.k.add
		if op.Kind == ops.SiLUMul {
			k = d.k.siluMul
		}
		if n == 0 {
			return nil
		}
		return launch(k, blocks(n), 1, threads, d.args().ptr(uintptr(in[0].ptr)).ptr(uintptr(in[1].ptr)).ptr(uintptr(out.ptr)).i32(n))
	case ops.LastRow:
		if out.n > in[0].n {
			return fmt.Errorf("last row of %d elements from %d", out.n, in[0].n)
		}
		src := in[0].ptr + cu.DevicePtr(4*(in[0].n-out.n))
		return cu.MemcpyDtoDAsync(out.ptr, src, int64(4*out.n), cu.Stream{})
	}
	return fmt.Errorf("%w kind", devices.ErrUnsupported)
}

// uploadTokens copies the step's token ids to d.tokens (device thread only).
func (d *Device) uploadTokens(toks []int32) error {
	if len(toks) > d.ntok {
		n := max(len(toks), 512)
		p, err := d.alloc(4 * int64(n))
		if err != nil {
			return err
		}
		d.tokens, d.ntok = p, n
	}
	s, err := d.staging(4 * len(toks))
	if err != nil {
		return err
	}
	for i, t := range toks {
		s[4*i], s[4*i+1], s[4*i+2], s[4*i+3] = byte(t), byte(t>>8), byte(t>>16), byte(t>>24)
	}
	return cu.MemcpyHtoD(d.tokens, d.stage, int64(4*len(toks)))
}

// attention appends the step's keys and values to the layer's cache and
// launches the attention kernel (device thread only).
func (d *Device) attention(op *ops.Op, st ops.Step, in []*Buffer, out *Buffer) error {
	a := op.Attn
	n := len(st.Tokens)
	if st.Pos < 0 || st.Pos+n > a.Context {
		return fmt.Errorf("positions %d..%d exceed the context of %d", st.Pos, st.Pos+n-1, a.Context)
	}
	if n == 0 {
		return nil
	}
	dim := a.KVHeads * a.HeadDim
	c := d.kv[op.Layer]
	if c == nil || c.ctx < a.Context || c.dim != dim {
		// A replaced cache's memory stays allocated until Close.
		k, err := d.alloc(4 * int64(a.Context*dim))
		if err != nil {
			return fmt.Errorf("KV cache: %w", err)
		}
		v, err := d.alloc(4 * int64(a.Context*dim))
		if err != nil {
			return fmt.Errorf("KV cache: %w", err)
		}
		c = &kvCache{k: k, v: v, ctx: a.Context, dim: dim}
		d.kv[op.Layer] = c
	}
	off, bytes := cu.DevicePtr(4*st.Pos*dim), int64(4*n*dim)
	if err := cu.MemcpyDtoDAsync(c.k+off, in[1].ptr, bytes, cu.Stream{}); err != nil {
		return err
	}
	if err := cu.MemcpyDtoDAsync(c.v+off, in[2].ptr, bytes, cu.Stream{}); err != nil {
		return err
	}
	scale := 1 / float32(math.Sqrt(float64(a.HeadDim)))
	return launch(d.k.attention, a.Heads, n, 128, d.args().ptr(uintptr(in[0].ptr)).ptr(uintptr(c.k)).ptr(uintptr(c.v)).ptr(uintptr(out.ptr)).
		i32(a.Heads).i32(a.KVHeads).i32(a.HeadDim).i32(st.Pos).f32(scale))
}
