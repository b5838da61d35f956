package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"hybrid/quant"
)

// TestGEMM checks the GEMM of every type it takes against the float64 dot of
// the dequantized weights, with each of its kernels: the Go ones, the
// assembly ones this CPU has (AVX512-VNNI, AMX), and the AMX path's layout
// with its Go kernel on any CPU. Kernels that sum in the same order (Q8_0's
// vec_dot lanes without AMX, the tile order otherwise) do the same
// operations, so they agree to the bit but for the rare double rounding of
// the Go fma32.
func TestGEMM(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	// Small batches, which take the AMX kernels here only (amxMin).
	defer func(m int) { amxMin = m }(amxMin)
	amxMin = gemmMin
	type tileFunc = func(*panel, *inTile, int, *[tileIn * panelRows]float32)
	type amxFunc = func(*panel, *amxInputs, int, []float32)
	type variant struct {
		name        string
		tile, lanes tileFunc
		amx         amxFunc
	}
	variants := []variant{{name: "go", tile: gemmTileGo, lanes: gemmLanesGo}, {name: "amx-go", amx: gemmAMXGo}}
	if gemmTile != nil {
		variants = append(variants, variant{name: "vnni", tile: gemmTile, lanes: gemmLanes})
	}
	if gemmAMX != nil {
		variants = append(variants, variant{name: "amx", amx: gemmAMX})
	} else {
		t.Log("no AMX on this CPU: its Go kernel checked, not its assembly")
	}
	if gemmTile == nil {
		t.Log("no fast GEMM kernel on this CPU: checked the Go ones only")
	}
	defer func(t, l tileFunc, a amxFunc) { gemmTile, gemmLanes, gemmAMX = t, l, a }(gemmTile, gemmLanes, gemmAMX)
	for typ, g := range gemmFor {
		for _, sh := range []shape{{16, 256}, {41, 256}, {33, 2048}, {70, 5632}, {17, 288}} {
			for _, n := range []int{8, 13, 24, 33} {
				t.Run(fmt.Sprintf("%s/%dx%d/n=%d", typ, sh.rows, sh.cols, n), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(typ), uint64(sh.rows*sh.cols+n)))
					w := randomWeights(t, rng, typ, sh.rows, sh.cols)
					x := randomInput(rng, n*sh.cols)
					k := *kernelFor[typ]
					xs := p.scratch.prepare(p, &k, x, n, sh.cols)
					ftol := floatTol(sh.cols)
					ref := make([][]float64, n)
					absW := make([][]float64, n)
					qerr := make([][]float64, n)
					for i := range n {
						ref[i], absW[i], qerr[i] = reference(t, typ, w, sh.rows, sh.cols, x[i*sh.cols:(i+1)*sh.cols], k.block)
					}
					first := map[bool]struct {
						name string
						y    []float32
					}{}
					for _, v := range variants {
						gemmTile, gemmLanes, gemmAMX = v.tile, v.lanes, v.amx
						y := make([]float32, n*sh.rows)
						p.gemm(g, w, sh.rows, sh.cols, xs, y)
						lanes := g.inLanes()
						prev, seen := first[lanes]
						for i := range n {
							for r := range sh.rows {
								got := y[i*sh.rows+r]
								tol := qerr[i][r] + 2*ftol*absW[i][r] + 1e-30
								if d := math.Abs(float64(got) - ref[i][r]); d > tol {
									t.Fatalf("%s: input %d row %d: GEMM %g, want %g (|diff| %.3g > %.3g)", v.name, i, r, got, ref[i][r], d, tol)
								}
								if !seen {
									continue
								}
								if f := prev.y[i*sh.rows+r]; f != got && math.Abs(float64(f-got)) > 0x1p-22*(absW[i][r]+qerr[i][r]) {
									t.Fatalf("input %d row %d: %s GEMM %g, %s %g", i, r, v.name, got, prev.name, f)
								}
							}
						}
						if !seen {
							first[lanes] = struct {
								name string
								y    []float32
							}{v.name, y}
						}
					}
				})
			}
		}
	}
}

// TestGEMM6 checks Q6_K batches on the AMX path against the float64 dot of
// the dequantized weights, with its Go kernel on any CPU and its assembly
// where the CPU has AMX, and the two against each other (the same
// operations in the same order).
func TestGEMM6(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	// Small batches, which take the AMX kernels here only (amxMin).
	defer func(m int) { amxMin = m }(amxMin)
	amxMin = gemmMin
	type amx6Func = func(*panel, *amx6Inputs, int, []float32)
	defer func(f amx6Func) { gemmAMX6 = f }(gemmAMX6)
	kernels := []struct {
		name string
		f    amx6Func
	}{{"go", gemmAMX6Go}}
	if gemmAMX6 != nil {
		kernels = append(kernels, struct {
			name string
			f    amx6Func
		}{"amx", gemmAMX6})
	} else {
		t.Log("no AMX on this CPU: the Go kernel checked, not the assembly")
	}
	for _, sh := range []shape{{16, 256}, {41, 512}, {33, 2048}} {
		for _, n := range []int{8, 13, 33} {
			t.Run(fmt.Sprintf("%dx%d/n=%d", sh.rows, sh.cols, n), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(6, uint64(sh.rows*sh.cols+n)))
				w := randomWeights(t, rng, quant.Q6_K, sh.rows, sh.cols)
				x := randomInput(rng, n*sh.cols)
				var first []float32
				for _, kn := range kernels {
					gemmAMX6 = kn.f
					y := make([]float32, n*sh.rows)
					MatMul(p, quant.Q6_K, w, sh.rows, sh.cols, x, n, y)
					for i := range n {
						want, absW, qerr := reference(t, quant.Q6_K, w, sh.rows, sh.cols, x[i*sh.cols:(i+1)*sh.cols], 256)
						for r := range sh.rows {
							got := y[i*sh.rows+r]
							tol := qerr[r] + 2*floatTol(sh.cols)*absW[r] + 1e-30
							if d := math.Abs(float64(got) - want[r]); d > tol {
								t.Fatalf("%s: input %d row %d: %g, want %g (|diff| %.3g > %.3g)", kn.name, i, r, got, want[r], d, tol)
							}
							if first != nil {
								if f := first[i*sh.rows+r]; f != got && math.Abs(float64(f-got)) > 0x1p-22*(absW[r]+qerr[r]) {
									t.Fatalf("input %d row %d: %s %g, go %g", i, r, kn.name, got, f)
								}
							}
						}
					}
					if first == nil {
						first = y
					}
				}
			})
		}
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

// BenchmarkGEMM times a batch of 64 inputs (and 512, a prompt's) through
// TinyLlama's largest matrix shape (5632×2048) per type, one thread, and
// reports the multiply-add rate.
func BenchmarkGEMM(b *testing.B) {
	const rows, cols = 5632, 2048
	p := NewPool(1)
	defer p.Close()
	// Where AMX runs, the VNNI kernels are timed too ("/vnni").
	amx, amx6 := gemmAMX, gemmAMX6
	defer func() { gemmAMX, gemmAMX6 = amx, amx6 }()
	kinds := []string{""}
	if amx != nil {
		kinds = append(kinds, "/vnni")
	}
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q6_K} {
		for _, kind := range kinds {
			for _, n := range []int{64, 512} {
				b.Run(fmt.Sprintf("%s%s/n=%d", typ, kind, n), func(b *testing.B) {
					gemmAMX, gemmAMX6 = amx, amx6
					if kind != "" {
						gemmAMX, gemmAMX6 = nil, nil
					}
					rng := rand.New(rand.NewPCG(1, 2))
					w := benchWeights(typ, rows, cols)
					x := randomInput(rng, n*cols)
					y := make([]float32, n*rows)
					for b.Loop() {
						MatMul(p, typ, w, rows, cols, x, n, y)
					}
					b.ReportMetric(float64(b.N)*rows*cols*float64(n)/b.Elapsed().Seconds()/1e9, "GMAC/s")
				})
			}
		}
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
