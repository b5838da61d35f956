package cuda

import "hybrid/quant"

// The device's layout of weight rows where it differs from the file's.

// regroupBlock is the file's block bytes of the types whose rows the device
// regroups (regroupRow): Q4_0's 18 and Q8_0's 34, a f16 scale and 16 or 32
// quant bytes each. Measured on an H200 (TestDecodeMatVec, µs, file blocks
// → regrouped): Q4_0 5632×2048 gate+up 7.63 → 6.68, 2560×2048 3.91 →
// 3.54; Q8_0 12.04 → 9.99, 5.18 → 4.52; tg128 TinyLlama Q4_0 1473 → 1513
// tok/s, Q8_0 1150 → 1232; pp512 unchanged.
var regroupBlock = map[quant.Type]int{quant.Q4_0: 18, quant.Q8_0: 34}

// regroupRowBytes is the bytes of a row of cols elements of a type with
// blocks of bb bytes (regroupBlock) as the device holds it: groups of eight
// blocks, 8·bb bytes each, the last one padded (regroupRow).
func regroupRowBytes(bb, cols int) int { return 8 * bb * ((cols/32 + 7) / 8) }

// regroupRow lays out one row of the file (src, blocks of bb bytes: f16
// scale, then bb-2 quant bytes) as the kernels read it (dst,
// regroupRowBytes; grp_d and grp_q in kernels/quant.cuh): each group of
// eight blocks their eight scales (16 bytes), then their quants, bb-2 bytes
// each, so that a block's quants are aligned 16-byte loads. Blocks past the
// row's last are zeros.
func regroupRow(dst, src []byte, bb int) {
	clear(dst)
	q := bb - 2
	for b := range len(src) / bb {
		g := dst[8*bb*(b/8):]
		j := b % 8
		copy(g[2*j:2*j+2], src[bb*b:bb*b+2])
		copy(g[16+q*j:16+q*j+q], src[bb*b+2:bb*(b+1)])
	}
}
