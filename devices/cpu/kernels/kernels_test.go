package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"hybrid/quant"
)

var allTypes = []quant.Type{
	quant.F32, quant.F16, quant.BF16, quant.Q8_0, quant.Q4_0, quant.Q4_1,
	quant.Q5_0, quant.Q5_1, quant.Q4_K, quant.Q5_K, quant.Q6_K,
}

// halfOffsets lists where each quantized type keeps f16 scales in a block, so
// randomWeights can make random blocks whose scales are finite.
var halfOffsets = map[quant.Type][]int{
	quant.Q4_0: {0}, quant.Q4_1: {0, 2}, quant.Q5_0: {0}, quant.Q5_1: {0, 2},
	quant.Q8_0: {0}, quant.Q4_K: {0, 2}, quant.Q5_K: {0, 2}, quant.Q6_K: {208},
}

// randomWeights returns rows×cols weights of type t. Half the rows are
// quantized from Gaussian floats, as real weights are; the others are random
// bytes with finite scales, which reach the corners (Q8_0's -128, Q6_K's
// negative scales, all-ones nibbles) that a quantizer rarely writes.
func randomWeights(t *testing.T, rng *rand.Rand, typ quant.Type, rows, cols int) []byte {
	t.Helper()
	rb, err := quant.RowBytes(typ, cols)
	if err != nil {
		t.Fatal(err)
	}
	w := make([]byte, rows*rb)
	f := make([]float32, cols)
	for r := range rows {
		row := w[r*rb : (r+1)*rb]
		if r%2 == 0 {
			for i := range f {
				f[i] = float32(rng.NormFloat64() * 0.05)
			}
			if err := quant.Quantize(typ, f, row); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for i := range row {
			row[i] = byte(rng.Uint32())
		}
		offs, bb := halfOffsets[typ], typ.BlockBytes()
		if typ == quant.F16 || typ == quant.BF16 || typ == quant.F32 {
			offs, bb = []int{0}, typ.BlockBytes()
		}
		for b := 0; b < len(row); b += bb {
			for _, o := range offs {
				v := float32(rng.Float64()*0.02 + 0.001)
				switch typ {
				case quant.F32:
					binary.LittleEndian.PutUint32(row[b:], math.Float32bits(v-0.011))
				case quant.BF16:
					binary.LittleEndian.PutUint16(row[b:], quant.F32ToBF16(v-0.011))
				case quant.F16:
					binary.LittleEndian.PutUint16(row[b:], quant.F32ToF16(v-0.011))
				default:
					binary.LittleEndian.PutUint16(row[b+o:], quant.F32ToF16(v))
				}
			}
		}
	}
	return w
}

func randomInput(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	// An outlier, as activations have, to exercise the block scales.
	if n > 40 {
		x[rng.IntN(n)] = 20
	}
	return x
}

// reference returns W[r]·x in float64 from dequantized weights, and the
// bounds the kernels' results must meet: absW = Σ|w_i||x_i| and qerr, the
// most that quantizing x to blocks of the given size can move the result.
func reference(t *testing.T, typ quant.Type, w []byte, rows, cols int, x []float32, block int) (want, absW, qerr []float64) {
	t.Helper()
	rb, _ := quant.RowBytes(typ, cols)
	f := make([]float32, cols)
	// Quantizing x to d*q with d = max|x in block|/127 moves each x_i by at
	// most d/2 (plus the rounding of x_i/d, far below 1e-3 of that).
	half := make([]float64, cols)
	if k := kernelFor[typ]; k.round != nil {
		// F16 and BF16 round the activations to their own precision first,
		// exactly: the reference does the same.
		x = append([]float32(nil), x...)
		for i, v := range x {
			x[i] = k.round(v)
		}
	}
	if block > 0 {
		for b := 0; b < cols; b += block {
			var amax float64
			for _, v := range x[b : b+block] {
				amax = math.Max(amax, math.Abs(float64(v)))
			}
			for i := b; i < b+block; i++ {
				// Half a step, plus the scale's rounding to binary16
				// (2^-11 relative) times the largest |q| of 127.
				half[i] = amax / 127 * (0.5 + 127*0x1p-11) * 1.001
			}
		}
	}
	for r := range rows {
		if err := quant.Dequantize(typ, w[r*rb:(r+1)*rb], f); err != nil {
			t.Fatal(err)
		}
		var s, a, q float64
		for i, v := range f {
			s += float64(v) * float64(x[i])
			a += math.Abs(float64(v) * float64(x[i]))
			q += math.Abs(float64(v)) * half[i]
		}
		want, absW, qerr = append(want, s), append(absW, a), append(qerr, q)
	}
	return want, absW, qerr
}

// floatTol is the rounding bound for an f32 sum of n products, each exact or
// singly rounded (FMA): γ_n = n·2^-24 relative to Σ|w_i||x_i|, by the
// standard analysis of recursive summation; splitting the sum over lanes only
// shortens the chains.
func floatTol(n int) float64 { return float64(n+2) * 0x1p-24 }

type shape struct{ rows, cols int }

// shapes include odd block counts (32 and 96 columns) for the kernels that
// take blocks in pairs, and 5632 = 22 super-blocks, TinyLlama's MLP width.
var shapes = []shape{{3, 32}, {9, 96}, {1, 64}, {37, 64}, {5, 256}, {130, 256}, {67, 2048}, {33, 5632}}

// TestMatVec checks every type's kernel, portable and fast, against the
// float64 dot of the dequantized weights.
func TestMatVec(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	for _, typ := range allTypes {
		for _, sh := range shapes {
			if sh.cols%typ.BlockSize() != 0 {
				continue
			}
			t.Run(fmt.Sprintf("%s/%dx%d", typ, sh.rows, sh.cols), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(typ), uint64(sh.rows*sh.cols)))
				w := randomWeights(t, rng, typ, sh.rows, sh.cols)
				x := randomInput(rng, sh.cols)
				k := portable[typ]
				want, absW, qerr := reference(t, typ, w, sh.rows, sh.cols, x, k.block)
				slow := make([]float32, sh.rows)
				fast := make([]float32, sh.rows)
				p.matMul(&k, w, sh.rows, sh.cols, x, 1, slow)
				MatVec(p, typ, w, sh.rows, sh.cols, x, fast)
				ftol := floatTol(sh.cols)
				for r := range sh.rows {
					// Against float64: activation quantization, then rounding.
					tol := qerr[r] + ftol*absW[r] + 1e-30
					if d := math.Abs(float64(slow[r]) - want[r]); d > tol {
						t.Errorf("row %d: portable %g, want %g (|diff| %.3g > %.3g)", r, slow[r], want[r], d, tol)
					}
					if d := math.Abs(float64(fast[r]) - want[r]); d > tol {
						t.Errorf("row %d: fast %g, want %g (|diff| %.3g > %.3g)", r, fast[r], want[r], d, tol)
					}
					// Against each other: the same quantized activations and
					// exact integer block sums, so only the order of the f32
					// adds differs; both are within ftol of the exact sum of
					// the quantized products, whose |terms| stay within
					// absW + qerr.
					if d := math.Abs(float64(fast[r]) - float64(slow[r])); d > 2*ftol*(absW[r]+qerr[r])+1e-30 {
						t.Errorf("row %d: fast %g, portable %g (|diff| %.3g)", r, fast[r], slow[r], d)
					}
				}
			})
		}
	}
}

// TestMatMul checks that each of n inputs gets exactly the result MatVec gives
// it alone: the tiling changes which rows are done when, not the arithmetic.
// The float types are the exception by design: a batch sums in tinyBLAS's
// order, as llama.cpp does, so each input is compared with that kernel alone;
// and so is a batch that the GEMM takes in its own order (Q4_0: llama.cpp's
// repacked order), which must agree within the float rounding bound; the
// lanes GEMM (Q8_0) keeps vec_dot's order and must agree to the bit.
func TestMatMul(t *testing.T) {
	for _, threads := range []int{1, 2, 5} {
		p := NewPool(threads)
		for _, typ := range allTypes {
			for _, n := range []int{1, 3, 17} {
				for _, sh := range []shape{{41, 256}, {300, 2048}} {
					name := fmt.Sprintf("threads=%d/%s/n=%d/%dx%d", threads, typ, n, sh.rows, sh.cols)
					t.Run(name, func(t *testing.T) {
						rng := rand.New(rand.NewPCG(uint64(n), uint64(typ)))
						w := randomWeights(t, rng, typ, sh.rows, sh.cols)
						x := randomInput(rng, n*sh.cols)
						y := make([]float32, n*sh.rows)
						MatMul(p, typ, w, sh.rows, sh.cols, x, n, y)
						one := make([]float32, sh.rows)
						k := kernelFor[typ]
						for i := range n {
							if n > 1 && k.rowsN != nil {
								xr := &xrow{f: x[i*sh.cols : (i+1)*sh.cols]}
								if k.round != nil {
									xr.f = append([]float32(nil), xr.f...)
									for j, v := range xr.f {
										xr.f[j] = k.round(v)
									}
								}
								k.rowsN(w, len(w)/sh.rows, xr, one)
							} else {
								MatVec(p, typ, w, sh.rows, sh.cols, x[i*sh.cols:(i+1)*sh.cols], one)
							}
							if n >= gemmMin && k.gemm != nil && !k.gemm.inLanes() || n >= amxMin && k.amx6 && gemmAMX6 != nil {
								// The GEMM sums the same exact integer block
								// sums in another order.
								xi := x[i*sh.cols : (i+1)*sh.cols]
								_, absW, qerr := reference(t, typ, w, sh.rows, sh.cols, xi, k.block)
								for r, v := range one {
									tol := 2*floatTol(sh.cols)*(absW[r]+qerr[r]) + 1e-30
									if got := y[i*sh.rows+r]; math.Abs(float64(got)-float64(v)) > tol {
										t.Fatalf("input %d row %d: MatMul (GEMM) %g, MatVec %g", i, r, got, v)
									}
								}
								continue
							}
							for r, v := range one {
								if got := y[i*sh.rows+r]; got != v {
									t.Fatalf("input %d row %d: MatMul %g, MatVec %g", i, r, got, v)
								}
							}
						}
					})
				}
			}
		}
		p.Close()
	}
}

// TestNoAllocs checks that warm MatVec and MatMul calls reuse the pool's
// scratch space.
func TestNoAllocs(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typ := range allTypes {
		w := randomWeights(t, rng, typ, 300, 512)
		x := randomInput(rng, 4*512)
		y := make([]float32, 4*300)
		MatMul(p, typ, w, 300, 512, x, 4, y)
		if a := testing.AllocsPerRun(20, func() { MatVec(p, typ, w, 300, 512, x[:512], y[:300]) }); a != 0 {
			t.Errorf("%s: MatVec allocates %v times per call", typ, a)
		}
		if a := testing.AllocsPerRun(20, func() { MatMul(p, typ, w, 300, 512, x, 4, y) }); a != 0 {
			t.Errorf("%s: MatMul allocates %v times per call", typ, a)
		}
	}
}

func TestMatMulPanics(t *testing.T) {
	p := NewPool(1)
	defer p.Close()
	cases := []struct {
		name       string
		typ        quant.Type
		w          int
		rows, cols int
		x, y       int
	}{
		{"unsupported type", quant.Q8_K, 292, 1, 256, 256, 1},
		{"cols not a block multiple", quant.Q4_0, 18, 1, 31, 31, 1},
		{"short weights", quant.Q4_0, 17, 1, 32, 32, 1},
		{"short input", quant.Q4_0, 18, 1, 32, 31, 1},
		{"long output", quant.Q4_0, 18, 1, 32, 32, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			MatVec(p, c.typ, make([]byte, c.w), c.rows, c.cols, make([]float32, c.x), make([]float32, c.y))
		})
	}
}

// TestDotAxpy checks the f32 primitives against float64 at every length up to
// a few vector widths, so that every tail path runs.
func TestDotAxpy(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := range 140 {
		a, b := randomInput(rng, n+3), randomInput(rng, n+3)
		a, b = a[3:], b[1:] // unaligned starts; b longer than a
		var want, abs float64
		for i := range n {
			want += float64(a[i]) * float64(b[i])
			abs += math.Abs(float64(a[i]) * float64(b[i]))
		}
		for name, f := range map[string]func(a, b []float32) float32{"Dot": Dot, "dotGo": dotGo} {
			if got := f(a, b); math.Abs(float64(got)-want) > floatTol(n)*abs {
				t.Errorf("%s n=%d: %g, want %g", name, n, got, want)
			}
		}
		for name, f := range map[string]func(float32, []float32, []float32){"Axpy": Axpy, "axpyGo": axpyGo} {
			y := append([]float32(nil), b...)
			const alpha float32 = 0.7
			f(alpha, a, y)
			for i := range y {
				w, ax := float64(b[i]), 0.0
				if i < n {
					ax = float64(alpha) * float64(a[i])
				}
				w += ax
				// One multiply and one add, each rounded (or one FMA): at
				// most 2^-24 of each of |a*x| and |y+a*x|.
				if d := math.Abs(float64(y[i]) - w); d > 0x1p-24*(math.Abs(w)+math.Abs(ax)) {
					t.Errorf("%s n=%d: y[%d] = %g, want %g", name, n, i, y[i], w)
				}
			}
		}
	}
}
