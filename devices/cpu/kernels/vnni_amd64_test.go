//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"hybrid/quant"
)

// TestQ4_0VNNIBitIdentical requires q4_0RowsVNNI to give q4_0Rows's results
// to the bit: the integer block sums are exact either way and the float
// adds are the same in the same order, so no tolerance.
func TestQ4_0VNNIBitIdentical(t *testing.T) {
	if !hasAVX2 || !hasAVX512VNNI {
		t.Skip("needs AVX2/FMA/F16C and AVX512-VNNI/VL")
	}
	p := NewPool(1)
	defer p.Close()
	k := kernelFor[quant.Q4_0]
	for _, rows := range []int{1, 2, 3, 4, 5, 7, 8, 9, 33} {
		for _, nb := range []int{1, 7, 64, 176} {
			cols := 32 * nb
			t.Run(fmt.Sprintf("%dx%d", rows, cols), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
				w := randomWeights(t, rng, quant.Q4_0, rows, cols)
				x := randomInput(rng, cols)
				if rows%3 == 0 { // all-extreme nibbles and activations
					for i := range w {
						if i%18 >= 2 {
							w[i] = []byte{0x00, 0xff, 0x0f, 0xf0}[rng.IntN(4)]
						}
					}
					for i := range x {
						x[i] = float32(1 - 2*rng.IntN(2))
					}
				}
				xs := p.scratch.prepare(p, k, x, 1, cols)
				stride := len(w) / rows
				want := make([]float32, rows)
				got := make([]float32, rows)
				block32Offset(q4_0Rows)(w, stride, &xs[0], want)
				block32Offset(q4_0RowsVNNI)(w, stride, &xs[0], got)
				for r := range rows {
					if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
						t.Errorf("row %d: VNNI %g (%#08x), AVX2 %g (%#08x)", r, got[r], math.Float32bits(got[r]), want[r], math.Float32bits(want[r]))
					}
				}
			})
		}
	}
}
