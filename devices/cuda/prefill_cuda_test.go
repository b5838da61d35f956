//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"hybrid/ops"
	"hybrid/quant"
	"hybrid/verify"
)

// TestPrefillMatMul times a prompt's mat-mul (launchMMT) at TinyLlama's and
// Llama-7B's layer shapes and 512 tokens, on 8-bit tensor cores (mmq) and
// on f16 ones (mmt), alternated over several rounds, with the GPU's time
// taken by events. It logs µs per mat-mul and the rate in TFLOP/s
// (2·rows·cols·tokens), and checks that the two kernels' products agree
// within the 8-bit activations' error (TestMatMul checks each tightly).
func TestPrefillMatMul(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	g := gpu(t)
	r := rand.New(rand.NewPCG(31, 32))
	const n = 512
	shapes := []struct{ rows, cols int }{{2048, 2048}, {5632, 2048}, {2048, 5632}, {4096, 4096}, {11008, 4096}, {4096, 11008}}
	only := os.Getenv("HYBRID_PREFILL_ONLY") // "Q4_K 4096x4096": one type and shape
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
			outs := map[bool][]float32{}
			timeOne := func(f16 bool) time.Duration {
				defer func(v bool) { useMMQ = v }(useMMQ)
				useMMQ = !f16
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
				outs[f16] = out
				return el / 20
			}
			var q8, f16 time.Duration
			for range 3 {
				q8 += timeOne(false)
				f16 += timeOne(true)
			}
			// The timed launches computed the products: the two kernels
			// agree within the 8-bit activations' error (TestMatMul
			// checks each against float64 more tightly).
			if e := verify.NormRel(outs[false], outs[true]); e > 2e-2 {
				t.Fatalf("%s %dx%d: 8-bit and f16 products differ by %.3g (‖Δ‖/‖y‖)", typ, sh.rows, sh.cols, e)
			}
			flop := 2 * float64(sh.rows) * float64(sh.cols) * n
			t.Logf("PREFILL %-5s %5dx%-5d n=%d: 8-bit %7.1f µs (%5.1f TFLOP/s), f16 %7.1f µs (%5.1f TFLOP/s), %.2f×", typ, sh.rows, sh.cols, n,
				q8.Seconds()/3*1e6, flop/(q8.Seconds()/3)/1e12, f16.Seconds()/3*1e6, flop/(f16.Seconds()/3)/1e12, f16.Seconds()/q8.Seconds())
			g.Free(x)
			g.Free(y)
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
