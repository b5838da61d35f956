package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"hybrid/quant"
)

// lowBitTypes are the 2-, 3- and non-linear 4-bit weight types, whose
// kernels follow llama.cpp's order (kquant2_go.go, iq4_go.go).
var lowBitTypes = []quant.Type{quant.Q2_K, quant.Q3_K, quant.IQ4_NL, quant.IQ4_XS}

// lowBitScales lists where each of them keeps f16 scales in a block.
var lowBitScales = map[quant.Type][]int{
	quant.Q2_K: {80, 82}, quant.Q3_K: {108}, quant.IQ4_NL: {0}, quant.IQ4_XS: {0},
}

// lowBitWeights is randomWeights for these types: half the rows quantized
// from Gaussian floats, half random bytes, whose f16 scales are then made
// finite (0.001 to 0.021).
func lowBitWeights(t *testing.T, rng *rand.Rand, typ quant.Type, rows, cols int) []byte {
	t.Helper()
	w := randomWeights(t, rng, typ, rows, cols)
	rb, bb := len(w)/rows, typ.BlockBytes()
	for r := 1; r < rows; r += 2 {
		for b := r * rb; b < (r+1)*rb; b += bb {
			for _, o := range lowBitScales[typ] {
				binary.LittleEndian.PutUint16(w[b+o:], quant.F32ToF16(float32(rng.Float64()*0.02+0.001)))
			}
		}
	}
	return w
}

// TestLowBitMatVec checks each type's kernel against the float64 dot of the
// dequantized weights, within the bounds TestMatVec states.
func TestLowBitMatVec(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	for _, typ := range lowBitTypes {
		for _, sh := range shapes {
			if sh.cols%typ.BlockSize() != 0 {
				continue
			}
			t.Run(fmt.Sprintf("%s/%dx%d", typ, sh.rows, sh.cols), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(typ), uint64(sh.rows*sh.cols)))
				w := lowBitWeights(t, rng, typ, sh.rows, sh.cols)
				x := randomInput(rng, sh.cols)
				want, absW, qerr := reference(t, typ, w, sh.rows, sh.cols, x, kernelFor[typ].block)
				got := make([]float32, sh.rows)
				MatVec(p, typ, w, sh.rows, sh.cols, x, got)
				ftol := floatTol(sh.cols)
				for r := range sh.rows {
					// Activation quantization, then the f32 rounding.
					tol := qerr[r] + ftol*absW[r] + 1e-30
					if d := math.Abs(float64(got[r]) - want[r]); d > tol {
						t.Errorf("row %d: %g, want %g (|diff| %.3g > %.3g)", r, got[r], want[r], d, tol)
					}
				}
			})
		}
	}
}

// TestLowBitMatMul checks that a batch gives each input what MatVec gives it
// alone, to the bit, except Q2_K's groups of four inputs, which llama.cpp's
// GEMM (and so rows4) sums per half super-block: those must agree within
// the float rounding bound, and to the bit whichever inputs share the group;
// and IQ4_XS batches of eight or more against rows in groups of eight,
// which llama.cpp sums in its IQ panel order: to the bit that order, within
// rounding of MatVec's.
func TestLowBitMatMul(t *testing.T) {
	for _, threads := range []int{1, 2, 5} {
		p := NewPool(threads)
		for _, typ := range lowBitTypes {
			for _, n := range []int{1, 3, 4, 6, 17} {
				for _, sh := range []shape{{41, 256}, {300, 2048}, {64, 512}} {
					t.Run(fmt.Sprintf("threads=%d/%s/n=%d/%dx%d", threads, typ, n, sh.rows, sh.cols), func(t *testing.T) {
						rng := rand.New(rand.NewPCG(uint64(n), uint64(typ)))
						w := lowBitWeights(t, rng, typ, sh.rows, sh.cols)
						x := randomInput(rng, n*sh.cols)
						y := make([]float32, n*sh.rows)
						MatMul(p, typ, w, sh.rows, sh.cols, x, n, y)
						one := make([]float32, sh.rows)
						grouped := kernelFor[typ].rows4 != nil
						panel := typ == quant.IQ4_XS && iqpApplies(n, sh.rows)
						for i := range n {
							xi := x[i*sh.cols : (i+1)*sh.cols]
							MatVec(p, typ, w, sh.rows, sh.cols, xi, one)
							if panel {
								// llama.cpp's IQ panel order: the dot of
								// each row with the quantized input, to the
								// bit, and within rounding of MatVec's.
								xs := p.scratch.prepare(p, kernelFor[typ], xi, 1, sh.cols)
								_, absW, qerr := reference(t, typ, w, sh.rows, sh.cols, xi, kernelFor[typ].block)
								rb := len(w) / sh.rows
								for r, v := range one {
									got := y[i*sh.rows+r]
									if want := dotIQ4_XSPanelGo(w[r*rb:(r+1)*rb], &xs[0]); got != want {
										t.Fatalf("input %d row %d: MatMul %g, panel order %g", i, r, got, want)
									}
									if tol := 2*floatTol(sh.cols)*(absW[r]+qerr[r]) + 1e-30; math.Abs(float64(got)-float64(v)) > tol {
										t.Fatalf("input %d row %d: MatMul (panel) %g, MatVec %g", i, r, got, v)
									}
								}
								continue
							}
							if grouped && i < n&^3 {
								_, absW, qerr := reference(t, typ, w, sh.rows, sh.cols, xi, kernelFor[typ].block)
								for r, v := range one {
									tol := 2*floatTol(sh.cols)*(absW[r]+qerr[r]) + 1e-30
									if got := y[i*sh.rows+r]; math.Abs(float64(got)-float64(v)) > tol {
										t.Fatalf("input %d row %d: MatMul (rows4) %g, MatVec %g", i, r, got, v)
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
						if grouped && n >= 8 {
							// The second group of four, reversed: each input's
							// results must not depend on its neighbours.
							x2 := append([]float32(nil), x[:8*sh.cols]...)
							for i := range 4 {
								copy(x2[(4+i)*sh.cols:(5+i)*sh.cols], x[(3-i)*sh.cols:(4-i)*sh.cols])
							}
							y2 := make([]float32, 8*sh.rows)
							MatMul(p, typ, w, sh.rows, sh.cols, x2, 8, y2)
							for i := range 4 {
								for r := range sh.rows {
									if a, b := y2[i*sh.rows+r], y2[(7-i)*sh.rows+r]; a != b {
										t.Fatalf("input %d row %d: %g in the first group, %g in the second", i, r, a, b)
									}
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

// TestLowBitNoAllocs checks that warm MatVec and MatMul calls of these types
// reuse the pool's scratch space.
func TestLowBitNoAllocs(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typ := range lowBitTypes {
		w := lowBitWeights(t, rng, typ, 300, 512)
		x := randomInput(rng, 5*512)
		y := make([]float32, 5*300)
		MatMul(p, typ, w, 300, 512, x, 5, y)
		if a := testing.AllocsPerRun(20, func() { MatVec(p, typ, w, 300, 512, x[:512], y[:300]) }); a != 0 {
			t.Errorf("%s: MatVec allocates %v times per call", typ, a)
		}
		if a := testing.AllocsPerRun(20, func() { MatMul(p, typ, w, 300, 512, x, 5, y) }); a != 0 {
			t.Errorf("%s: MatMul allocates %v times per call", typ, a)
		}
	}
}

// BenchmarkLowBitMatVec reports weight bytes per second for these types at
// TinyLlama's attention and MLP shapes on 2 threads, with Q4_K's kernel
// alongside for comparison.
func BenchmarkLowBitMatVec(b *testing.B) {
	p := NewPool(2)
	defer p.Close()
	for _, typ := range append([]quant.Type{quant.Q4_K}, lowBitTypes...) {
		for _, sh := range benchShapes[:2] {
			w := benchWeights(typ, sh.rows, sh.cols)
			x := randomInput(rand.New(rand.NewPCG(7, 8)), sh.cols)
			y := make([]float32, sh.rows)
			b.Run(fmt.Sprintf("%s/%dx%d", typ, sh.rows, sh.cols), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					MatVec(p, typ, w, sh.rows, sh.cols, x, y)
				}
			})
		}
	}
}
