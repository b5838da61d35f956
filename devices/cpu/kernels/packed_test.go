package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"hybrid/quant"
)

// TestPacked checks each repacked type against the float64 dot of the
// dequantized weights for a decode step, a few inputs and a batch the GEMM
// takes, and the assembly gemv against its Go arithmetic: the same
// operations in the same order, so the same bits but for fma32's rare double
// rounding. Where this CPU packs nothing, it checks that Pack says so.
func TestPacked(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	if !Packable(quant.Q4_0, 32, 64) {
		if Pack(p, quant.Q4_0, make([]byte, 32*2*18), 32, 64) != nil {
			t.Fatal("Pack packed what Packable refuses")
		}
		t.Skip("no packed kernels on this CPU")
	}
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q4_K} {
		for _, sh := range []shape{{16, 256}, {48, 512}, {64, 2048}, {32, 5632}} {
			for _, n := range []int{1, 3, 8, 19} {
				t.Run(fmt.Sprintf("%s/%dx%d/n=%d", typ, sh.rows, sh.cols, n), func(t *testing.T) {
					testPacked(t, p, typ, sh, n)
				})
			}
		}
	}
	for _, c := range []struct {
		typ        quant.Type
		rows, cols int
	}{{quant.Q4_0, 15, 32}, {quant.Q4_0, 0, 32}, {quant.Q8_0, 16, 32}, {quant.Q4_K, 16, 128}, {quant.Q6_K, 16, 256}} {
		if Packable(c.typ, c.rows, c.cols) {
			t.Errorf("Packable(%s, %d, %d)", c.typ, c.rows, c.cols)
		}
	}
}

// TestPackedAMX runs TestPacked's Q4_0 and Q4_K batches through the AMX
// paths: their assembly where the CPU has AMX, else their Go kernels, which
// checks the paths' layouts here.
func TestPackedAMX(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	// Small batches, which take the AMX kernels here only (amxMin).
	defer func(m int) { amxMin = m }(amxMin)
	amxMin = gemmMin
	if !Packable(quant.Q4_0, 32, 64) {
		t.Skip("no packed kernels on this CPU")
	}
	if gemmAMX == nil {
		defer func() { gemmAMX, gemmAMXK = nil, nil }()
		gemmAMX, gemmAMXK = gemmAMXGo, gemmAMXKGo
	}
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q4_K} {
		for _, sh := range []shape{{16, 256}, {48, 512}, {32, 5632}} {
			for _, n := range []int{8, 11, 19, 40} {
				t.Run(fmt.Sprintf("%s/%dx%d/n=%d", typ, sh.rows, sh.cols, n), func(t *testing.T) {
					testPacked(t, p, typ, sh, n)
				})
			}
		}
	}
}

func testPacked(t *testing.T, p *Pool, typ quant.Type, sh shape, n int) {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(sh.rows*sh.cols)))
	w := randomWeights(t, rng, typ, sh.rows, sh.cols)
	x := randomInput(rng, n*sh.cols)
	pk := Pack(p, typ, w, sh.rows, sh.cols)
	if pk == nil {
		t.Fatal("Pack refused")
	}
	y := make([]float32, n*sh.rows)
	pk.MatMul(p, x, n, y)
	file := make([]float32, n*sh.rows)
	MatMul(p, typ, w, sh.rows, sh.cols, x, n, file)
	k := *kernelFor[typ]
	bc, bb := packedShape(typ)
	nb := sh.cols / bc
	ftol := floatTol(sh.cols)
	for i := range n {
		xi := x[i*sh.cols : (i+1)*sh.cols]
		want, absW, qerr := reference(t, typ, w, sh.rows, sh.cols, xi, k.block)
		for r := range sh.rows {
			got := y[i*sh.rows+r]
			tol := qerr[r] + 2*ftol*absW[r] + 1e-30
			if d := math.Abs(float64(got) - want[r]); d > tol {
				t.Fatalf("input %d row %d: packed %g, want %g (|diff| %.3g > %.3g)", i, r, got, want[r], d, tol)
			}
			// A Q4_0 batch through the GEMM: the panels unpacked from
			// either layout are the same, and so are the sums.
			if typ == quant.Q4_0 && n >= gemmMin && file[i*sh.rows+r] != got {
				t.Fatalf("input %d row %d: packed %g, file layout %g", i, r, got, file[i*sh.rows+r])
			}
		}
		if typ == quant.Q4_0 && n >= gemmMin {
			continue
		}
		xr := (&scratch{}).prepare(p, &k, xi, 1, sh.cols)[0]
		for pi := range sh.rows / panelRows {
			var g [panelRows]float32
			pw := pk.data[pi*nb*bb:]
			if typ == quant.Q4_K {
				bsum := make([]int32, nb*8)
				for j := range bsum {
					bsum[j] = int32(xr.bs[2*j]) + int32(xr.bs[2*j+1])
				}
				gemvPackedKGo(pw, nb, &xr, bsum, g[:], i < n-n%4)
			} else {
				off := make([]int32, nb)
				for b := range nb {
					for _, v := range xr.q[32*b : 32*b+32] {
						off[b] += 8 * int32(v)
					}
				}
				gemvPackedGo(pw, nb, &xr, off, g[:])
			}
			for r, v := range g {
				row := pi*panelRows + r
				got := y[i*sh.rows+row]
				if got != v && math.Abs(float64(got-v)) > 0x1p-22*(absW[row]+qerr[row]) {
					t.Fatalf("input %d row %d: assembly %g, Go %g", i, row, got, v)
				}
			}
		}
	}
}

// BenchmarkPackedCold is BenchmarkMatVecCold's Q4_0 and Q4_K cases on the
// packed layout: weights from DRAM, two threads.
func BenchmarkPackedCold(b *testing.B) {
	p := NewPool(2)
	defer p.Close()
	sh := shape{5632, 2048}
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q4_K} {
		b.Run(typ.String(), func(b *testing.B) {
			one := benchWeights(typ, sh.rows, sh.cols)
			var ws []*Packed
			for range max(2, (256<<20)/len(one)) {
				pk := Pack(p, typ, one, sh.rows, sh.cols)
				if pk == nil {
					b.Skip("no packed kernels on this CPU")
				}
				ws = append(ws, pk)
			}
			defer func() {
				for _, pk := range ws {
					pk.Free()
				}
			}()
			x := randomInput(rand.New(rand.NewPCG(7, 8)), sh.cols)
			y := make([]float32, sh.rows)
			b.SetBytes(int64(len(one)))
			i := 0
			for b.Loop() {
				ws[i].MatMul(p, x, 1, y)
				i = (i + 1) % len(ws)
			}
		})
	}
}

// TestPackGather checks the gathering packers against the Go ones.
func TestPackGather(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const cols = 512
	for _, c := range []struct {
		typ          quant.Type
		bc, bb       int
		fast, goPack func([]byte, int, int, []byte)
	}{
		{quant.Q4_0, 32, packedBlock, packQ4_0, packQ4_0Go},
		{quant.Q4_K, 256, packedBlockK, packQ4_K, packQ4_KGo},
	} {
		w := randomWeights(t, rng, c.typ, panelRows, cols)
		nb := cols / c.bc
		a, b := make([]byte, nb*c.bb), make([]byte, nb*c.bb)
		c.fast(w, len(w)/panelRows, nb, a)
		c.goPack(w, len(w)/panelRows, nb, b)
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%s byte %d: %#x, Go %#x", c.typ, i, a[i], b[i])
			}
		}
	}
}

// BenchmarkPackedGEMM times a prompt's batch (512 inputs) through a packed
// 5632×2048 matrix, one thread, with the AMX kernels where the CPU has them
// and the VNNI ones ("/vnni"), and reports the multiply-add rate.
func BenchmarkPackedGEMM(b *testing.B) {
	const rows, cols, n = 5632, 2048, 512
	p := NewPool(1)
	defer p.Close()
	if !Packable(quant.Q4_K, rows, cols) {
		b.Skip("no packed kernels on this CPU")
	}
	amx, amxK := gemmAMX, gemmAMXK
	defer func() { gemmAMX, gemmAMXK = amx, amxK }()
	kinds := []string{""}
	if amx != nil {
		kinds = append(kinds, "/vnni")
	}
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q4_K} {
		for _, kind := range kinds {
			b.Run(typ.String()+kind, func(b *testing.B) {
				gemmAMX, gemmAMXK = amx, amxK
				if kind != "" {
					gemmAMX, gemmAMXK = nil, nil
				}
				rng := rand.New(rand.NewPCG(1, 2))
				pk := Pack(p, typ, benchWeights(typ, rows, cols), rows, cols)
				defer pk.Free()
				x := randomInput(rng, n*cols)
				y := make([]float32, n*rows)
				for b.Loop() {
					pk.MatMul(p, x, n, y)
				}
				b.ReportMetric(float64(b.N)*rows*cols*float64(n)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
	}
}
