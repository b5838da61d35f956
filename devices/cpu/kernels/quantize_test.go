package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// quantRows returns activation rows of n floats (n a multiple of 256) made
// to probe the quantizers: Gaussians of many scales, zero blocks, blocks of
// one repeated value, largest magnitudes tied with opposite signs, huge,
// tiny and subnormal values (down to where 127/max overflows), infinities,
// products landing on .5 (ties to even) and random finite bit patterns.
func quantRows(rng *rand.Rand, n int) [][]float32 {
	var rows [][]float32
	add := func(f func(i int) float32) {
		r := make([]float32, n)
		for i := range r {
			r[i] = f(i)
		}
		rows = append(rows, r)
	}
	for _, scale := range []float64{1, 1e-3, 1e3, 1e-20, 1e20, 1e-37, 1e-39, 1e-43, 1e36} {
		add(func(int) float32 { return float32(rng.NormFloat64() * scale) })
	}
	// Blocks of mixed kinds, chosen per 32 elements.
	for range 40 {
		r := make([]float32, n)
		for b := 0; b < n; b += 32 {
			blk := r[b : b+32]
			switch rng.IntN(12) {
			case 0: // zeros, some negative
				for i := range blk {
					if rng.IntN(2) == 0 {
						blk[i] = float32(math.Copysign(0, -1))
					}
				}
			case 1: // one value repeated
				v := float32(rng.NormFloat64())
				for i := range blk {
					blk[i] = v
				}
			case 2, 3: // ties of |max| with both signs
				m := float32(rng.ExpFloat64() + 1)
				for i := range blk {
					blk[i] = float32(rng.NormFloat64()) * m / 8
				}
				i, j := rng.IntN(32), rng.IntN(32)
				blk[i], blk[j] = m, -m
			case 4: // products on .5: max 127, values k + 0.5
				for i := range blk {
					blk[i] = float32(rng.IntN(254)-127) + 0.5
				}
				blk[rng.IntN(32)] = 127 * float32(1-2*rng.IntN(2))
			case 5: // random finite bit patterns
				for i := range blk {
					for {
						v := math.Float32frombits(rng.Uint32())
						if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) {
							blk[i] = v
							break
						}
					}
				}
			case 6: // one nonzero value
				blk[rng.IntN(32)] = float32(rng.NormFloat64())
			case 7: // an infinity
				for i := range blk {
					blk[i] = float32(rng.NormFloat64())
				}
				blk[rng.IntN(32)] = float32(math.Inf(1 - 2*rng.IntN(2)))
			case 8: // huge
				for i := range blk {
					blk[i] = float32(rng.NormFloat64() * 1e38)
				}
			case 9: // subnormal
				for i := range blk {
					blk[i] = math.Float32frombits(rng.Uint32N(1<<23)) * float32(1-2*rng.IntN(2))
				}
			default:
				sc := math.Pow(10, rng.Float64()*12-6)
				for i := range blk {
					blk[i] = float32(rng.NormFloat64() * sc)
				}
			}
		}
		rows = append(rows, r)
	}
	// Whole blocks of 256 with ties of |max| in other blocks of 32.
	for range 20 {
		r := make([]float32, n)
		for i := range r {
			r[i] = float32(rng.NormFloat64())
		}
		for b := 0; b < n; b += 256 {
			m := float32(5 + rng.Float64())
			i, j := rng.IntN(256), rng.IntN(256)
			r[b+i], r[b+j] = m, -m
			if rng.IntN(2) == 0 {
				r[b+rng.IntN(256)] = m
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// newQRow returns an xrow for n activations whose buffers hold junk.
func newQRow(n int) *xrow {
	r := &xrow{q: make([]int8, n), d: make([]float32, n/32), s: make([]float32, n/32), bs: make([]int16, n/16)}
	for i := range r.q {
		r.q[i] = 0x55
	}
	for i := range r.d {
		r.d[i], r.s[i] = 42, 42
	}
	for i := range r.bs {
		r.bs[i] = 0x5555
	}
	return r
}

func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

func compareQRows(t *testing.T, what string, row int, got, want *xrow) {
	t.Helper()
	switch {
	case !slices.Equal(got.q, want.q):
		t.Fatalf("%s row %d: q differs", what, row)
	case !sameBits(got.d, want.d):
		t.Fatalf("%s row %d: d differs: %v, want %v", what, row, got.d, want.d)
	case !sameBits(got.s, want.s):
		t.Fatalf("%s row %d: s differs: %v, want %v", what, row, got.s, want.s)
	case !slices.Equal(got.bs, want.bs):
		t.Fatalf("%s row %d: bs differs: %v, want %v", what, row, got.bs, want.bs)
	}
}

// TestQuantize32BitIdentical checks quantize32 (the assembly, where the CPU
// has it) and the AVX2 assembly, where the CPU can run it, against
// quantize32Go for Q8_0's sums and Q8_1's.
func TestQuantize32BitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{32, 256, 2048, 4096 + 32*3} {
		nn := (n + 255) / 256 * 256
		for i, x := range quantRows(rng, nn) {
			x = x[:n]
			for _, q81 := range []bool{false, true} {
				want := newQRow(nn)
				quantize32Go(x, want, q81)
				got := newQRow(nn)
				quantize32(x, got, q81)
				compareQRows(t, "quantize32", i, got, want)
				if quantize32AVX2Impl != nil {
					got := newQRow(nn)
					quantize32AVX2Impl(x, got, q81)
					compareQRows(t, "quantize32 (AVX2)", i, got, want)
				}
			}
		}
	}
}

// TestQuantize256BitIdentical checks quantize256 against quantize256Go.
func TestQuantize256BitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{256, 2048, 5632} {
		for i, x := range quantRows(rng, n) {
			got, want := newQRow(n), newQRow(n)
			quantize256(x, got)
			quantize256Go(x, want)
			compareQRows(t, "quantize256", i, got, want)
		}
	}
}

func benchQuant(b *testing.B, f func(x []float32, r *xrow)) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, 2048)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	r := newQRow(len(x))
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		f(x, r)
	}
}

// BenchmarkQuantize32 times one 2048-element row, Go against the kernel
// in use (the same when there is no assembly).
func BenchmarkQuantize32(b *testing.B) {
	b.Run("Go", func(b *testing.B) { benchQuant(b, func(x []float32, r *xrow) { quantize32Go(x, r, false) }) })
	b.Run("Go/q81", func(b *testing.B) { benchQuant(b, func(x []float32, r *xrow) { quantize32Go(x, r, true) }) })
	b.Run("Kernel", func(b *testing.B) { benchQuant(b, func(x []float32, r *xrow) { quantize32(x, r, false) }) })
	b.Run("Kernel/q81", func(b *testing.B) { benchQuant(b, func(x []float32, r *xrow) { quantize32(x, r, true) }) })
	b.Run("AVX2", func(b *testing.B) {
		if quantize32AVX2Impl == nil {
			b.Skip("no AVX2 assembly")
		}
		benchQuant(b, func(x []float32, r *xrow) { quantize32AVX2Impl(x, r, false) })
	})
}

// BenchmarkQuantize256 times one 2048-element row.
func BenchmarkQuantize256(b *testing.B) {
	b.Run("Go", func(b *testing.B) { benchQuant(b, quantize256Go) })
	b.Run("Kernel", func(b *testing.B) { benchQuant(b, quantize256) })
}
