package cuda

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"hybrid/quant"
)

// TestRegroupRow checks the device's regrouped rows against the offsets the
// kernels read them at (kernels/quant.cuh): for Q4_0 and Q8_0 with QB quant
// bytes a block, grp_d(row, b) = (16 + 8·QB)·(b/8) + 2·(b%8) and grp_q(row,
// b) = (16 + 8·QB)·(b/8) + 16 + QB·(b%8); for Q6_K, q6_ql, q6_qh, q6_sc and
// q6_d at 1680·(b/8) + 128·(b%8), + 1024 + 64·(b%8), + 1536 + 16·(b%8) and
// + 1664 + 2·(b%8). Every block's fields are where they say, each quant
// run (and Q6_K's scales) 16-byte aligned, the padding of a last group of
// fewer than eight blocks zeros, for rows of whole groups and not.
func TestRegroupRow(t *testing.T) {
	type field struct{ from, n, at int } // a field's bytes in the file's block and its offset in the row
	q6 := func(b int) []field {
		g, j := 1680*(b/8), b%8
		return []field{{0, 128, g + 128*j}, {128, 64, g + 1024 + 64*j}, {192, 16, g + 1536 + 16*j}, {208, 2, g + 1664 + 2*j}}
	}
	grp := func(qb int) func(int) []field {
		return func(b int) []field {
			g := (16 + 8*qb) * (b / 8)
			return []field{{0, 2, g + 2*(b%8)}, {2, qb, g + 16 + qb*(b%8)}}
		}
	}
	kernels := map[quant.Type]func(int) []field{quant.Q4_0: grp(16), quant.Q8_0: grp(32), quant.Q6_K: q6}
	r := rand.New(rand.NewPCG(7, 8))
	for typ, f := range regroupFields {
		at := kernels[typ]
		if at == nil {
			t.Fatalf("%s: no kernel offsets to check", typ)
		}
		bb, sum := typ.BlockBytes(), 0
		for _, n := range f {
			sum += n
		}
		if sum != bb {
			t.Fatalf("%s: fields of %d bytes, blocks of %d", typ, sum, bb)
		}
		for _, blocks := range []int{1, 7, 8, 9, 64, 90, 176} {
			cols := blocks * typ.BlockSize()
			src := make([]byte, bb*blocks)
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			n := regroupRowBytes(typ, cols)
			if n%16 != 0 || n < bb*blocks || n >= bb*blocks+8*bb {
				t.Fatalf("%s, %d columns: %d bytes a row", typ, cols, n)
			}
			dst := make([]byte, n)
			for i := range dst {
				dst[i] = 0xff // regroupRow writes every byte
			}
			regroupRow(dst, src, typ)
			used := make([]bool, n)
			for b := range blocks {
				for i, fl := range at(b) {
					if fl.n >= 16 && fl.at%16 != 0 {
						t.Fatalf("%s, %d columns: block %d's field %d at %d", typ, cols, b, i, fl.at)
					}
					if !bytes.Equal(dst[fl.at:fl.at+fl.n], src[bb*b+fl.from:bb*b+fl.from+fl.n]) {
						t.Fatalf("%s, %d columns: block %d's field %d not at %d", typ, cols, b, i, fl.at)
					}
					for k := fl.at; k < fl.at+fl.n; k++ {
						used[k] = true
					}
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
