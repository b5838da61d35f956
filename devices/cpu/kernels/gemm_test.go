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
	fast := gemmTile
	for typ, g := range gemmFor {
		for _, sh := range []shape{{16, 256}, {41, 256}, {33, 2048}, {70, 5632}} {
			for _, n := range []int{8, 13, 24} {
				t.Run(fmt.Sprintf("%s/%dx%d/n=%d", typ, sh.rows, sh.cols, n), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(typ), uint64(sh.rows*sh.cols+n)))
					w := randomWeights(t, rng, typ, sh.rows, sh.cols)
					x := randomInput(rng, n*sh.cols)
					k := *kernelFor[typ]
					xs := p.scratch.prepare(p, &k, x, n, sh.cols)
					run := func(tile func(*panel, *inTile, int, *[tileIn * panelRows]float32)) []float32 {
						defer func(old func(*panel, *inTile, int, *[tileIn * panelRows]float32)) { gemmTile = old }(gemmTile)
						gemmTile = tile
						y := make([]float32, n*sh.rows)
						p.gemm(g, w, sh.rows, sh.cols, xs, y)
						return y
					}
					slow := run(gemmTileGo)
					var got []float32
					if fast != nil {
						got = run(fast)
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
// blocks the panel layout can hold.
func TestGEMMTypes(t *testing.T) {
	for typ, g := range gemmFor {
		if kernelFor[typ] == nil {
			t.Errorf("%s: GEMM without a row kernel", typ)
		}
		if g.sub != 16 && g.sub != 32 || typ.BlockSize()%g.sub != 0 {
			t.Errorf("%s: sub-block of %d", typ, g.sub)
		}
	}
	_ = quant.Q4_0
}
