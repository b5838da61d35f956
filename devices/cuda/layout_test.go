package cuda

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"hybrid/quant"
)

// TestRegroupRow checks the device's Q4_0 and Q8_0 rows against the
// offsets the kernels read them at (kernels/quant.cuh: with QB quant bytes
// a block, grp_d(row, b) = (16 + 8·QB)·(b/8) + 2·(b%8) and grp_q(row, b) =
// (16 + 8·QB)·(b/8) + 16 + QB·(b%8)): every block's scale and quants where
// they say, each quant run 16-byte aligned, the padding of a last group of
// fewer than eight blocks zeros, for rows of whole groups and not.
func TestRegroupRow(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0} {
		bb := regroupBlock[typ]
		qb := bb - 2
		for _, cols := range []int{32, 224, 256, 2048, 2880, 5632} {
			nb := cols / 32
			src := make([]byte, bb*nb)
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			n := regroupRowBytes(bb, cols)
			if n%16 != 0 || n < bb*nb || n >= bb*nb+8*bb {
				t.Fatalf("%s, %d columns: %d bytes a row", typ, cols, n)
			}
			dst := make([]byte, n)
			for i := range dst {
				dst[i] = 0xff // regroupRow writes every byte
			}
			regroupRow(dst, src, bb)
			used := make([]bool, n)
			for b := range nb {
				g := (16 + 8*qb) * (b / 8)
				d, q := g+2*(b%8), g+16+qb*(b%8)
				if q%16 != 0 {
					t.Fatalf("%s, %d columns: block %d's quants at %d", typ, cols, b, q)
				}
				if !bytes.Equal(dst[d:d+2], src[bb*b:bb*b+2]) || !bytes.Equal(dst[q:q+qb], src[bb*b+2:bb*(b+1)]) {
					t.Fatalf("%s, %d columns: block %d not at its scale %d and quants %d", typ, cols, b, d, q)
				}
				for i := d; i < d+2; i++ {
					used[i] = true
				}
				for i := q; i < q+qb; i++ {
					used[i] = true
				}
			}
			for i, u := range used {
				if !u && dst[i] != 0 {
					t.Fatalf("%s, %d columns: padding byte %d is %#x", typ, cols, i, dst[i])
				}
			}
		}
	}
}
