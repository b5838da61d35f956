//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"hybrid/quant"
)

// TestVNNIRowsBitIdentical requires the VNNI row kernels (q4_0RowsVNNI) to
// give their AVX2 kernels' results to the bit: the integer
// block sums are exact either way and the float adds are the same in the
// same order, so no tolerance. Row counts cover the four-, two- and one-row
// passes and their mixes.
func TestVNNIRowsBitIdentical(t *testing.T) {
	if !hasAVX2 || !hasAVX512VNNI {
		t.Skip("needs AVX2/FMA/F16C and AVX512-VNNI/VL")
	}
	p := NewPool(1)
	defer p.Close()
	cases := []struct {
		typ        quant.Type
		blockBytes int
		avx2, vnni func([]byte, int, *xrow, []float32)
		extremes   []byte // weight bytes that stress the integer sums
	}{
		{quant.Q4_0, 18, block32Offset(q4_0Rows), block32Offset(q4_0RowsVNNI), []byte{0x00, 0xff, 0x0f, 0xf0}},
	}
	for _, c := range cases {
		k := kernelFor[c.typ]
		for _, rows := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 33} {
			for _, nb := range []int{1, 7, 64, 176} {
				cols := 32 * nb
				t.Run(fmt.Sprintf("%s/%dx%d", c.typ, rows, cols), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
					w := randomWeights(t, rng, c.typ, rows, cols)
					x := randomInput(rng, cols)
					if rows%3 == 0 { // all-extreme weights and activations
						for i := range w {
							if i%c.blockBytes >= 2 {
								w[i] = c.extremes[rng.IntN(len(c.extremes))]
							}
						}
						for i := range x {
							x[i] = float32(1 - 2*rng.IntN(2))
						}
					}
					want, got := rowsPair(p, k, w, rows, x, c.avx2, c.vnni)
					for r := range rows {
						if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
							t.Errorf("row %d: VNNI %g (%#08x), AVX2 %g (%#08x)", r, got[r], math.Float32bits(got[r]), want[r], math.Float32bits(want[r]))
						}
					}
				})
			}
		}
	}
}
