//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"hybrid/devices"
	"hybrid/ops"
	"hybrid/quant"
	"hybrid/verify"
)

// The op variants of Qwen2 (biases, NEOX rope), Qwen3 (per-head norms of q
// and k, NEOX rope) and Llama 3.1+ (rope frequency factors), against the CPU
// device.

// f32Weight returns v's bytes as an F32 weight.
func f32Weight(v []float32) []byte {
	data := make([]byte, 4*len(v))
	quant.Quantize(quant.F32, v, data)
	return data
}

// TestAddBias checks add_bias against the CPU device: one f32 addition per
// element on both, so exact.
func TestAddBias(t *testing.T) {
	g := gpu(t)
	r := rand.New(rand.NewPCG(21, 22))
	for _, c := range []struct{ rows, cols int }{{1, 896}, {7, 896}, {3, 128}} {
		t.Run(fmt.Sprintf("%dx%d", c.rows, c.cols), func(t *testing.T) {
			bias := verify.RandVec(r, c.cols)
			x := verify.RandVec(r, c.rows*c.cols)
			op := &ops.Op{Kind: ops.AddBias, Name: "bias", Weight: &ops.Weight{Name: fmt.Sprintf("bias.%d", c.cols), Type: quant.F32, Rows: 1, Cols: c.cols}}
			data := f32Weight(bias)
			got := runOp(t, g, op, ops.Step{}, data, len(x), x)
			want := runOp(t, cpuDev, op, ops.Step{}, data, len(x), x)
			if !slices.Equal(got, want) {
				e, i := verify.MaxErr(got, func(i int) float64 { return float64(want[i]) }, func(int) float64 { return 1 })
				t.Fatalf("out[%d] = %g, cpu %g (error %.3g): add_bias must be exact", i, got[i], want[i], e)
			}
		})
	}
}

// TestPerHeadNorm checks a per-head RMSNorm (Qwen3's q and k norms: heads
// of 128 and of 64, one weight for every head) against the CPU device:
// the GPU sums squares in f32 by a tree, the CPU in float64, ~1e-7 relative
// in the scale, then two f32 products: 1e-5 relative, as rms_norm.
func TestPerHeadNorm(t *testing.T) {
	g := gpu(t)
	r := rand.New(rand.NewPCG(23, 24))
	for _, c := range []struct{ rows, heads, hd int }{{1, 16, 128}, {7, 16, 128}, {5, 2, 64}} {
		t.Run(fmt.Sprintf("n=%d/%dx%d", c.rows, c.heads, c.hd), func(t *testing.T) {
			x := verify.RandVec(r, c.rows*c.heads*c.hd)
			// Heads of very different sizes, so that a norm over the
			// whole row would be far off.
			for h := range c.rows * c.heads {
				s := float32(math.Pow(4, float64(h%5)))
				for i := range c.hd {
					x[h*c.hd+i] *= s
				}
			}
			w := verify.RandVec(r, c.hd)
			op := &ops.Op{Kind: ops.RMSNorm, Name: "q_norm", Eps: 1e-6, PerHead: true, Weight: &ops.Weight{Name: fmt.Sprintf("qnorm.%d", c.hd), Type: quant.F32, Rows: 1, Cols: c.hd}}
			data := f32Weight(w)
			got := runOp(t, g, op, ops.Step{}, data, len(x), x)
			want := runOp(t, cpuDev, op, ops.Step{}, data, len(x), x)
			if e, i := verify.MaxErr(got, func(i int) float64 { return float64(want[i]) }, func(i int) float64 { return math.Abs(float64(want[i])) + 1e-30 }); e > 1e-5 {
				t.Fatalf("out[%d] = %g, cpu %g (relative error %.3g > 1e-5)", i, got[i], want[i], e)
			} else {
				t.Logf("max relative error %.2g", e)
			}
		})
	}
}

// ropeVariant is one rope configuration of a model family.
type ropeVariant struct {
	name       string
	hd, dims   int
	neox       bool
	freqs      bool
	base       float32
	heads, kvh int
}

var ropeVariants = []ropeVariant{
	{name: "neox", hd: 128, dims: 128, neox: true, base: 1e6, heads: 14, kvh: 2},      // Qwen2, Qwen3
	{name: "neox-partial", hd: 64, dims: 32, neox: true, base: 1e4, heads: 8, kvh: 4}, // features past dims copied
	{name: "freqs", hd: 128, dims: 128, freqs: true, base: 5e5, heads: 32, kvh: 8},    // Llama 3.1+
	{name: "neox-freqs", hd: 64, dims: 64, neox: true, freqs: true, base: 1e4, heads: 4, kvh: 2},
	{name: "freqs-partial", hd: 64, dims: 48, freqs: true, base: 1e4, heads: 4, kvh: 4},
}

// params returns the variant's rope, with random frequency factors in
// [1, 8] (Llama 3's run from 1 to its low-frequency factor 8) where it has
// them, and one below 1 to be sure a factor that lengthens θ works too.
func (v ropeVariant) params(r *rand.Rand) ops.RopeParams {
	p := ops.RopeParams{HeadDim: v.hd, Dims: v.dims, Base: v.base, Neox: v.neox}
	if v.freqs {
		p.Freqs = make([]float32, v.dims/2)
		for i := range p.Freqs {
			p.Freqs[i] = 1 + 7*r.Float32()
		}
		p.Freqs[1] = 0.75
	}
	return p
}

// TestRoPEVariants checks NEOX ropes and ropes with frequency factors, over
// all or part of each head, at several positions, against the CPU device.
// θ is formed identically on both (stepped in f32, divided by the factor
// with one correctly rounded division); CUDA's sincosf is within 1-2 ulp of
// glibc's, so outputs agree to a few ulp of the input's size: 2e-6 of
// max|x|, as TestRoPE. The output starts as NaNs (verify.RunOp), so a
// feature the kernel never writes fails.
func TestRoPEVariants(t *testing.T) {
	g := gpu(t)
	r := rand.New(rand.NewPCG(25, 26))
	for _, v := range ropeVariants {
		rp := v.params(r)
		for _, c := range []struct{ rows, pos int }{{7, 0}, {1, 90}, {3, 4000}} {
			t.Run(fmt.Sprintf("%s/pos=%d/n=%d", v.name, c.pos, c.rows), func(t *testing.T) {
				x := verify.RandVec(r, c.rows*v.heads*v.hd)
				op := &ops.Op{Kind: ops.RoPE, Name: "rope", Rope: rp}
				st := ops.Step{Tokens: make([]int32, c.rows), Pos: c.pos}
				got := runOp(t, g, op, st, nil, len(x), x)
				want := runOp(t, cpuDev, op, st, nil, len(x), x)
				scale := verify.MaxAbs(x)
				if e, i := verify.MaxErr(got, func(i int) float64 { return float64(want[i]) }, func(int) float64 { return scale }); e > 2e-6 {
					t.Fatalf("out[%d] = %g, cpu %g (error %.3g of max|x| > 2e-6)", i, got[i], want[i], e)
				} else {
					t.Logf("max error %.2g of max|x|", e)
				}
			})
		}
	}
}

// ropeStep queues RoPE(q), RoPE(k) and Attention(rotated q, rotated k, v)
// on d together, as a model's step does (so that the GPU may fuse them),
// and returns the three outputs.
func ropeStep(t *testing.T, d devices.Device, rq, rk, at *ops.Op, st ops.Step, q, k, v []float32) (qo, ko, ao []float32) {
	t.Helper()
	buf := func(x []float32, n int) devices.Buffer {
		b, err := d.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		if x != nil {
			if err := d.Write(b, x); err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
	qb, kb, vb := buf(q, len(q)), buf(k, len(k)), buf(v, len(v))
	qob, kob, aob := buf(nil, len(q)), buf(nil, len(k)), buf(nil, len(q))
	for _, r := range []struct {
		op  *ops.Op
		in  []devices.Buffer
		out devices.Buffer
	}{{rq, []devices.Buffer{qb}, qob}, {rk, []devices.Buffer{kb}, kob}, {at, []devices.Buffer{qob, kob, vb}, aob}} {
		if err := d.Run(r.op, st, r.in, r.out); err != nil {
			t.Fatal(err)
		}
	}
	qo, ko, ao = make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(q))
	for _, c := range []struct {
		dst []float32
		src devices.Buffer
	}{{qo, qob}, {ko, kob}, {ao, aob}} {
		if err := d.Read(c.dst, c.src); err != nil {
			t.Fatal(err)
		}
	}
	return qo, ko, ao
}

// TestFusedRopeVariants runs a prefill of 5 tokens and two decode steps of
// RoPE(q) RoPE(k) Attention for every rope variant, on the GPU with and
// without fusion (the decode steps fuse into rope_kv and attention,
// fuse_cuda.go) and on the CPU. Fused and unfused must agree bit for bit
// (the kernels share rope_pair and rope_feats); against the CPU, the
// rotated q and k within 2e-6 of max|x| (TestRoPEVariants) and attention
// within 5e-3 of max|v| (the CPU's f16 rounding of its decode query and
// accumulator, TestAttention).
func TestFusedRopeVariants(t *testing.T) {
	g := gpu(t)
	defer SetFuse(g, true)
	r := rand.New(rand.NewPCG(27, 28))
	for vi, v := range ropeVariants {
		t.Run(v.name, func(t *testing.T) {
			rp := v.params(r)
			a := ops.AttnParams{Heads: v.heads, KVHeads: v.kvh, HeadDim: v.hd, Context: 16}
			steps := []ops.Step{{Tokens: make([]int32, 5), Pos: 0}, {Tokens: make([]int32, 1), Pos: 5}, {Tokens: make([]int32, 1), Pos: 6}}
			type io struct{ q, k, v []float32 }
			var ins []io
			for _, st := range steps {
				n := len(st.Tokens)
				ins = append(ins, io{verify.RandVec(r, n*v.heads*v.hd), verify.RandVec(r, n*v.kvh*v.hd), verify.RandVec(r, n*v.kvh*v.hd)})
			}
			// Each run has its own layer, so its own KV cache.
			run := func(d devices.Device, layer int) [][3][]float32 {
				rq := &ops.Op{Kind: ops.RoPE, Name: "rope_q", Layer: layer, Rope: rp}
				rk := &ops.Op{Kind: ops.RoPE, Name: "rope_k", Layer: layer, Rope: rp}
				at := &ops.Op{Kind: ops.Attention, Name: "attn", Layer: layer, Attn: a}
				var outs [][3][]float32
				for i, st := range steps {
					qo, ko, ao := ropeStep(t, d, rq, rk, at, st, ins[i].q, ins[i].k, ins[i].v)
					outs = append(outs, [3][]float32{qo, ko, ao})
				}
				return outs
			}
			SetFuse(g, false)
			plain := run(g, 1000+3*vi)
			SetFuse(g, true)
			f0, _ := Fused(g)
			fused := run(g, 1001+3*vi)
			if f1, _ := Fused(g); f1-f0 != 2 {
				t.Fatalf("%d units fused over two decode steps, want 2 (rope_kv each)", f1-f0)
			}
			ref := run(cpuDev, 1002+3*vi)
			names := [3]string{"rotated q", "rotated k", "attention"}
			for s := range steps {
				for o := range 3 {
					if !slices.Equal(plain[s][o], fused[s][o]) {
						e, i := verify.MaxErr(fused[s][o], func(i int) float64 { return float64(plain[s][o][i]) }, func(int) float64 { return 1 })
						t.Fatalf("step %d: %s fused [%d] = %g, alone %g (error %.3g): must be identical", s, names[o], i, fused[s][o][i], plain[s][o][i], e)
					}
					scale, tol := verify.MaxAbs(ins[s].q), 2e-6
					switch o {
					case 1:
						scale = verify.MaxAbs(ins[s].k)
					case 2:
						scale, tol = 0, 5e-3
						for _, in := range ins[:s+1] {
							scale = max(scale, verify.MaxAbs(in.v))
						}
					}
					e, i := verify.MaxErr(fused[s][o], func(i int) float64 { return float64(ref[s][o][i]) }, func(int) float64 { return scale })
					if e > tol {
						t.Fatalf("step %d: %s [%d] = %g, cpu %g (error %.3g of max|x| > %g)", s, names[o], i, fused[s][o][i], ref[s][o][i], e, tol)
					}
					t.Logf("step %d: %s vs cpu: max error %.2g", s, names[o], e)
				}
			}
		})
	}
}

// TestFusedMVRopeVariants runs a prefill of 5 tokens and two decode steps of
// MatMul(q) MatMul(k) MatMul(v) RoPE(q) RoPE(k) Attention for every rope
// variant, for block and float weight types and for v of another type than
// q and k (mixedRope), on the GPU with and without
// fusion: the decode steps fuse into one mat-vec launch that also turns q
// and k and appends k and v to the cache (MV_ROPE, fuse_cuda.go), then
// attention. Every value the six ops write must be the same bit for bit;
// for rows of 256 and of 2048, and the ops alone on mvw_, so that the fused
// launch on mvp_q4_0, mvrp_q4_k_q4_k or mvrp_q8_0_q8_0 (first trips loaded
// ahead) is checked against it.
func TestFusedMVRopeVariants(t *testing.T) {
	g := gpu(t)
	defer SetFuse(g, true)
	r := rand.New(rand.NewPCG(29, 30))
	defer func(p bool) { noPre = p }(noPre)
	// q's, k's and v's types: one type, or v of another (mixedRope).
	// Rows of 2048 hold Q4_0's first trips (mvp_) where a launch is of at
	// most one block a multiprocessor on a Hopper GPU.
	for ci, cols := range []int{256, 2048} {
		for vi, v := range ropeVariants {
			for ti, types := range [][3]quant.Type{{quant.Q8_0, quant.Q8_0, quant.Q8_0}, {quant.F32, quant.F32, quant.F32},
				{quant.Q4_K, quant.Q4_K, quant.Q6_K}, {quant.Q5_0, quant.Q5_0, quant.Q8_0}, {quant.Q4_K, quant.Q4_K, quant.Q4_K}, {quant.Q4_0, quant.Q4_0, quant.Q4_0}} {
				t.Run(fmt.Sprintf("%s/%s-%s/%d", v.name, types[0], types[2], cols), func(t *testing.T) {
					rp := v.params(r)
					a := ops.AttnParams{Heads: v.heads, KVHeads: v.kvh, HeadDim: v.hd, Context: 16}
					var mm [3]*ops.Op
					for j, rows := range []int{v.heads * v.hd, v.kvh * v.hd, v.kvh * v.hd} {
						w := &ops.Weight{Name: fmt.Sprintf("mvrope.%d.%d.%d.%d", cols, vi, ti, j), Type: types[j], Rows: rows, Cols: cols}
						data, _ := quantized(t, r, types[j], rows, cols)
						if err := g.LoadWeight(w, data); err != nil {
							t.Fatal(err)
						}
						mm[j] = &ops.Op{Kind: ops.MatMul, Name: "mm", Weight: w}
					}
					steps := []ops.Step{{Tokens: make([]int32, 5), Pos: 0}, {Tokens: make([]int32, 1), Pos: 5}, {Tokens: make([]int32, 1), Pos: 6}}
					var xs [][]float32
					for _, st := range steps {
						xs = append(xs, verify.RandVec(r, len(st.Tokens)*cols))
					}
					// Each run has its own layer, so its own KV cache; a
					// step's six outputs in the order of the ops.
					run := func(layer int) [][6][]float32 {
						rq := &ops.Op{Kind: ops.RoPE, Name: "rope_q", Layer: layer, Rope: rp}
						rk := &ops.Op{Kind: ops.RoPE, Name: "rope_k", Layer: layer, Rope: rp}
						at := &ops.Op{Kind: ops.Attention, Name: "attn", Layer: layer, Attn: a}
						var outs [][6][]float32
						for i, st := range steps {
							n := len(st.Tokens)
							buf := func(n int) devices.Buffer {
								b, err := g.Alloc(n)
								if err != nil {
									t.Fatal(err)
								}
								return b
							}
							x := buf(n * cols)
							if err := g.Write(x, xs[i]); err != nil {
								t.Fatal(err)
							}
							qw, kw := n*v.heads*v.hd, n*v.kvh*v.hd
							bs := [6]devices.Buffer{buf(qw), buf(kw), buf(kw), buf(qw), buf(kw), buf(qw)}
							for _, c := range []struct {
								op  *ops.Op
								in  []devices.Buffer
								out devices.Buffer
							}{{mm[0], []devices.Buffer{x}, bs[0]}, {mm[1], []devices.Buffer{x}, bs[1]}, {mm[2], []devices.Buffer{x}, bs[2]},
								{rq, []devices.Buffer{bs[0]}, bs[3]}, {rk, []devices.Buffer{bs[1]}, bs[4]}, {at, []devices.Buffer{bs[3], bs[4], bs[2]}, bs[5]}} {
								if err := g.Run(c.op, st, c.in, c.out); err != nil {
									t.Fatal(err)
								}
							}
							var o [6][]float32
							for j, b := range bs {
								o[j] = make([]float32, b.Len())
								if err := g.Read(o[j], b); err != nil {
									t.Fatal(err)
								}
							}
							outs = append(outs, o)
							for _, b := range append(bs[:], x) {
								if err := g.Free(b); err != nil {
									t.Fatal(err)
								}
							}
						}
						return outs
					}
					layer := 2000 + 256*ci + 32*vi + 4*ti
					// The ops alone, on mvw_ (no rows loaded ahead: noPre).
					SetFuse(g, false)
					noPre = true
					plain := run(layer)
					noPre = false
					SetFuse(g, true)
					// The launch's units as built (v's rows one a unit, q's and
					// k's pairs at once where rope_rows can), then as before
					// (v's rows two a unit, every pair one row after the other).
					defer func(v, p bool) { ropeVPairs, ropePair2 = v, p }(ropeVPairs, ropePair2)
					for j, units := range [][2]bool{{false, true}, {true, false}} {
						ropeVPairs, ropePair2 = units[0], units[1]
						f0, p0 := MVRopes(g), mvPres(g)
						fused := run(layer + 1 + j)
						if f1 := MVRopes(g); f1-f0 != 2 {
							t.Fatalf("%d mat-vec launches with their rope over two decode steps, want 2", f1-f0)
						}
						// mvp_ where launchMV takes it: Q4_0's pairs at once,
						// Q4_K's where v is Q4_K too (mvrp_q4_k_q4_k) and
						// Q8_0's (mvrp_q8_0_q8_0), on Hopper, in a launch of
						// at most one block (sixteen warps, a unit each) a
						// multiprocessor.
						blocks := ((v.heads+v.kvh)*v.hd/2 + v.kvh*v.hd + 15) / 16
						want := 0
						pre := types[0] == quant.Q4_0 || types[0] == quant.Q4_K && types[2] == quant.Q4_K || types[0] == quant.Q8_0 && types[2] == quant.Q8_0
						if g.k.pdl && pre && !units[0] && units[1] && blocks <= g.sms {
							want = 2
						}
						if p1 := mvPres(g); p1-p0 != want {
							t.Fatalf("%d mvp_ launches over two decode steps, want %d (programmatic dependent launches %v, %d blocks)", p1-p0, want, g.k.pdl, blocks)
						}
						names := [6]string{"q", "k", "v", "rotated q", "rotated k", "attention"}
						for s := range steps {
							for o := range 6 {
								if !slices.Equal(plain[s][o], fused[s][o]) {
									e, i := verify.MaxErr(fused[s][o], func(i int) float64 { return float64(plain[s][o][i]) }, func(int) float64 { return 1 })
									t.Fatalf("v pairs %v, q and k pairs at once %v: step %d: %s fused [%d] = %g, alone %g (error %.3g): must be identical",
										units[0], units[1], s, names[o], i, fused[s][o][i], plain[s][o][i], e)
								}
							}
						}
					}
				})
			}
		}
	}
}

// mvPres is how many mvp_ launches d has made (launchMV).
func mvPres(d *Device) int {
	var n int
	d.do(func() error { n = d.stats.mvPre; return nil })
	return n
}
