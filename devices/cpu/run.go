package cpu

import (
	"fmt"
	"math"
	"runtime/debug"

	"hybrid/devices"
	"hybrid/devices/cpu/kernels"
	"hybrid/ops"
	"hybrid/quant"
)

// Run implements devices.Device.
//
// A memory fault reading the op's weight (a mapped model file truncated
// under it) is returned as an error wrapping kernels.ErrFault, on this
// goroutine as on the pool's workers, instead of ending the process.
//
// A device made by the backend (Open) holds a decode step's mat-vec back
// until the next call that is not another mat-vec of the same input, and
// then multiplies them together (flush): a step's q, k and v, and its gate
// and up, are one parallel job each, their input quantized once. Whatever
// reads the device's state first (Run of another op, Read, Write, Sync,
// Free, DropWeight, Close) runs them, so callers see no difference but the
// timing: the held ops' time falls to the call that runs them, as on a
// GPU, and Sync after each op (profiles, bench --ops) runs each alone.
func (d *Device) Run(op *ops.Op, st ops.Step, in []devices.Buffer, out devices.Buffer) error {
	if held, err := d.hold(op, in, out); held || err != nil {
		return err
	}
	if err := d.flush(); err != nil {
		return err
	}
	return d.guard(op, func() error { return d.run(op, st, in, out) })
}

// guard runs fn with memory faults reading a weight returned as errors
// naming what (an op, or a group of them), not ending the process.
func (d *Device) guard(what fmt.Stringer, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); !ok {
				panic(r)
			}
			err = fmt.Errorf("cpu: op %s: %w", what, kernels.ErrFault)
		}
	}()
	if err := fn(); err != nil {
		return err
	}
	if err := d.pool.Fault(); err != nil {
		return fmt.Errorf("cpu: op %s: %w", what, err)
	}
	return nil
}

// repack says whether mat-mul weights are repacked for this CPU's kernels
// (kernels.Pack); tests turn it off to compare with the file's layout.
var repack = true

// packedWeight returns w's repacked form, making it on first use, or nil
// where there is none. Packing reads the whole mapped weight once; its pages
// are then dropped from memory (release), so that the repacked copy
// replaces the mapped one instead of doubling it.
func (d *Device) packedWeight(w *weight) (*kernels.Packed, error) {
	d.mu.Lock()
	tried, pk := w.tried, w.packed
	d.mu.Unlock()
	if tried || !repack {
		return pk, nil
	}
	pk = kernels.Pack(d.pool, w.w.Type, w.raw, w.w.Rows, w.w.Cols)
	if err := d.pool.Fault(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	w.tried, w.packed = true, pk
	if pk != nil {
		d.mapped -= int64(len(w.raw))
		d.mem += int64(pk.Bytes())
		release(w.raw)
	}
	return pk, nil
}

func (d *Device) run(op *ops.Op, st ops.Step, in []devices.Buffer, out devices.Buffer) error {
	ins := make([][]float32, len(in))
	for i, b := range in {
		cb, err := d.buf(b)
		if err != nil {
			return err
		}
		ins[i] = cb.F
	}
	ob, err := d.buf(out)
	if err != nil {
		return err
	}
	var w *weight
	if op.Weight != nil {
		d.mu.Lock()
		w = d.weights[op.Weight.Name]
		d.mu.Unlock()
		if w == nil {
			return fmt.Errorf("cpu: op %s: weight %s was not loaded", op, op.Weight.Name)
		}
	}
	switch op.Kind {
	case ops.Embed:
		return d.embed(op, w, st, ob.F)
	case ops.RMSNorm:
		d.rows(ins[0], len(w.f32), func(lo, hi int) {
			rmsNorm(ins[0][lo:hi], w.f32, op.Eps, ob.F[lo:hi])
		})
	case ops.MatMul:
		n := len(ins[0]) / w.w.Cols
		pk, err := d.packedWeight(w)
		if err != nil {
			return fmt.Errorf("cpu: op %s: repacking %s: %w", op, w.w.Name, err)
		}
		if pk != nil {
			pk.MatMul(d.pool, ins[0], n, ob.F)
		} else if n == 1 {
			kernels.MatVec(d.pool, w.w.Type, w.raw, w.w.Rows, w.w.Cols, ins[0], ob.F)
		} else {
			kernels.MatMul(d.pool, w.w.Type, w.raw, w.w.Rows, w.w.Cols, ins[0], n, ob.F)
		}
	case ops.RoPE:
		if f := op.Rope.Freqs; f != nil && len(f) != op.Rope.Dims/2 {
			return fmt.Errorf("cpu: op %s: %d rope frequency factors for %d rotated pairs", op, len(f), op.Rope.Dims/2)
		}
		n := len(st.Tokens)
		width := len(ins[0]) / n
		if n == 1 && st.Rows == nil {
			copy(ob.F, ins[0])
			rotate(ob.F, op.Rope, d.ropeCS.factors(op.Rope, st.Pos))
			return nil
		}
		d.rows(ins[0], width, func(lo, hi int) {
			copy(ob.F[lo:hi], ins[0][lo:hi])
			if st.Rows == nil {
				rope(ob.F[lo:hi], (hi-lo)/width, op.Rope, st.Pos+lo/width)
				return
			}
			for r := lo / width; r < hi/width; r++ {
				rope(ob.F[r*width:(r+1)*width], 1, op.Rope, st.Rows[r].Pos)
			}
		})
	case ops.Attention:
		return d.attention(op, st, ins[0], ins[1], ins[2], ob.F)
	case ops.SiLUMul:
		// The op does not know its rows (the last layer's FFN runs on the
		// last token alone), so the buffer is one vector, as before: its
		// elements are what one call gives, whatever the chunks.
		d.elems(len(ob.F), func(lo, hi int) {
			siluMul(ins[0][lo:hi], ins[1][lo:hi], ob.F[lo:hi])
		})
	case ops.Add:
		a, b := ins[0], ins[1]
		d.elems(len(ob.F), func(lo, hi int) {
			o := ob.F[lo:hi]
			for i := range o {
				o[i] = a[lo+i] + b[lo+i]
			}
		})
	case ops.LastRow:
		copy(ob.F, ins[0][len(ins[0])-len(ob.F):])
	case ops.AddBias:
		b := w.f32
		if len(b) == 0 || len(ins[0])%len(b) != 0 {
			return fmt.Errorf("cpu: op %s: bias of %d does not divide an input of %d", op, len(b), len(ins[0]))
		}
		d.rows(ins[0], len(b), func(lo, hi int) {
			x, o := ins[0][lo:hi], ob.F[lo:hi]
			for i := range o {
				o[i] = x[i] + b[i%len(b)]
			}
		})
	default:
		return fmt.Errorf("cpu: op %s: %w kind", op, devices.ErrUnsupported)
	}
	return nil
}

// parallelFrom is the fewest elements an element-wise op spreads over the
// pool: a decode step's vectors (a few thousand) cost less than a hand-off,
// a prompt's (a million and more) would leave the other threads idle while
// one works through them (at 16 threads, they were a third of prefill).
const parallelFrom = 1 << 15

// rows runs fn over x's rows of width elements, as element ranges [lo, hi)
// of whole rows, spread over the pool where x is large.
func (d *Device) rows(x []float32, width int, fn func(lo, hi int)) {
	n := len(x) / width
	if len(x) < parallelFrom || n < 2 {
		fn(0, n*width)
		return
	}
	d.pool.Run(n, func(lo, hi int) { fn(lo*width, hi*width) })
}

// elems runs fn over [0, n) in ranges whose bounds are multiples of 64
// elements (whole vectors of any kernel, so that each element's result is
// what one call over all of them gives), spread over the pool where n is
// large.
func (d *Device) elems(n int, fn func(lo, hi int)) {
	if n < parallelFrom {
		fn(0, n)
		return
	}
	const step = 64
	blocks := (n + step - 1) / step
	d.pool.Run(blocks, func(lo, hi int) { fn(lo*step, min(hi*step, n)) })
}

func (d *Device) embed(op *ops.Op, w *weight, st ops.Step, out []float32) error {
	cols := w.w.Cols
	rb, _ := quant.RowBytes(w.w.Type, cols)
	if len(out) < len(st.Tokens)*cols {
		return fmt.Errorf("cpu: op %s: %d tokens do not fit its output", op, len(st.Tokens))
	}
	for i, t := range st.Tokens {
		if t < 0 || int(t) >= w.w.Rows {
			return fmt.Errorf("cpu: op %s: token id %d is outside the vocabulary of %d", op, t, w.w.Rows)
		}
		row := w.raw[int(t)*rb : (int(t)+1)*rb]
		if err := quant.Dequantize(w.w.Type, row, out[i*cols:(i+1)*cols]); err != nil {
			return fmt.Errorf("cpu: op %s: %w", op, err)
		}
	}
	return nil
}

// rmsNorm normalises each row of x by its root mean square (plus eps) and
// multiplies by w, with ggml's arithmetic: the squares are rounded to f32 and
// summed in float64, the mean and scale are f32, and y = (x·scale)·w.
func rmsNorm(x, w []float32, eps float32, out []float32) {
	d := len(w)
	for r := 0; r+d <= len(x); r += d {
		row := x[r : r+d]
		var sum float64
		for _, v := range row {
			sum += float64(v * v)
		}
		mean := float32(sum / float64(d))
		scale := 1 / float32(math.Sqrt(float64(mean+eps)))
		o := out[r : r+d]
		for i, v := range row {
			o[i] = (v * scale) * w[i]
		}
	}
}

// rope rotates feature pairs (adjacent ones, or j and j+Dims/2 for a
// NEOX rope) of every head of every row of x (rows
// tokens); row i is at position pos+i. It is llama.cpp's CPU rope to the bit:
// θ for pair j is pos·base^(-2j/dims), stepped by repeated multiplication in
// f32 from powf(base, -2/dims); cos and sin are glibc's sincosf; and the
// rotation has the multiply-adds fused as GCC compiles it. Frequency
// factors, when the op has them, divide each pair's θ in f32 after the
// stepping, as ggml_rope_cache_init does (theta/ff): the stepped θ itself is
// never divided, so the factors do not compound. With llama.cpp's
// freq_scale 1, ext_factor 0 and attn_factor 1 that quotient is the angle
// exactly.
func rope(x []float32, rows int, p ops.RopeParams, pos int) {
	cs := make([]float32, p.Dims)
	width := len(x) / rows
	for r := 0; r < rows; r++ {
		ropeFactors(cs, p, pos+r)
		rotate(x[r*width:(r+1)*width], p, cs)
	}
}

// ropeFactors sets cs to the cosine and sine of each pair's angle at pos,
// interleaved (cs[2j] = cos θj, cs[2j+1] = sin θj).
func ropeFactors(cs []float32, p ops.RopeParams, pos int) {
	// powf is correctly rounded for these arguments (checked against glibc
	// for the usual bases and head sizes).
	scale := float32(math.Pow(float64(p.Base), float64(float32(-2)/float32(p.Dims))))
	theta := float32(pos)
	for j := 0; j < p.Dims/2; j++ {
		t := theta
		if p.Freqs != nil {
			t /= p.Freqs[j]
		}
		cs[2*j+1], cs[2*j] = sincosf(t)
		theta *= scale
	}
}

// rotate rotates every head of one row by the factors of ropeFactors.
func rotate(row []float32, p ops.RopeParams, cs []float32) {
	half := p.Dims / 2
	for h := 0; h+p.HeadDim <= len(row); h += p.HeadDim {
		head := row[h : h+p.Dims]
		if p.Neox {
			// ggml's rope_neox: pair j is (j, j+half), same angles.
			for j := 0; j < half; j++ {
				c, s := cs[2*j], cs[2*j+1]
				x0, x1 := head[j], head[j+half]
				head[j] = fma32(x0, c, -(x1 * s))
				head[j+half] = fma32(x0, s, x1*c)
			}
			continue
		}
		for j := 0; j < half; j++ {
			c, s := cs[2*j], cs[2*j+1]
			x0, x1 := head[2*j], head[2*j+1]
			// GCC contracts x0*cos - x1*sin and x0*sin + x1*cos so, as
			// found against llama.cpp's rope output bit for bit.
			head[2*j] = fma32(x0, c, -(x1 * s))
			head[2*j+1] = fma32(x0, s, x1*c)
		}
	}
}

// ropeCache holds the rope factors of the last one-token step: a decode
// step's q and k of every layer share one position, so they are computed
// once per step instead of twice per layer. The factors depend on the
// position, the base, the rotated features and the frequency factors (the
// graph's one table: Freqs is shared by its RoPE ops and never written).
type ropeCache struct {
	pos   int
	base  float32
	freqs []float32
	cs    []float32 // nil until the first step
}

// factors returns the rope factors of p at pos, from the cache when it
// holds them.
func (c *ropeCache) factors(p ops.RopeParams, pos int) []float32 {
	same := c.cs != nil && c.pos == pos && c.base == p.Base && len(c.cs) == p.Dims &&
		len(c.freqs) == len(p.Freqs) && (len(p.Freqs) == 0 || &c.freqs[0] == &p.Freqs[0])
	if same {
		return c.cs
	}
	if cap(c.cs) < p.Dims {
		c.cs = make([]float32, p.Dims)
	}
	c.cs = c.cs[:p.Dims]
	ropeFactors(c.cs, p, pos)
	c.pos, c.base, c.freqs = pos, p.Base, p.Freqs
	return c.cs
}

// siluMul sets out = silu(g)·u with ggml's arithmetic (ggml_vec_swiglu_f32):
// whole vectors use its vectorised expf approximation, the tail
// libm's expf, so that results agree with llama.cpp to the last bit rather
// than within an ulp (an ulp here can flip a later rounding to f16 or to
// 8-bit blocks).
func siluMul(g, u, out []float32) {
	lanes, vexp := 8, kernels.VExpF256
	if kernels.HasAVX512() {
		lanes, vexp = 16, kernels.VExpF512
	}
	n := len(g) - len(g)%lanes
	// The assembly, where there is one, does the same to the bit.
	for i := kernels.SiluMul(g[:n], u[:n], out[:n]); i < n; i++ {
		x := g[i]
		out[i] = x / (1 + vexp(-x)) * u[i]
	}
	for i := n; i < len(g); i++ {
		x := g[i]
		out[i] = x / (1 + expf(-x)) * u[i]
	}
}

// fma32 is a float32 fused multiply-add.
func fma32(a, b, c float32) float32 {
	return float32(math.FMA(float64(a), float64(b), float64(c)))
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }
