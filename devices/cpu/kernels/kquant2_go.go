package kernels

import (
	"encoding/binary"
	"math"
	"unsafe"

	"hybrid/quant"
)

// Dot products of the 2- and 3-bit K-quant super-blocks (256 elements) with
// activations quantized by quantize256 (ggml's Q8_K), in the order of float
// additions llama.cpp uses for them on an AVX-512 x86 CPU, so that results
// agree with it to the bit (llamaorder_test.go checks them against its
// mat-mul outputs). The integer sums are exact whatever their grouping; the
// order that matters is of the float steps:
//
//   - Q2_K: llama.cpp repacks the weights of a matrix whose row count is a
//     multiple of 8 (Q2_K_8x8, on CPUs with AVX-512) and multiplies them per
//     row with one integer sum per super-block, FMA'd into a running float
//     by the f16 d times the activation's scale, the mins likewise into a
//     second float, subtracted at the end (ggml_gemv_q2_K_8x8_q8_K): the
//     row kernel. A batch's first n − n%4 inputs go through its GEMM
//     (ggml_gemm_q2_K_8x8_q8_K), which does the same per half super-block:
//     rows4. A matrix of another row count is not repacked, and llama.cpp
//     sums it in ggml_vec_dot_q2_K_q8_K's eight lanes instead, which these
//     kernels do not follow (they agree with it within rounding).
//   - Q3_K: never repacked on x86; ggml_vec_dot_q3_K_q8_K keeps eight int32
//     lanes per super-block (lane m holds elements 4m..4m+3 of every 32, times
//     their scales), FMAs them into eight float lanes by d times the
//     activation's scale, and adds the lanes at the end as hsum8 does.
//
// In Go the row kernels are bound by the decoding of each element, not by
// memory (on one Zen 5 thread about 0.35 GB/s of Q2_K and 0.25 GB/s of Q3_K
// weights); lowbit_amd64.s has AVX2 row kernels that give their results to
// the bit, installed where the CPU has the features
// (TestLowBitKernelBitIdentical). rows4 has no assembly.

// hsum8 adds eight float lanes as ggml's hsum_float_8 does: upper half plus
// lower half, then lanes (0+2)+(1+3).
func hsum8(a *[8]float32) float32 {
	return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
}

// q2KSums returns the integer dot of half h (elements 128h..128h+127) of a
// Q2_K block with activations q (the block's 256), each 16-element
// sub-block's sum times its 4-bit scale, and the sum of the half's eight
// 4-bit mins times the activation's per-16 sums bs. Sub-block 8h+2k+g takes
// bits 2k..2k+1 of quant bytes 32h+16g onward.
func q2KSums(blk []byte, q []int8, bs []int16, h int) (dot, mins int32) {
	sc := blk[:16]
	qs := blk[16+32*h : 48+32*h]
	for k := range 4 {
		shift := 2 * uint(k)
		qa := q[128*h+32*k : 128*h+32*k+32]
		var p0, p1 int32
		for l := range 16 {
			p0 += int32(qs[l]>>shift&3) * int32(qa[l])
			p1 += int32(qs[l+16]>>shift&3) * int32(qa[l+16])
		}
		s := 8*h + 2*k
		dot += int32(sc[s]&15)*p0 + int32(sc[s+1]&15)*p1
	}
	for s := 8 * h; s < 8*h+8; s++ {
		mins += int32(sc[s]>>4) * int32(bs[s])
	}
	return dot, mins
}

// Q2_K: {u8 scales[16]; u8 qs[64]; f16 d, dmin}, see quant's q2k.go. One row
// in llama.cpp's repacked GEMV order.
func dotQ2_KGo(w []byte, x *xrow) float32 {
	var acc, accMin float32
	for b, xd := range x.d {
		blk, q, bs := w[84*b:84*b+84], x.q[256*b:256*b+256], x.bs[16*b:16*b+16]
		d0, m0 := q2KSums(blk, q, bs, 0)
		d1, m1 := q2KSums(blk, q, bs, 1)
		acc = fma32(float32(d0+d1), half(blk[80:])*xd, acc)
		accMin = fma32(float32(m0+m1), half(blk[82:])*xd, accMin)
	}
	return acc - accMin
}

// q2_KRows4Go multiplies rows of Q2_K weights by the four inputs of tile
// (batch4.go's layout) in llama.cpp's repacked GEMM order: as the row kernel,
// but each half super-block's integer sums FMA'd into the floats apart.
func q2_KRows4Go(w []byte, stride, rows int, tile []byte, nb int, y []float32, ystride int) {
	var bs [4][16]int16
	for r := range rows {
		row := w[r*stride : (r+1)*stride]
		var acc, accMin [4]float32
		for b := range nb {
			blk := row[84*b : 84*b+84]
			tb := tile[b*q6TileBlock : (b+1)*q6TileBlock]
			d, dmin := half(blk[80:]), half(blk[82:])
			for t := range 4 {
				xd := math.Float32frombits(binary.LittleEndian.Uint32(tb[q6TileD+4*t:]))
				q := unsafe.Slice((*int8)(unsafe.Pointer(&tb[q6TileQ+256*t])), 256)
				for j := range bs[t] {
					bs[t][j] = int16(binary.LittleEndian.Uint16(tb[q6TileBS+32*t+2*j:]))
				}
				for h := range 2 {
					dot, mins := q2KSums(blk, q, bs[t][:], h)
					acc[t] = fma32(float32(dot), d*xd, acc[t])
					accMin[t] = fma32(float32(mins), dmin*xd, accMin[t])
				}
			}
		}
		for t := range 4 {
			y[t*ystride+r] = acc[t] - accMin[t]
		}
	}
}

// Q3_K: {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d}, see quant's q3k.go.
// One row in ggml_vec_dot_q3_K_q8_K's order.
func dotQ3_KGo(w []byte, x *xrow) float32 {
	var acc [8]float32
	var sc [16]int32
	for b, xd := range x.d {
		blk, q := w[110*b:110*b+110], x.q[256*b:256*b+256]
		hmask := blk[:32]
		for j := range sc {
			sc[j] = int32(quant.ScaleK3(j, blk[96:108]))
		}
		var lanes [8]int32
		for h := range 2 {
			qs := blk[32+32*h : 64+32*h]
			for k := range 4 {
				shift, bit := 2*uint(k), uint(4*h+k)
				qa := q[128*h+32*k : 128*h+32*k+32]
				for m := range 8 {
					var p int32
					for l := 4 * m; l < 4*m+4; l++ {
						v := int32(qs[l]>>shift&3) - 4*int32(^hmask[l]>>bit&1)
						p += v * int32(qa[l])
					}
					lanes[m] += sc[8*h+2*k+m/4] * p
				}
			}
		}
		d := xd * half(blk[108:])
		for m := range acc {
			acc[m] = fma32(d, float32(lanes[m]), acc[m])
		}
	}
	return hsum8(&acc)
}
