package cuda

// The device's layout of weight rows that differs from the file's.

// q40RowBytes is the bytes of a row of cols Q4_0 elements as the device
// holds it: groups of eight 18-byte blocks, 144 bytes each, the last one
// padded (regroupQ40).
func q40RowBytes(cols int) int { return 144 * ((cols/32 + 7) / 8) }

// regroupQ40 lays out one Q4_0 row of the file (src, 18-byte blocks: f16
// scale, 16 quant bytes) as the kernels read it (dst, q40RowBytes; q40_d
// and q40_q in kernels/quant.cuh): each group of eight blocks their eight
// scales (16 bytes), then their quants, 16 bytes each, so that a block's
// quants are one aligned 16-byte load. Blocks past the row's last are
// zeros.
func regroupQ40(dst, src []byte) {
	clear(dst)
	for b := range len(src) / 18 {
		g := dst[144*(b/8):]
		j := b % 8
		copy(g[2*j:2*j+2], src[18*b:18*b+2])
		copy(g[16+16*j:32+16*j], src[18*b+2:18*b+18])
	}
}
