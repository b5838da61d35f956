//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"hybrid/devices"
	"hybrid/devices/cpu"
	"hybrid/ops"
	"hybrid/quant"
	"hybrid/verify"
)

// Every op kind and every weight type is checked against the CPU device (the
// oracle) on random inputs; where the CPU rounds differently on purpose (f16
// KV cache, 8-bit activations for quantized weights) the GPU is also checked
// tightly against a float64 transcription of the definition, with the tolerance
// and its reason next to each check.

var (
	gpuOnce sync.Once
	gpuDev  *Device
	gpuErr  error
	cpuDev  = cpu.New("cpu", 0)
)

// gpu returns the first GPU's device, or skips the test where there is none.
func gpu(t testing.TB) *Device {
	t.Helper()
	gpuOnce.Do(func() {
		devs, err := Open()
		if err != nil {
			gpuErr = err
			return
		}
		gpuDev = devs[0].(*Device)
		for _, d := range devs[1:] {
			d.Close()
		}
	})
	if errors.Is(gpuErr, devices.ErrNotAvailable) {
		t.Skipf("skipping: %v", gpuErr)
	}
	if gpuErr != nil {
		t.Fatal(gpuErr)
	}
	return gpuDev
}

// runOp runs op on d (verify.RunOp), failing the test on an error.
func runOp(t *testing.T, d devices.Device, op *ops.Op, st ops.Step, data []byte, out int, ins ...[]float32) []float32 {
	t.Helper()
	res, err := verify.RunOp(d, op, st, data, out, ins)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// quantized returns rows×cols random weights in type typ and their exact
// decoding.
func quantized(t *testing.T, r *rand.Rand, typ quant.Type, rows, cols int) ([]byte, []float32) {
	t.Helper()
	data, deq, err := verify.RandomWeights(r, typ, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	return data, deq
}

func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	w := runtime.NumCPU()
	for g := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += w {
				f(i)
			}
		}()
	}
	wg.Wait()
}

var allTypes = []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q8_0, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q4_K, quant.Q5_K, quant.Q6_K,
	quant.Q2_K, quant.Q3_K, quant.IQ4_NL, quant.IQ4_XS}

// TestMatMul checks mat-vec (n = 1) and the batched kernel (n = 13: a whole
// tile of 8 and a partial one) for every weight type at Llama shapes.
//
// Against float64 dot products of the decoded weights: the kernel decodes
// exactly as quant.Dequantize and accumulates in f32, 64 sequential FMAs per
// lane for k = 2048 then a 5-level tree, so its rounding error is bounded by
// about (k/32 + 5)·2⁻²⁴·Σ|w·x|; 1e-5·Σ|w·x| covers k up to 5632 (176+5
// steps ≈ 1.1e-5 worst case, ~1e-6 in practice).
//
// Against the CPU device, by ‖gpu−cpu‖/‖cpu‖: 1e-5 for F32 (both f32); for
// F16, BF16 and the block types the CPU rounds activations as llama.cpp does
// (to f16, bf16, or 8-bit blocks: up to ~1% per product, averaging out over k),
// so 2e-2, the project's agreement rule for quantized models.
func TestMatMul(t *testing.T) {
	g := gpu(t)
	r := rand.New(rand.NewPCG(1, 2))
	// 300 rows: partial 64-row tiles of the tensor-core prefill, and rows
	// past the last whole block of eight rows in the mat-vecs.
	shapes := []struct{ rows, cols int }{{2048, 2048}, {5632, 2048}, {2048, 5632}, {300, 256}}
	for _, typ := range allTypes {
		shapes := shapes
		if typ == quant.F32 || typ == quant.F16 || typ == quant.BF16 {
			// Rows that end in part of a piece of 8, and F16 rows of 344
			// bytes, which the device re-strides to whole 16-byte vectors
			// (the shared stories260K's ffn_down).
			shapes = append(shapes, struct{ rows, cols int }{300, 172})
		}
		if typ.BlockSize() < 256 {
			// 800 columns: prefill chunks of 256 columns and a last one of
			// 32 (mmtChunk).
			shapes = append(shapes, struct{ rows, cols int }{300, 800})
		}
		for _, sh := range shapes {
			data, deq := quantized(t, r, typ, sh.rows, sh.cols)
			w := &ops.Weight{Name: fmt.Sprintf("w.%s.%dx%d", typ, sh.rows, sh.cols), Type: typ, Rows: sh.rows, Cols: sh.cols}
			ns := []int{1, 13, 77} // decode, matmul8, tensor cores split along k
			switch sh {
			case shapes[0]:
				ns = append(ns, 512) // four token tiles, split in eight
			case shapes[1]:
				ns = append(ns, 300) // 128-token tiles, the last one partial
			}
			if mvtTypes[typ] > 0 {
				ns = append(ns, 5, 27) // the tensor-core batch (mvt): a partial tile of 16, two tiles
			}
			type run struct {
				n    int
				q8   bool // the prefill on 8-bit tensor cores (useMMQ)
				dp4a bool // a batch of mvtTypes on mvb, not mvt (useMVT off)
				nk   int  // the prefill's narrower tiles (HYBRID_CUDA_MMT_NK)
				blas int  // the prefill on cuBLAS (blasMMT): 1 its rows decoded at once, 2 in slices of few rows
			}
			var runs []run
			for _, n := range ns {
				runs = append(runs, run{n, false, false, 0, 0})
				if n >= mmtMin && mmqTypes[typ] && sh.cols%mmqStep == 0 {
					runs = append(runs, run{n, true, false, 0, 0})
				}
				if n == 13 && mvtTypes[typ] > 0 {
					runs = append(runs, run{n, false, true, 0, 0})
				}
				if n == 77 || n == 512 {
					runs = append(runs, run{n, false, false, 32 + 32*(n/512), 0})
				}
				if n >= mmtMin && g.blas != nil && typ != quant.F32 && sh.cols%32 == 0 {
					runs = append(runs, run{n, false, false, 0, 1})
					if n == 77 {
						runs = append(runs, run{n, false, false, 0, 2})
					}
				}
			}
			for _, rn := range runs {
				n, q8 := rn.n, rn.q8
				name := fmt.Sprintf("%s/%dx%d/n=%d", typ, sh.rows, sh.cols, n)
				if q8 {
					name += "/mmq"
				}
				if rn.dp4a {
					name += "/mvb"
				}
				if rn.nk > 0 {
					name += fmt.Sprintf("/nk=%d", rn.nk)
				}
				if rn.blas > 0 {
					name += []string{"", "/cublas", "/cublas-slices"}[rn.blas]
				}
				t.Run(name, func(t *testing.T) {
					defer func(v, w bool, nk int, b bool, bm int, bs int64) {
						useMMQ, useMVT, mmtNK, g.useBlas, blasMin, blasScratchMax = v, w, nk, b, bm, bs
					}(useMMQ, useMVT, mmtNK, g.useBlas, blasMin, blasScratchMax)
					useMMQ, useMVT, mmtNK, g.useBlas, blasMin = q8, !rn.dp4a, rn.nk, rn.blas > 0, mmtMin
					if rn.blas == 2 {
						// 64 rows at a time: slices, the last one partial.
						blasScratchMax = 64 * 2 * int64(sh.cols)
					}
					x := verify.RandVec(r, n*sh.cols)
					op := &ops.Op{Kind: ops.MatMul, Name: "mm", Weight: w}
					got := runOp(t, g, op, ops.Step{}, data, n*sh.rows, x)
					want, mag := make([]float64, n*sh.rows), make([]float64, n*sh.rows)
					// The 8-bit tensor-core prefill (kernels/mmq.cu): its
					// error is at most that of its activations, half a
					// step of each block of 32's scale max|x|/127 per
					// element, so bound is Σ|w|·max|x|/254 over the blocks.
					var bound []float64
					if q8 {
						bound = make([]float64, n*sh.rows)
					}
					parallel(sh.rows, func(row int) {
						wr := deq[row*sh.cols : (row+1)*sh.cols]
						for tk := range n {
							var s, m, b float64
							xr := x[tk*sh.cols : (tk+1)*sh.cols]
							for k, wv := range wr {
								p := float64(wv) * float64(xr[k])
								s += p
								m += math.Abs(p)
							}
							if q8 {
								for k0 := 0; k0 < sh.cols; k0 += 32 {
									var amax, wsum float64
									for k := k0; k < k0+32; k++ {
										amax = max(amax, math.Abs(float64(xr[k])))
										wsum += math.Abs(float64(wr[k]))
									}
									b += wsum * amax / 254
								}
								bound[tk*sh.rows+row] = b
							}
							want[tk*sh.rows+row], mag[tk*sh.rows+row] = s, m
						}
					})
					ref := runOp(t, cpuDev, op, ops.Step{}, data, n*sh.rows, x)
					if n < mmtMin && chunk(typ) == 32 && stageBytes(typ, sh.cols) <= maxStage {
						// Decode of a block type, and batches under the
						// tensor cores': 8-bit activations, as the CPU
						// device quantizes them, with exact integer
						// block sums, so the two differ only in the
						// order a row's block terms are added.
						if n > 1 {
							// Each row of a batch exactly as that row's
							// decode step alone.
							for _, tk := range []int{0, n / 2, n - 1} {
								one := runOp(t, g, op, ops.Step{}, data, sh.rows, x[tk*sh.cols:(tk+1)*sh.cols])
								for i, v := range one {
									if got[tk*sh.rows+i] != v {
										t.Fatalf("row %d of %d, out[%d] = %g, alone %g: a batch must compute each row as decode does", tk, n, i, got[tk*sh.rows+i], v)
									}
								}
							}
						}
						if e, i := verify.MaxErr(got, func(i int) float64 { return float64(ref[i]) }, func(i int) float64 { return mag[i] }); e > 1e-5 {
							t.Fatalf("out[%d] = %g, cpu %g: error %.3g of Σ|w·x| > 1e-5", i, got[i], ref[i], e)
						} else {
							t.Logf("8-bit activations, vs cpu: max error %.2g of Σ|w·x|", e)
						}
					} else if q8 {
						worst, at := 0.0, 0
						for i := range got {
							over := math.Abs(float64(got[i])-want[i]) / (bound[i] + 1e-5*mag[i])
							if over > worst {
								worst, at = over, i
							}
						}
						if worst > 1 {
							t.Fatalf("out[%d] = %g, want %g: error %.3g, over the 8-bit activations' bound %.3g", at, got[at], want[at], math.Abs(float64(got[at])-want[at]), bound[at]+1e-5*mag[at])
						}
						t.Logf("8-bit tensor cores vs float64: at most %.2f of the bound", worst)
					} else {
						tol := 1e-5
						if n >= mmtMin && typ != quant.F32 && sh.cols%32 == 0 {
							// Tensor cores: weights and activations
							// rounded to f16 (2^-11 each), f32 sums.
							tol = 2e-3
						}
						if e, i := verify.MaxErr(got, func(i int) float64 { return want[i] }, func(i int) float64 { return mag[i] }); e > tol {
							t.Fatalf("out[%d] = %g, want %g: error %.3g of Σ|w·x| > %g", i, got[i], want[i], e, tol)
						} else {
							t.Logf("vs float64: max error %.2g of Σ|w·x|", e)
						}
					}
					tol := 2e-2
					if typ == quant.F32 {
						tol = 1e-5
					}
					if e := verify.NormRel(got, ref); e > tol {
						t.Fatalf("‖gpu−cpu‖/‖cpu‖ = %.3g > %g", e, tol)
					} else {
						t.Logf("vs cpu: ‖gpu−cpu‖/‖cpu‖ = %.2g", e)
					}
				})
			}
		}
	}
}

// TestEmbed checks the token gather for every type: both devices decode with
// quant.Dequantize's roundings, so they must agree exactly.
func TestEmbed(t *testing.T) {
	g := gpu(t)
	r := rand.New(rand.NewPCG(3, 4))
	const vocab = 1000
	st := ops.Step{Tokens: []int32{5, 999, 0, 17, 5, 123}, Pos: 3}
	for _, typ := range allTypes {
		cols := 2048
		if typ == quant.F32 || typ == quant.F16 || typ == quant.BF16 {
			cols = 172 // rows ending in part of a piece of 8
		}
		t.Run(typ.String(), func(t *testing.T) {
			data, _ := quantized(t, r, typ, vocab, cols)
			op := &ops.Op{Kind: ops.Embed, Name: "embed", Weight: &ops.Weight{Name: "tok." + typ.String(), Type: typ, Rows: vocab, Cols: cols}}
			got := runOp(t, g, op, st, data, len(st.Tokens)*cols)
			want := runOp(t, cpuDev, op, st, data, len(st.Tokens)*cols)
			if e, i := verify.MaxErr(got, func(i int) float64 { return float64(want[i]) }, func(int) float64 { return 1 }); e != 0 {
				t.Fatalf("out[%d] = %g, want %g", i, got[i], want[i])
			}
		})
	}
	const cols = 172 // tok.F32 as the loop loaded it
	bad := ops.Step{Tokens: []int32{vocab}}
	op := &ops.Op{Kind: ops.Embed, Name: "embed", Weight: &ops.Weight{Name: "tok.F32", Type: quant.F32, Rows: vocab, Cols: cols}}
	ob, _ := g.Alloc(cols)
	if err := g.Run(op, bad, nil, ob); err == nil {
		t.Fatal("token id past the vocabulary was accepted")
	}
	// An error found on the device's thread comes back from the next Sync.
	short := &ops.Op{Kind: ops.Embed, Name: "embed", Weight: op.Weight}
	small, _ := g.Alloc(cols)
	if err := g.Run(short, ops.Step{Tokens: []int32{1, 2}}, nil, small); err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(); err == nil {
		t.Fatal("two tokens into a one-row output: no error")
	} else {
		t.Logf("deferred error: %v", err)
	}
	if err := g.Sync(); err != nil {
		t.Fatalf("the error was reported twice: %v", err)
	}
}

// TestElementwise checks rms_norm, silu_mul, add and last_row.
func TestElementwise(t *testing.T) {
	g := gpu(t)
	r := rand.New(rand.NewPCG(5, 6))
	const rows, cols = 7, 2048
	a, b := verify.RandVec(r, rows*cols), verify.RandVec(r, rows*cols)
	rel := func(want []float32) func(int) float64 {
		return func(i int) float64 { return math.Abs(float64(want[i])) + 1e-30 }
	}
	t.Run("rms_norm", func(t *testing.T) {
		// f32 tree sum of squares against the CPU's float64 sum: ~1e-7
		// relative in the scale, then two f32 products: 1e-5 relative.
		norm := verify.RandVec(r, cols)
		op := &ops.Op{Kind: ops.RMSNorm, Name: "norm", Eps: 1e-5, Weight: &ops.Weight{Name: "norm", Type: quant.F32, Rows: 1, Cols: cols}}
		data := make([]byte, 4*cols)
		quant.Quantize(quant.F32, norm, data)
		got := runOp(t, g, op, ops.Step{}, data, rows*cols, a)
		want := runOp(t, cpuDev, op, ops.Step{}, data, rows*cols, a)
		if e, i := verify.MaxErr(got, func(i int) float64 { return float64(want[i]) }, rel(want)); e > 1e-5 {
			t.Fatalf("out[%d] = %g, want %g (relative error %.3g > 1e-5)", i, got[i], want[i], e)
		}
	})
	t.Run("silu_mul", func(t *testing.T) {
		// CUDA's expf is within 2 ulp and the CPU's within ~1.5: a few ulp
		// after the division and product, 1e-6 relative.
		op := &ops.Op{Kind: ops.SiLUMul, Name: "silu"}
		got := runOp(t, g, op, ops.Step{}, nil, rows*cols, a, b)
		want := runOp(t, cpuDev, op, ops.Step{}, nil, rows*cols, a, b)
		if e, i := verify.MaxErr(got, func(i int) float64 { return float64(want[i]) }, rel(want)); e > 1e-6 {
			t.Fatalf("out[%d] = %g, want %g (relative error %.3g > 1e-6)", i, got[i], want[i], e)
		}
	})
	t.Run("add", func(t *testing.T) {
		op := &ops.Op{Kind: ops.Add, Name: "add"}
		got := runOp(t, g, op, ops.Step{}, nil, rows*cols, a, b)
		want := runOp(t, cpuDev, op, ops.Step{}, nil, rows*cols, a, b)
		if !slices.Equal(got, want) {
			t.Fatal("add differs from the CPU's (one f32 rounding each: must be exact)")
		}
	})
	t.Run("last_row", func(t *testing.T) {
		op := &ops.Op{Kind: ops.LastRow, Name: "last"}
		got := runOp(t, g, op, ops.Step{}, nil, cols, a)
		if !slices.Equal(got, a[(rows-1)*cols:]) {
			t.Fatal("last_row is not the input's last row")
		}
	})
}

// TestRoPE checks rope at several positions, with all and half the features
// rotated. θ is formed identically on both devices; CUDA's sincosf is within
// 1-2 ulp of glibc's, so outputs agree to a few ulp of the input's size:
// 2e-6 of max|x|.
func TestRoPE(t *testing.T) {
	g := gpu(t)
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct{ rows, pos, dims int }{{7, 0, 64}, {7, 90, 64}, {3, 4000, 64}, {5, 17, 32}} {
		t.Run(fmt.Sprintf("pos=%d/dims=%d", c.pos, c.dims), func(t *testing.T) {
			const heads, hd = 32, 64
			x := verify.RandVec(r, c.rows*heads*hd)
			op := &ops.Op{Kind: ops.RoPE, Name: "rope", Rope: ops.RopeParams{HeadDim: hd, Dims: c.dims, Base: 10000}}
			st := ops.Step{Tokens: make([]int32, c.rows), Pos: c.pos}
			got := runOp(t, g, op, st, nil, len(x), x)
			want := runOp(t, cpuDev, op, st, nil, len(x), x)
			scale := verify.MaxAbs(x)
			if e, i := verify.MaxErr(got, func(i int) float64 { return float64(want[i]) }, func(int) float64 { return scale }); e > 2e-6 {
				t.Fatalf("out[%d] = %g, want %g (error %.3g of max|x| > 2e-6)", i, got[i], want[i], e)
			} else {
				t.Logf("max error %.2g of max|x|", e)
			}
		})
	}
}

// TestAttention runs a prefill of 90 tokens, a decode step, a step of 5 and
// one of 32 over one layer's cache (32 query heads on 4 KV heads of 64,
// context 128).
//
// Against float64 softmax attention over the f32 keys and values: f32 dot
// products of 64 terms, expf and a weighted sum over ≤ 128 positions, 1e-5 of
// max|v|; steps of fattnMin rows or more run on tensor cores with the query
// and the probabilities rounded to f16 (11 bits, ~4.9e-4 relative each), 2e-3.
// Against the CPU device, whose cache is f16 (keys and values
// rounded to 11 bits, ~2.4e-4 relative) and whose decode path also rounds the
// query and the value accumulator to f16: 5e-3 of max|v|.
func TestAttention(t *testing.T) {
	g := gpu(t)
	r := rand.New(rand.NewPCG(9, 10))
	const heads, kvHeads, hd, ctx = 32, 4, 64, 128
	a := ops.AttnParams{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Context: ctx}
	op := &ops.Op{Kind: ops.Attention, Name: "attn", Layer: 7, Attn: a}
	kdim := kvHeads * hd
	var ks, vs []float32 // every position's keys and values so far, rounded to f16 as the cache holds them
	round16 := func(x []float32) []float32 {
		out := make([]float32, len(x))
		for i, v := range x {
			out[i] = quant.F16ToF32(quant.F32ToF16(v))
		}
		return out
	}
	for _, st := range []ops.Step{{Tokens: make([]int32, 90), Pos: 0}, {Tokens: make([]int32, 1), Pos: 90}, {Tokens: make([]int32, 5), Pos: 91}, {Tokens: make([]int32, 32), Pos: 96}} {
		t.Run(fmt.Sprintf("pos=%d/n=%d", st.Pos, len(st.Tokens)), func(t *testing.T) {
			n := len(st.Tokens)
			q, k, v := verify.RandVec(r, n*heads*hd), verify.RandVec(r, n*kdim), verify.RandVec(r, n*kdim)
			ks, vs = append(ks, round16(k)...), append(vs, round16(v)...)
			got := runOp(t, g, op, st, nil, len(q), q, k, v)
			cpuOut := runOp(t, cpuDev, op, st, nil, len(q), q, k, v)
			want := verify.AttentionRef(q, ks, vs, a, st.Pos)
			vmax := verify.MaxAbs(vs)
			tol := 1e-5
			if n >= fattnMin {
				tol = 2e-3
			}
			if e, i := verify.MaxErr(got, func(i int) float64 { return want[i] }, func(int) float64 { return vmax }); e > tol {
				t.Fatalf("out[%d] = %g, want %g (error %.3g of max|v| > %g)", i, got[i], want[i], e, tol)
			} else {
				t.Logf("vs float64: max error %.2g of max|v|", e)
			}
			if e, i := verify.MaxErr(got, func(i int) float64 { return float64(cpuOut[i]) }, func(int) float64 { return vmax }); e > 5e-3 {
				t.Fatalf("out[%d] = %g, cpu %g (error %.3g of max|v| > 5e-3)", i, got[i], cpuOut[i], e)
			} else {
				t.Logf("vs cpu (f16 cache): max error %.2g of max|v|", e)
			}
		})
	}
}

// TestPromptAttention checks the tensor-core prompt attention (fattn_d64,
// fattn_d128) over several tiles of queries and keys: a prompt of 300 rows
// from position 0, then 130 more after them, for both head sizes with
// grouped queries, against float64 attention over the f16-rounded cache
// within 2e-3 of max|v| (the query and the probabilities are rounded to f16).
func TestPromptAttention(t *testing.T) {
	g := gpu(t)
	r := rand.New(rand.NewPCG(31, 32))
	for _, a := range []ops.AttnParams{{Heads: 32, KVHeads: 4, HeadDim: 64, Context: 512}, {Heads: 16, KVHeads: 8, HeadDim: 128, Context: 512}} {
		t.Run(fmt.Sprintf("head=%d", a.HeadDim), func(t *testing.T) {
			op := &ops.Op{Kind: ops.Attention, Name: "attn", Layer: 40 + a.HeadDim, Attn: a}
			kdim := a.KVHeads * a.HeadDim
			var ks, vs []float32
			for _, st := range []ops.Step{{Tokens: make([]int32, 300), Pos: 0}, {Tokens: make([]int32, 130), Pos: 300}} {
				n := len(st.Tokens)
				q, k, v := verify.RandVec(r, n*a.Heads*a.HeadDim), verify.RandVec(r, n*kdim), verify.RandVec(r, n*kdim)
				for _, x := range [][]float32{k, v} {
					for i := range x {
						x[i] = quant.F16ToF32(quant.F32ToF16(3 * x[i]))
					}
				}
				ks, vs = append(ks, k...), append(vs, v...)
				got := runOp(t, g, op, st, nil, len(q), q, k, v)
				want := verify.AttentionRef(q, ks, vs, a, st.Pos)
				vmax := verify.MaxAbs(vs)
				e, i := verify.MaxErr(got, func(i int) float64 { return want[i] }, func(int) float64 { return vmax })
				if e > 2e-3 {
					t.Fatalf("pos %d: out[%d] = %g, want %g (error %.3g of max|v| > 2e-3)", st.Pos, i, got[i], want[i], e)
				}
				t.Logf("pos %d, %d rows: max error %.2g of max|v|", st.Pos, n, e)
			}
		})
	}
}

// TestSplitAttention checks steps of a few rows whose span is split over
// several blocks (flash-decoding: parts of at least 256 keys, at most
// attParts, by query head; of at least 128, at most attgParts, by KV head):
// a step of five rows from position 0 (one part, each row its own span), a
// step of one row and one of three after a 4100-token prompt (every part
// used), and one of one row at 300 (two or three parts), against float64
// attention within 1e-5 of max|v|, as the unsplit kernel.
func TestSplitAttention(t *testing.T) {
	g := gpu(t)
	r := rand.New(rand.NewPCG(33, 34))
	// Head sizes of the three kernels (attention_t2, _t4 and the general
	// one), one that is not a multiple of 64, and one not of 8 (no 16-byte
	// key loads); grouped and plain multi-head attention. Head sizes 64
	// and 128 run by KV head (attention_g): groups of 1, 2, 3 (a block of
	// four with one head empty), 4, 7 (Qwen2.5-0.5B's), 8 (TinyLlama's)
	// and 16 (two blocks of eight a KV head).
	for c, a := range []ops.AttnParams{
		{Heads: 8, KVHeads: 2, HeadDim: 64, Context: 4200}, {Heads: 4, KVHeads: 4, HeadDim: 128, Context: 4200},
		{Heads: 6, KVHeads: 2, HeadDim: 80, Context: 4200}, {Heads: 2, KVHeads: 1, HeadDim: 256, Context: 4200},
		{Heads: 4, KVHeads: 2, HeadDim: 36, Context: 4200},
		{Heads: 32, KVHeads: 4, HeadDim: 64, Context: 4200}, {Heads: 14, KVHeads: 2, HeadDim: 64, Context: 4200},
		{Heads: 32, KVHeads: 2, HeadDim: 64, Context: 4200}, {Heads: 8, KVHeads: 4, HeadDim: 128, Context: 4200},
		{Heads: 12, KVHeads: 4, HeadDim: 128, Context: 4200}, {Heads: 64, KVHeads: 8, HeadDim: 128, Context: 4200},
	} {
		t.Run(fmt.Sprintf("heads=%d/%d,dim=%d", a.Heads, a.KVHeads, a.HeadDim), func(t *testing.T) {
			op := &ops.Op{Kind: ops.Attention, Name: "attn", Layer: 300 + c, Attn: a}
			kdim := a.KVHeads * a.HeadDim
			var ks, vs []float32
			step := func(st ops.Step, check bool) {
				n := len(st.Tokens)
				q, k, v := verify.RandVec(r, n*a.Heads*a.HeadDim), verify.RandVec(r, n*kdim), verify.RandVec(r, n*kdim)
				for _, x := range [][]float32{k, v} {
					for i := range x {
						x[i] = quant.F16ToF32(quant.F32ToF16(x[i]))
					}
				}
				ks, vs = append(ks, k...), append(vs, v...)
				got := runOp(t, g, op, st, nil, len(q), q, k, v)
				if !check {
					return
				}
				want := verify.AttentionRef(q, ks, vs, a, st.Pos)
				vmax := verify.MaxAbs(vs)
				e, i := verify.MaxErr(got, func(i int) float64 { return want[i] }, func(int) float64 { return vmax })
				if e > 1e-5 {
					t.Fatalf("pos %d, %d rows: out[%d] = %g, want %g (error %.3g of max|v| > 1e-5)", st.Pos, n, i, got[i], want[i], e)
				}
				t.Logf("pos %d, %d rows: max error %.2g of max|v|", st.Pos, n, e)
			}
			step(ops.Step{Tokens: make([]int32, 5), Pos: 0}, true)
			step(ops.Step{Tokens: make([]int32, 294), Pos: 5}, false)
			step(ops.Step{Tokens: make([]int32, 1), Pos: 299}, true)
			step(ops.Step{Tokens: make([]int32, 3800), Pos: 300}, false)
			step(ops.Step{Tokens: make([]int32, 1), Pos: 4100}, true)
			step(ops.Step{Tokens: make([]int32, 3), Pos: 4101}, true)
		})
	}
}

// TestDevice checks what the interface promises besides ops: Info, Supports,
// views sharing memory, writes and reads of part of a buffer, and errors.
func TestDevice(t *testing.T) {
	g := gpu(t)
	info := g.Info()
	t.Logf("%s: %s (memory %d bytes)", info.Name, info.Detail, info.Memory)
	if info.Kind != "cuda" || info.Name != "cuda:0" || info.Memory <= 0 {
		t.Fatalf("info %+v", info)
	}
	if err := g.Supports(&ops.Op{Kind: ops.MatMul, Name: "q8k", Weight: &ops.Weight{Type: quant.Q8_K, Rows: 8, Cols: 256}}); !errors.Is(err, devices.ErrUnsupported) {
		t.Fatalf("Q8_K: %v", err)
	}
	b, err := g.Alloc(100)
	if err != nil {
		t.Fatal(err)
	}
	v, err := g.View(b, 10)
	if err != nil || v.Len() != 10 {
		t.Fatal(v, err)
	}
	src := make([]float32, 100)
	for i := range src {
		src[i] = float32(i)
	}
	if err := g.Write(b, src); err != nil {
		t.Fatal(err)
	}
	if err := g.Write(v, []float32{-1, -2}); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 100)
	if err := g.Read(got, b); err != nil {
		t.Fatal(err)
	}
	if got[0] != -1 || got[1] != -2 || got[2] != 2 || got[99] != 99 {
		t.Fatalf("view does not share memory: %v", got[:4])
	}
	if err := g.Write(v, src); err == nil {
		t.Fatal("a write past a view's end was accepted")
	}
	if _, err := g.View(b, 101); err == nil {
		t.Fatal("a view past the buffer's end was accepted")
	}
	if g.MemoryUsed() <= 0 {
		t.Fatal("no memory counted")
	}
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	host := cpu.New("cpu", 1)
	defer host.Close()
	if r := verify.Allocator(g, host); r.Status != verify.Pass {
		t.Fatalf("allocator: %s", r.Note)
	}
}

// TestBandwidth measures what the report needs: mat-vec bandwidth of weight
// bytes at 5632×2048 (copies rotated past the 50 MB L2; GPU time by events)
// and the cost of one small op through Run, with and without a Sync.
func TestBandwidth(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	g := gpu(t)
	r := rand.New(rand.NewPCG(11, 12))
	const rows, cols = 5632, 2048
	x, err := g.Alloc(cols)
	if err != nil {
		t.Fatal(err)
	}
	g.Write(x, verify.RandVec(r, cols))
	y, _ := g.Alloc(rows)
	// Batches of 2..16 rows (the batched decode step's mat-vecs) and 32
	// (the tensor cores').
	batches := []int{2, 4, 8, 16, 32}
	xn, yn := map[int]devices.Buffer{}, map[int]devices.Buffer{}
	for _, n := range batches {
		xn[n], _ = g.Alloc(n * cols)
		g.Write(xn[n], verify.RandVec(r, n*cols))
		yn[n], _ = g.Alloc(n * rows)
	}
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.Q2_K, quant.Q3_K, quant.IQ4_NL, quant.IQ4_XS, quant.F16, quant.F32} {
		data, _ := quantized(t, r, typ, rows, cols)
		copies := max(4, int(256<<20/len(data)))
		var opsList []*ops.Op
		for c := range copies {
			w := &ops.Weight{Name: fmt.Sprintf("bw.%s.%d", typ, c), Type: typ, Rows: rows, Cols: cols}
			if err := g.LoadWeight(w, data); err != nil {
				t.Fatal(err)
			}
			opsList = append(opsList, &ops.Op{Kind: ops.MatMul, Name: "bw", Weight: w})
		}
		timeRuns := func(in, out *Buffer, reps int) time.Duration {
			var el time.Duration
			err := g.do(func() error {
				for i := range copies { // warm up
					if err := g.run(opsList[i], ops.Step{}, g.weights[opsList[i].Weight.Name], []*Buffer{in}, out); err != nil {
						return err
					}
				}
				var err error
				el, err = timeOnGPU(func() error {
					for i := range reps {
						if err := g.run(opsList[i%copies], ops.Step{}, g.weights[opsList[i%copies].Weight.Name], []*Buffer{in}, out); err != nil {
							return err
						}
					}
					return nil
				})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return el / time.Duration(reps)
		}
		per := timeRuns(x.(*Buffer), y.(*Buffer), 400)
		line := fmt.Sprintf("BANDWIDTH %-5s %dx%d: mat-vec %6.1f µs = %5.0f GB/s of weights (%d copies, %d MB); batches:",
			typ, rows, cols, per.Seconds()*1e6, float64(len(data))/per.Seconds()/1e9, copies, copies*len(data)>>20)
		for _, n := range batches {
			pn := timeRuns(xn[n].(*Buffer), yn[n].(*Buffer), 100)
			line += fmt.Sprintf(" n=%d %.1f µs (%.2f× n=1)", n, pn.Seconds()*1e6, pn.Seconds()/per.Seconds())
		}
		if mvtTypes[typ] > 0 {
			// The same batches with the weight rows read where they are
			// (not staged in shared memory), for the staging's gain.
			line += "; unstaged:"
			noMVTStage = true
			for _, n := range batches[:len(batches)-1] {
				pn := timeRuns(xn[n].(*Buffer), yn[n].(*Buffer), 100)
				line += fmt.Sprintf(" n=%d %.1f µs", n, pn.Seconds()*1e6)
			}
			noMVTStage = false
			// The same batches on dp4a (mvb), for the tensor cores' gain.
			line += "; on mvb:"
			useMVT = false
			for _, n := range batches[:len(batches)-1] {
				pn := timeRuns(xn[n].(*Buffer), yn[n].(*Buffer), 100)
				line += fmt.Sprintf(" n=%d %.1f µs", n, pn.Seconds()*1e6)
			}
			useMVT = true
		}
		t.Log(line)
	}

	// Device-to-device copy bandwidth, the ceiling decode is measured
	// against: 512 MiB copied 10 times, bytes read plus bytes written.
	const cp = 512 << 20
	var src, dst *Buffer
	if s, err := g.Alloc(cp / 4); err == nil {
		src = s.(*Buffer)
	}
	if d, err := g.Alloc(cp / 4); err == nil {
		dst = d.(*Buffer)
	}
	if src == nil || dst == nil {
		t.Fatal("no memory for the copy test")
	}
	var el time.Duration
	err = g.do(func() error {
		if err := g.stream.copyDtoD(uintptr(dst.ptr), uintptr(src.ptr), cp); err != nil {
			return err
		}
		var err error
		el, err = timeOnGPU(func() error {
			for range 10 {
				if err := g.stream.copyDtoD(uintptr(dst.ptr), uintptr(src.ptr), cp); err != nil {
					return err
				}
			}
			return nil
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("COPY device to device, 512 MiB: %.0f GB/s counting bytes read and written", 2*10*float64(cp)/el.Seconds()/1e9)

	// Launch costs of an add of 2048 floats.
	a, _ := g.Alloc(2048)
	g.Write(a, verify.RandVec(r, 2048))
	o, _ := g.Alloc(2048)
	add := &ops.Op{Kind: ops.Add, Name: "add"}
	in := []devices.Buffer{a, a}
	const reps = 2000
	med := func(f func()) time.Duration {
		var ts []time.Duration
		for range 200 {
			t0 := time.Now()
			f()
			ts = append(ts, time.Since(t0))
		}
		slices.Sort(ts)
		return ts[len(ts)/2]
	}
	runSync := med(func() { g.Run(add, ops.Step{}, in, o); g.Sync() })
	t0 := time.Now()
	for range reps {
		g.Run(add, ops.Step{}, in, o)
	}
	g.Sync()
	runOnly := time.Since(t0) / reps
	var raw time.Duration
	g.do(func() error {
		ai, oi := a.(*Buffer), o.(*Buffer)
		t0 := time.Now()
		for range reps {
			if err := g.run(add, ops.Step{}, nil, []*Buffer{ai, ai}, oi); err != nil {
				return err
			}
		}
		raw = time.Since(t0) / reps
		return nil
	})
	g.Sync()
	syncOnly := med(func() { g.Sync() })
	t.Logf("LAUNCH add of 2048: Run+Sync %.1f µs (median); Run back to back %.1f µs each; launch on the device thread %.1f µs; empty Sync %.1f µs",
		runSync.Seconds()*1e6, runOnly.Seconds()*1e6, raw.Seconds()*1e6, syncOnly.Seconds()*1e6)
}

// TestArgmax checks ReadArgmax against the loop that defines it (move to i
// where x[i] > x[best]) on random rows of several lengths, with the largest
// value repeated (the first wins), NaNs (never picked; at 0, 0 is),
// infinities and signed zeros.
func TestArgmax(t *testing.T) {
	g := gpu(t)
	r := rand.New(rand.NewPCG(31, 32))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	type row struct {
		name string
		x    []float32
	}
	var rows []row
	for _, n := range []int{1, 5, 1023, 1025, 32000, 151936} {
		rows = append(rows, row{fmt.Sprintf("random %d", n), verify.RandVec(r, n)})
	}
	tie := verify.RandVec(r, 32000)
	for _, i := range []int{31999, 7000, 7001, 20000} {
		tie[i] = 9
	}
	rows = append(rows, row{"ties", tie})
	nanIn := verify.RandVec(r, 4096)
	nanIn[100], nanIn[3000] = nan, nan
	rows = append(rows, row{"NaNs inside", nanIn})
	nan0 := verify.RandVec(r, 4096)
	nan0[0] = nan
	rows = append(rows, row{"NaN at 0", nan0})
	allInf := make([]float32, 3000)
	for i := range allInf {
		allInf[i] = -inf
	}
	rows = append(rows, row{"all -inf", allInf})
	zeros := make([]float32, 2048)
	zeros[5] = float32(math.Copysign(0, -1))
	rows = append(rows, row{"signed zeros", zeros})
	for _, c := range rows {
		t.Run(c.name, func(t *testing.T) {
			want := 0
			for i := range c.x {
				if c.x[i] > c.x[want] {
					want = i
				}
			}
			b, err := g.Alloc(len(c.x) + 3) // longer than n: only n are looked at
			if err != nil {
				t.Fatal(err)
			}
			defer g.Free(b)
			if err := g.Write(b, append(slices.Clone(c.x), inf, inf, inf)); err != nil {
				t.Fatal(err)
			}
			var ids [1]int32
			if err := g.ReadArgmax(b, len(c.x), ids[:]); err != nil {
				t.Fatal(err)
			}
			if got := ids[0]; int(got) != want {
				t.Fatalf("argmax %d (%g), want %d (%g)", got, c.x[got], want, c.x[want])
			}
		})
	}
	// Every row of 1000 at once (a batched step's picks), the cases of
	// 1000 elements and more cut to their first 1000.
	const n = 1000
	var all []float32
	var want []int32
	for _, c := range rows {
		if len(c.x) < n {
			continue
		}
		w := 0
		for i := range c.x[:n] {
			if c.x[i] > c.x[w] {
				w = i
			}
		}
		all, want = append(all, c.x[:n]...), append(want, int32(w))
	}
	b, err := g.Alloc(len(all))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Free(b)
	if err := g.Write(b, all); err != nil {
		t.Fatal(err)
	}
	ids := make([]int32, len(want))
	if err := g.ReadArgmax(b, n, ids); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("rows' argmax %v, want %v", ids, want)
	}
	if err := g.ReadArgmax(b, n, make([]int32, len(want)+1)); err == nil {
		t.Fatal("an argmax of rows past the buffer's end was taken")
	}
	if err := g.ReadArgmax(b, len(all)+1, ids[:1]); err == nil {
		t.Fatal("an argmax past the buffer's end was taken")
	}
}

// topRef is ReadTopK's definition: row x's m largest, largest first and
// equal ones (-0 as +0) by lower index; nil if x holds a NaN.
func topRef(x []float32, m int) []devices.Pick {
	idx := make([]int, len(x))
	for i := range idx {
		if x[i] != x[i] {
			return nil
		}
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case x[a] > x[b]:
			return -1
		case x[a] < x[b]:
			return 1
		}
		return 0
	})
	p := make([]devices.Pick, m)
	for i := range p {
		p[i] = devices.Pick{Index: int32(idx[i]), Value: x[idx[i]]}
	}
	return p
}

// TestTopK checks ReadTopK against topRef on random rows of several
// lengths and m, rows of many equal values (so that the m-th largest is
// one of many), all equal, spread as logits are (their largest ranked
// directly), infinities, signed zeros and NaNs, one row at a time and many
// at once.
func TestTopK(t *testing.T) {
	g := gpu(t)
	r := rand.New(rand.NewPCG(41, 42))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	type row struct {
		name string
		x    []float32
	}
	var rows []row
	for _, n := range []int{1, 5, 300, 1023, 1025, 32000, 151936} {
		rows = append(rows, row{fmt.Sprintf("random %d", n), verify.RandVec(r, n)})
	}
	coarse := verify.RandVec(r, 32000)
	for i := range coarse {
		coarse[i] = float32(math.Round(float64(coarse[i]) * 4)) // a few dozen distinct values
	}
	rows = append(rows, row{"many equal", coarse}, row{"all zero", make([]float32, 5000)})
	// Spread like logits: few keys share the largest ones' sign and
	// exponent, so they are ranked directly after the first pass.
	for _, n := range []int{32000, 151936} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64() * 3)
		}
		rows = append(rows, row{fmt.Sprintf("spread %d", n), x})
	}
	signed := make([]float32, 3000)
	for i := range signed {
		if i%3 == 0 {
			signed[i] = float32(math.Copysign(0, -1))
		}
	}
	signed[2000], signed[2001] = -1, 1
	rows = append(rows, row{"signed zeros", signed})
	infs := verify.RandVec(r, 4096)
	infs[10], infs[4000], infs[7] = inf, inf, -inf
	for i := 100; i < 400; i++ {
		infs[i] = -inf
	}
	rows = append(rows, row{"infinities", infs})
	nanIn := verify.RandVec(r, 4096)
	nanIn[1500] = nan
	rows = append(rows, row{"NaN", nanIn})
	read := func(t *testing.T, x []float32, n, m int) []devices.Pick {
		b, err := g.Alloc(len(x) + 3) // longer than the rows: only they are looked at
		if err != nil {
			t.Fatal(err)
		}
		defer g.Free(b)
		if err := g.Write(b, append(slices.Clone(x), inf, inf, inf)); err != nil {
			t.Fatal(err)
		}
		p := make([]devices.Pick, len(x)/n*m)
		if err := g.ReadTopK(b, n, m, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	check := func(t *testing.T, x []float32, m int, got []devices.Pick) {
		want := topRef(x, m)
		if want == nil {
			if got[0].Index != -1 {
				t.Fatalf("top %d of a row with a NaN: first pick %v, want index -1", m, got[0])
			}
			return
		}
		for i := range want {
			if got[i].Index != want[i].Index || math.Float32bits(got[i].Value) != math.Float32bits(want[i].Value) {
				t.Fatalf("top %d: pick %d is %v, want %v", m, i, got[i], want[i])
			}
		}
	}
	for _, c := range rows {
		for _, m := range []int{1, 2, 40, 104, devices.MaxPicks} {
			if m > len(c.x) {
				continue
			}
			t.Run(fmt.Sprintf("%s/m=%d", c.name, m), func(t *testing.T) {
				check(t, c.x, m, read(t, c.x, len(c.x), m))
			})
		}
	}
	// Every row of 3000 at once (a batched step's picks), the cases of
	// 3000 elements and more cut to their first 3000.
	const n, m = 3000, 64
	var all []float32
	for _, c := range rows {
		if len(c.x) >= n {
			all = append(all, c.x[:n]...)
		}
	}
	got := read(t, all, n, m)
	for i := range len(all) / n {
		check(t, all[i*n:(i+1)*n], m, got[i*m:(i+1)*m])
	}
	// Time: the picks of 16 rows of 32000 (a batched sampled step's)
	// against reading the rows back.
	big := verify.RandVec(r, 16*32000)
	bb, err := g.Alloc(len(big))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Free(bb)
	if err := g.Write(bb, big); err != nil {
		t.Fatal(err)
	}
	p := make([]devices.Pick, 16*40)
	t0 := time.Now()
	for range 50 {
		if err := g.ReadTopK(bb, 32000, 40, p); err != nil {
			t.Fatal(err)
		}
	}
	tk := time.Since(t0) / 50
	t0 = time.Now()
	for range 50 {
		if err := g.Read(big, bb); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("16 rows of 32000: ReadTopK of 40 a row %v, Read of the rows %v", tk, time.Since(t0)/50)
	b, err := g.Alloc(len(all))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Free(b)
	for _, c := range []struct {
		n, m, picks int
	}{{n, m, len(all)/n*m + m}, {n, devices.MaxPicks + 1, devices.MaxPicks + 1}, {10, 11, 11}, {n, 0, 1}, {n, m, m + 1}} {
		if err := g.ReadTopK(b, c.n, c.m, make([]devices.Pick, c.picks)); err == nil {
			t.Errorf("top %d of rows of %d into %d picks was taken", c.m, c.n, c.picks)
		}
	}
}

// BenchmarkPick times a decode step's pick from a row of 32000 logits on
// the GPU, eight queued and then read back (as a chain holds them): the
// greedy pick (PickNext's argmax_next) and the sampled one at llama.cpp's
// default settings (SampleNext's sample_next), per pick.
func BenchmarkPick(b *testing.B) {
	g := gpu(b)
	const n = 32000
	buf, err := g.Alloc(n)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Free(buf)
	if err := g.Write(buf, verify.RandVec(rand.New(rand.NewPCG(1, 2)), n)); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		pick func() error
	}{
		{"greedy", func() error { return g.PickNext(buf, n) }},
		{"sampled", func() error { return g.SampleNext(buf, n, devices.SampleSpec{K: 40, TopP: 0.95, Temp: 0.8, Draw: 0.5}) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i += devices.MaxChained {
				for range devices.MaxChained {
					if err := c.pick(); err != nil {
						b.Fatal(err)
					}
				}
				for range devices.MaxChained {
					if _, err := g.NextPick(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
