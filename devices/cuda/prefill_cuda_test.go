//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"hybrid/ops"
	"hybrid/quant"
	"hybrid/verify"
)

// TestPrefillMatMul times a prompt's mat-mul (launchMMT) at TinyLlama's and
// Llama-7B's layer shapes and 512 tokens (HYBRID_PREFILL_N: a list, such as
// "64,128,512"), on 8-bit tensor cores (mmq), on f16 ones (mmt) and, where
// cuBLAS loaded, decoded to f16 for cublasGemmEx (blasMMT), alternated over
// several rounds, with the GPU's time taken by events. It logs µs per
// mat-mul and the rate in TFLOP/s (2·rows·cols·tokens), and checks that the
// kernels' products agree within the 8-bit activations' error (TestMatMul
// checks each tightly).
func TestPrefillMatMul(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	g := gpu(t)
	r := rand.New(rand.NewPCG(31, 32))
	ns := []int{512}
	if v := os.Getenv("HYBRID_PREFILL_N"); v != "" {
		ns = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				t.Fatalf("HYBRID_PREFILL_N=%q: want token counts such as 64,512", v)
			}
			ns = append(ns, n)
		}
	}
	shapes := []struct{ rows, cols int }{{2048, 2048}, {5632, 2048}, {2048, 5632}, {4096, 4096}, {11008, 4096}, {4096, 11008}}
	only := os.Getenv("HYBRID_PREFILL_ONLY") // "Q4_K 4096x4096": one type and shape
	const q8, f16, blas = 0, 1, 2
	modes := []int{q8, f16}
	if g.blas != nil {
		modes = append(modes, blas)
	} else {
		t.Logf("no cuBLAS: %s", g.blasWhy)
	}
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q6_K} {
		for _, sh := range shapes {
			if only != "" && only != fmt.Sprintf("%s %dx%d", typ, sh.rows, sh.cols) {
				continue
			}
			data, _ := quantized(t, r, typ, sh.rows, sh.cols)
			w := &ops.Weight{Name: fmt.Sprintf("pf.%s.%dx%d", typ, sh.rows, sh.cols), Type: typ, Rows: sh.rows, Cols: sh.cols}
			if err := g.LoadWeight(w, data); err != nil {
				t.Fatal(err)
			}
			for _, n := range ns {
				x, err := g.Alloc(n * sh.cols)
				if err != nil {
					t.Fatal(err)
				}
				g.Write(x, verify.RandVec(r, n*sh.cols))
				y, err := g.Alloc(n * sh.rows)
				if err != nil {
					t.Fatal(err)
				}
				op := &ops.Op{Kind: ops.MatMul, Name: "pf", Weight: w}
				outs := map[int][]float32{}
				timeOne := func(mode int) time.Duration {
					defer func(v, b bool, m int) { useMMQ, g.useBlas, blasMin = v, b, m }(useMMQ, g.useBlas, blasMin)
					useMMQ, g.useBlas, blasMin = mode == q8, mode == blas, 1
					var el time.Duration
					err := g.do(func() error {
						run := func() error { return g.run(op, ops.Step{}, g.weights[w.Name], []*Buffer{x.(*Buffer)}, y.(*Buffer)) }
						if err := run(); err != nil {
							return err
						}
						var err error
						el, err = timeOnGPU(func() error {
							for range 20 {
								if err := run(); err != nil {
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
					out := make([]float32, n*sh.rows)
					if err := g.Read(out, y); err != nil {
						t.Fatal(err)
					}
					outs[mode] = out
					return el / 20
				}
				var took [3]time.Duration
				for range 3 {
					for _, m := range modes {
						took[m] += timeOne(m)
					}
				}
				// The timed launches computed the products: the kernels
				// agree within the 8-bit activations' error (TestMatMul
				// checks each against float64 more tightly).
				for _, m := range modes[1:] {
					if e := verify.NormRel(outs[q8], outs[m]); e > 2e-2 {
						t.Fatalf("%s %dx%d n=%d: 8-bit and f16 (mode %d) products differ by %.3g (‖Δ‖/‖y‖)", typ, sh.rows, sh.cols, n, m, e)
					}
				}
				flop := 2 * float64(sh.rows) * float64(sh.cols) * float64(n)
				line := fmt.Sprintf("PREFILL %-5s %5dx%-5d n=%-3d:", typ, sh.rows, sh.cols, n)
				for _, m := range modes {
					sec := took[m].Seconds() / 3
					line += fmt.Sprintf(" %s %7.1f µs (%5.1f TFLOP/s)", []string{"8-bit", "f16", "cublas"}[m], sec*1e6, flop/sec/1e12)
				}
				t.Log(line)
				g.Free(x)
				g.Free(y)
			}
		}
	}
}

// TestFusedMatMuls checks one tensor-core launch of up to three weights of
// one input (launchMMT, a prompt's fuseMMT unit) against each weight's own
// launch: the same tiles and sums, so the products agree to within the
// order of the sums (a lone launch of few tiles is split along k).
func TestFusedMatMuls(t *testing.T) {
	g := gpu(t)
	r := rand.New(rand.NewPCG(41, 42))
	for _, c := range []struct {
		typ  quant.Type
		rows []int
		cols int
		n    int
	}{
		{quant.Q4_0, []int{288, 288, 288}, 288, 200},
		{quant.Q4_K, []int{2048, 256, 256}, 2048, 512},
		{quant.Q8_0, []int{300, 100}, 800, 77},
		{quant.F16, []int{288, 288, 288}, 288, 200},
	} {
		var ws []mvWeight
		var singles []*Buffer
		x, err := g.Alloc(c.n * c.cols)
		if err != nil {
			t.Fatal(err)
		}
		g.Write(x, verify.RandVec(r, c.n*c.cols))
		for j, rows := range c.rows {
			data, _ := quantized(t, r, c.typ, rows, c.cols)
			w := &ops.Weight{Name: fmt.Sprintf("fm.%s.%d.%d", c.typ, rows, j), Type: c.typ, Rows: rows, Cols: c.cols}
			if err := g.LoadWeight(w, data); err != nil {
				t.Fatal(err)
			}
			y, _ := g.Alloc(c.n * rows)
			y1, _ := g.Alloc(c.n * rows)
			ws = append(ws, mvWeight{g.weights[w.Name], y.(*Buffer)})
			singles = append(singles, y1.(*Buffer))
		}
		err = g.do(func() error {
			if err := g.launchMMT(g.k.byType[c.typ], ws, x.(*Buffer), c.n); err != nil {
				return err
			}
			for j, m := range ws {
				if err := g.launchMMT(g.k.byType[c.typ], []mvWeight{{m.w, singles[j]}}, x.(*Buffer), c.n); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for j := range ws {
			fused, alone := make([]float32, c.n*c.rows[j]), make([]float32, c.n*c.rows[j])
			if err := g.Read(fused, ws[j].y); err != nil {
				t.Fatal(err)
			}
			if err := g.Read(alone, singles[j]); err != nil {
				t.Fatal(err)
			}
			var d, m float64
			for i := range fused {
				d = max(d, math.Abs(float64(fused[i]-alone[i])))
				m = max(m, math.Abs(float64(alone[i])))
			}
			if d > 1e-5*m {
				t.Fatalf("%s %v×%d n=%d: weight %d fused differs from alone by %.3g of max|y| %.3g", c.typ, c.rows, c.cols, c.n, j, d/m, m)
			}
			t.Logf("%s %v×%d n=%d: weight %d fused vs alone %.2g of max|y|", c.typ, c.rows, c.cols, c.n, j, d/m)
		}
	}
}

// TestBlasLoaded reports where the prompts' mat-muls run: on cuBLAS (its
// library and version) or, where it did not load, on mmt and why. With
// HYBRID_TEST_WANT_CUBLAS=1 a GPU machine whose cuBLAS does not load fails
// it, so that the cuBLAS tests cannot pass by not running.
func TestBlasLoaded(t *testing.T) {
	g := gpu(t)
	if g.blas == nil {
		if os.Getenv("HYBRID_TEST_WANT_CUBLAS") == "1" {
			t.Fatalf("cuBLAS did not load: %s", g.blasWhy)
		}
		t.Skipf("cuBLAS did not load: %s", g.blasWhy)
	}
	t.Logf("%s; %s", g.blas, g.Info().Detail)
}
