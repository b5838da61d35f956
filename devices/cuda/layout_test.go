package cuda

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestRegroupQ40 checks the device's Q4_0 rows against the offsets the
// kernels read them at (kernels/quant.cuh: q40_d(row, b) = 144·(b/8) +
// 2·(b%8), q40_q(row, b) = 144·(b/8) + 16 + 16·(b%8)): every block's scale
// and quants where they say, each quant run 16-byte aligned, the padding of
// a last group of fewer than eight blocks zeros, for rows of whole groups
// and not.
func TestRegroupQ40(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, cols := range []int{32, 224, 256, 2048, 2880, 5632} {
		nb := cols / 32
		src := make([]byte, 18*nb)
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		n := q40RowBytes(cols)
		if n%16 != 0 || n < 18*nb || n >= 18*nb+144 {
			t.Fatalf("%d columns: %d bytes a row", cols, n)
		}
		dst := make([]byte, n)
		for i := range dst {
			dst[i] = 0xff // regroupQ40 writes every byte
		}
		regroupQ40(dst, src)
		used := make([]bool, n)
		for b := range nb {
			d, q := 144*(b/8)+2*(b%8), 144*(b/8)+16+16*(b%8)
			if q%16 != 0 {
				t.Fatalf("%d columns: block %d's quants at %d", cols, b, q)
			}
			if !bytes.Equal(dst[d:d+2], src[18*b:18*b+2]) || !bytes.Equal(dst[q:q+16], src[18*b+2:18*b+18]) {
				t.Fatalf("%d columns: block %d not at its scale %d and quants %d", cols, b, d, q)
			}
			for i := d; i < d+2; i++ {
				used[i] = true
			}
			for i := q; i < q+16; i++ {
				used[i] = true
			}
		}
		for i, u := range used {
			if !u && dst[i] != 0 {
				t.Fatalf("%d columns: padding byte %d is %#x", cols, i, dst[i])
			}
		}
	}
}
