package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// extremeHalves are f16 scales at the edges of the format: the largest
// finite, the smallest subnormal and normal, zeros, and ordinary ones.
var extremeHalves = []uint16{0x7bff, 0xfbff, 0x0001, 0x8001, 0x0400, 0x0000, 0x8000, 0x3c00, 0xbc00, 0x1e66}

// TestLowBitKernelBitIdentical requires the row kernel in use for each
// low-bit type (lowbit_amd64.s where the CPU has AVX2, else the Go one) to
// give the portable Go kernel's results to the bit, on random and on
// extreme rows: the integer sums are exact either way and the float steps
// are the same in the same order, so no tolerance. Under -tags purego, or on
// a CPU without the features, the Go kernel is the one in use and this
// checks that it is installed.
func TestLowBitKernelBitIdentical(t *testing.T) {
	p := NewPool(1)
	defer p.Close()
	for _, typ := range lowBitTypes {
		k, ref := kernelFor[typ], portable[typ]
		bb, bsz := typ.BlockBytes(), typ.BlockSize()
		nbs := []int{1, 2, 3, 8, 22}
		if bsz == 32 {
			nbs = []int{1, 2, 7, 64, 176}
		}
		for _, rows := range []int{1, 2, 3, 5, 8, 33} {
			for _, nb := range nbs {
				for _, mode := range []string{"random", "extreme", "bigx"} {
					cols := bsz * nb
					t.Run(fmt.Sprintf("%s/%s/%dx%d", typ, mode, rows, cols), func(t *testing.T) {
						rng := rand.New(rand.NewPCG(uint64(rows*1000+nb), uint64(typ)))
						w := lowBitWeights(t, rng, typ, rows, cols)
						x := randomInput(rng, cols)
						switch mode {
						case "extreme": // extreme bytes, f16 scales and activations
							for i := range w {
								w[i] = []byte{0x00, 0xff, 0x0f, 0xf0, 0x80, 0x7f, 0x55, 0xaa}[rng.IntN(8)]
							}
							for b := 0; b < len(w); b += bb {
								for _, o := range lowBitScales[typ] {
									binary.LittleEndian.PutUint16(w[b+o:], extremeHalves[rng.IntN(len(extremeHalves))])
								}
							}
							for i := range x {
								x[i] = float32(1 - 2*rng.IntN(2))
							}
						case "bigx": // large activations, every third block zero
							for i := range x {
								x[i] *= 1e6
							}
							for i := 0; i+bsz <= len(x); i += 3 * bsz {
								clear(x[i : i+bsz])
							}
						}
						want, got := rowsPair(p, k, w, rows, x, ref.rows, k.rows)
						for r := range rows {
							g, w := got[r], want[r]
							if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
								t.Errorf("row %d: %g (%#08x), Go kernel %g (%#08x)", r, g, math.Float32bits(g), w, math.Float32bits(w))
							}
						}
					})
				}
			}
		}
	}
}

// BenchmarkLowBitRows compares, on one thread, each low-bit type's kernel
// in use with its portable Go kernel on a mat-vec of TinyLlama's MLP
// shapes, in weight bytes per second.
func BenchmarkLowBitRows(b *testing.B) {
	p := NewPool(1)
	defer p.Close()
	for _, typ := range lowBitTypes {
		for _, sh := range []shape{{2048, 5632}, {5632, 2048}} {
			w := benchWeights(typ, sh.rows, sh.cols)
			x := randomInput(rand.New(rand.NewPCG(7, 8)), sh.cols)
			y := make([]float32, sh.rows)
			for _, v := range []struct {
				name string
				k    kernel
			}{{"go", portable[typ]}, {"inuse", *kernelFor[typ]}} {
				b.Run(fmt.Sprintf("%s/%dx%d/%s", typ, sh.rows, sh.cols, v.name), func(b *testing.B) {
					b.SetBytes(int64(len(w)))
					for b.Loop() {
						p.matMul(&v.k, w, sh.rows, sh.cols, x, 1, y)
					}
				})
			}
		}
	}
}

// rowsPair runs two row kernels over the same rows of weights w and the
// activations x, quantized once as k takes them, and returns the first's
// results and the second's: the tests that require two kernels to agree to
// the bit.
func rowsPair(p *Pool, k *kernel, w []byte, rows int, x []float32, a, b func([]byte, int, *xrow, []float32)) (want, got []float32) {
	xs := p.scratch.prepare(p, k, x, 1, len(x))
	stride := len(w) / rows
	want, got = make([]float32, rows), make([]float32, rows)
	a(w, stride, &xs[0], want)
	b(w, stride, &xs[0], got)
	return want, got
}
