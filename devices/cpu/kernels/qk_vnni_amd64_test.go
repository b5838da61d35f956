//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"hybrid/quant"
)

// kRowsFunc is the signature of the K-quant assembly row kernels.
type kRowsFunc = func(w *byte, stride, rows int, xq *int8, xd *float32, bs *int16, nb int, y *float32)

// TestQKVNNIBitIdentical requires each VNNI K-quant kernel to give its AVX2
// kernel's results to the bit: the integer sums are the same exact integers
// and the float steps the same in the same order, so no tolerance.
func TestQKVNNIBitIdentical(t *testing.T) {
	if !hasAVX2 || !hasAVX512VNNI {
		t.Skip("needs AVX2/FMA/F16C and AVX512-VNNI/VL/BW")
	}
	p := NewPool(1)
	defer p.Close()
	for _, tc := range []struct {
		typ        quant.Type
		avx2, vnni kRowsFunc
		keep       []int // block bytes left alone in the extreme cases: the f16 scales
	}{
		{quant.Q4_K, q4_KRows, q4_KRowsVNNI, []int{0, 1, 2, 3}},
	} {
		k := kernelFor[tc.typ]
		bb := tc.typ.BlockBytes()
		for _, rows := range []int{1, 2, 3, 4, 5, 7, 9, 33} {
			for _, nb := range []int{1, 2, 8, 22} {
				cols := 256 * nb
				t.Run(fmt.Sprintf("%s/%dx%d", tc.typ, rows, cols), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
					w := randomWeights(t, rng, tc.typ, rows, cols)
					x := randomInput(rng, cols)
					if rows%3 == 0 { // extreme weights, scales, mins and activations
						for i := range w {
							if !slices.Contains(tc.keep, i%bb) {
								w[i] = []byte{0x00, 0xff, 0x0f, 0xf0, 0x80, 0x7f}[rng.IntN(6)]
							}
						}
						for i := range x {
							x[i] = float32(1 - 2*rng.IntN(2))
						}
					}
					want, got := rowsPair(p, k, w, rows, x, block256(tc.avx2), block256(tc.vnni))
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
