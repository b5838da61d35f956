package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"hybrid/quant"
)

// TestGEMM checks the GEMM of every type it takes against the float64 dot of
// the dequantized weights, with the kernel this CPU uses (the assembly one
// where it has AVX512-VNNI) and with the Go one, and the two against each
// other: they do the same operations in the same order, so they agree to the
// bit but for the rare double rounding of the Go fma32.
func TestGEMM(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	fast, fastLanes := gemmTile, gemmLanes
	for typ, g := range gemmFor {
		for _, sh := range []shape{{16, 256}, {41, 256}, {33, 2048}, {70, 5632}} {
			for _, n := range []int{8, 13, 24} {
				t.Run(fmt.Sprintf("%s/%dx%d/n=%d", typ, sh.rows, sh.cols, n), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(typ), uint64(sh.rows*sh.cols+n)))
					w := randomWeights(t, rng, typ, sh.rows, sh.cols)
					x := randomInput(rng, n*sh.cols)
					k := *kernelFor[typ]
					xs := p.scratch.prepare(p, &k, x, n, sh.cols)
					type tileFunc = func(*panel, *inTile, int, *[tileIn * panelRows]float32)
					run := func(tile, lanes tileFunc) []float32 {
						defer func(t, l tileFunc) { gemmTile, gemmLanes = t, l }(gemmTile, gemmLanes)
						gemmTile, gemmLanes = tile, lanes
						y := make([]float32, n*sh.rows)
						p.gemm(g, w, sh.rows, sh.cols, xs, y)
						return y
					}
					slow := run(gemmTileGo, gemmLanesGo)
					var got []float32
					if fast != nil {
						got = run(fast, fastLanes)
					}
					ftol := floatTol(sh.cols)
					for i := range n {
						want, absW, qerr := reference(t, typ, w, sh.rows, sh.cols, x[i*sh.cols:(i+1)*sh.cols], k.block)
						for r := range sh.rows {
							v := slow[i*sh.rows+r]
							tol := qerr[r] + 2*ftol*absW[r] + 1e-30
							if d := math.Abs(float64(v) - want[r]); d > tol {
								t.Fatalf("input %d row %d: GEMM %g, want %g (|diff| %.3g > %.3g)", i, r, v, want[r], d, tol)
							}
							if got == nil {
								continue
							}
							if f := got[i*sh.rows+r]; f != v && math.Abs(float64(f-v)) > 0x1p-22*(absW[r]+qerr[r]) {
								t.Fatalf("input %d row %d: assembly GEMM %g, Go %g", i, r, f, v)
							}
						}
					}
				})
			}
		}
	}
	if fast == nil {
		t.Log("no fast GEMM kernel on this CPU: checked the Go one only")
	}
}

// TestGEMMTypes keeps gemmFor's types among those the row kernels take, with
// blocks of 32, the panel layout's.
func TestGEMMTypes(t *testing.T) {
	for typ := range gemmFor {
		if kernelFor[typ] == nil {
			t.Errorf("%s: GEMM without a row kernel", typ)
		}
		if typ.BlockSize() != 32 {
			t.Errorf("%s: blocks of %d", typ, typ.BlockSize())
		}
	}
}

// BenchmarkGEMM times a batch of 64 inputs through TinyLlama's largest
// matrix shape (5632×2048) per type, one thread, and reports the multiply-add
// rate.
func BenchmarkGEMM(b *testing.B) {
	const rows, cols, n = 5632, 2048, 64
	p := NewPool(1)
	defer p.Close()
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q6_K} {
		b.Run(typ.String(), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			w := benchWeights(typ, rows, cols)
			x := randomInput(rng, n*cols)
			y := make([]float32, n*rows)
			for b.Loop() {
				MatMul(p, typ, w, rows, cols, x, n, y)
			}
			b.ReportMetric(float64(b.N)*rows*cols*n/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
	}
}

// BenchmarkUnpack times unpacking one panel of 16 rows of 5632 columns.
func BenchmarkUnpack(b *testing.B) {
	const cols = 5632
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0} {
		b.Run(typ.String(), func(b *testing.B) {
			w := benchWeights(typ, panelRows, cols)
			g := gemmFor[typ]
			var p panel
			p.size(cols)
			for b.Loop() {
				g.unpack(w, len(w)/panelRows, panelRows, &p)
			}
			b.SetBytes(int64(len(w)))
		})
	}
}

// TestUnpack checks that the unpacker in use (the gathering assembly one for
// full panels where the CPU has it) writes the same panel as the Go one.
func TestUnpack(t *testing.T) {
	goUnpack := map[quant.Type]func([]byte, int, int, *panel){
		quant.Q4_0: unpackQ4_0, quant.Q8_0: unpackQ8_0,
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for typ, g := range gemmFor {
		for _, nrows := range []int{panelRows, 5} {
			const cols = 512
			w := randomWeights(t, rng, typ, nrows, cols)
			stride := len(w) / nrows
			var a, b panel
			a.size(cols)
			b.size(cols)
			g.unpack(w, stride, nrows, &a)
			goUnpack[typ](w, stride, nrows, &b)
			for i := range a.q {
				if r := i % 64 / 4; r < nrows && a.q[i] != b.q[i] {
					t.Fatalf("%s rows=%d: byte %d is %#x, Go %#x", typ, nrows, i, a.q[i], b.q[i])
				}
			}
			for i := range a.sc {
				if i%16 < nrows && a.sc[i] != b.sc[i] {
					t.Fatalf("%s rows=%d: scale %d is %g, Go %g", typ, nrows, i, a.sc[i], b.sc[i])
				}
			}
		}
	}
}
