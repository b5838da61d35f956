package cuda

import "hybrid/quant"

// The device's layout of weight rows where it differs from the file's.

// regroupFields are the fields of a file's block, in bytes and in the
// block's order, of the types whose rows the device regroups (regroupRow):
// Q4_0's and Q8_0's f16 scale and 16 or 32 quant bytes, Q6_K's 128 bytes of
// ql, 64 of qh, 16 scales and f16 d. Measured on an H200
// (TestDecodeMatVec, µs, file blocks → regrouped): Q4_0 5632×2048 gate+up
// 7.63 → 6.68, 2560×2048 3.91 → 3.54; Q8_0 12.04 → 9.99, 5.18 → 4.52;
// tg128 TinyLlama Q4_0 1473 → 1513 tok/s, Q8_0 1150 → 1232; pp512
// unchanged. Q6_K: 2048×5632 7.33 → 6.90, 4096×4096 8.50 → 7.94,
// 2048×2048 4.17 → 3.79, 4096×11008 18.1 → 18.3; tg128 Llama-7B Q4_K_M
// 487 → 499.5, TinyLlama Q4_K_M 1412 → 1439. A row of Q6_K whose blocks are
// no whole number of groups is padded to one (7B's ffn_down, 43 blocks a
// row: 12% more of its memory, none of it read).
var regroupFields = map[quant.Type][]int{quant.Q4_0: {2, 16}, quant.Q8_0: {2, 32}, quant.Q6_K: {128, 64, 16, 2}}

// regroupRowBytes is the bytes of a row of cols elements of type t
// (regroupFields) as the device holds it: groups of eight blocks, eight
// blocks' bytes each, the last one padded (regroupRow).
func regroupRowBytes(t quant.Type, cols int) int {
	return 8 * t.BlockBytes() * ((cols/t.BlockSize() + 7) / 8)
}

// regroupRow lays out one row of the file (src, blocks of type t, whose
// fields are regroupFields[t]) as the kernels read it (dst, regroupRowBytes;
// grp_d, grp_q and q6_grp in kernels/quant.cuh): each group of eight blocks
// holds the eight blocks' first field one after another, then their second,
// and so on, so that a block's quants (and Q6_K's scales) start at multiples
// of 16 bytes. Blocks past the row's last are zeros.
func regroupRow(dst, src []byte, t quant.Type) {
	clear(dst)
	bb := t.BlockBytes()
	for b := range len(src) / bb {
		g, j, at := dst[8*bb*(b/8):], b%8, bb*b
		for _, n := range regroupFields[t] {
			copy(g[n*j:n*(j+1)], src[at:at+n])
			g, at = g[8*n:], at+n
		}
	}
}
