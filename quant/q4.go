package quant

import (
	"encoding/binary"
	"math"
)

// Q4_0 block (18 bytes, 32 elements): f16 scale d, then 16 bytes whose low
// nibbles are elements 0..15 and high nibbles elements 16..31; x = (q-8)*d.
//
// Q4_1 block (20 bytes, 32 elements): f16 scale d, f16 offset m, then the same
// nibble layout; x = q*d + m.

func dequantizeQ4_0(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b, dst = b+18, dst[32:] {
		blk := src[b : b+18]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		qs := blk[2:18]
		for j, q := range qs {
			dst[j] = float32(int32(q&0xf)-8) * d
			dst[j+16] = float32(int32(q>>4)-8) * d
		}
	}
}

func quantizeQ4_0(src []float32, dst []byte) {
	for b := 0; len(src) > 0; b, src = b+18, src[32:] {
		x := src[:32]
		blk := dst[b : b+18]
		// The scale is taken from the value of largest magnitude, sign
		// included, so that it maps exactly to -8 (the nibble 0).
		var amax, vmax float32
		for _, v := range x {
			if a := abs32(v); amax < a {
				amax, vmax = a, v
			}
		}
		d := vmax / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(blk, F32ToF16(d))
		for j := range 16 {
			lo := min(15, truncInt8(float32(x[j]*id)+8.5))
			hi := min(15, truncInt8(float32(x[j+16]*id)+8.5))
			blk[2+j] = uint8(lo) | uint8(hi)<<4
		}
	}
}

func dequantizeQ4_1(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b, dst = b+20, dst[32:] {
		blk := src[b : b+20]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		m := F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
		for j, q := range blk[4:20] {
			dst[j] = float32(float32(q&0xf)*d) + m
			dst[j+16] = float32(float32(q>>4)*d) + m
		}
	}
}

func quantizeQ4_1(src []float32, dst []byte) {
	for b := 0; len(src) > 0; b, src = b+20, src[32:] {
		x := src[:32]
		blk := dst[b : b+20]
		lo, hi := minMax(x)
		d := (hi - lo) / 15
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(blk, F32ToF16(d))
		binary.LittleEndian.PutUint16(blk[2:], F32ToF16(lo))
		for j := range 16 {
			q0 := min(15, truncInt8(float32((x[j]-lo)*id)+0.5))
			q1 := min(15, truncInt8(float32((x[j+16]-lo)*id)+0.5))
			blk[4+j] = uint8(q0) | uint8(q1)<<4
		}
	}
}

// minMax returns the smallest and largest of x, scanning as llama.cpp's
// Q4_1/Q5_1 quantizers do (NaNs are skipped by the comparisons).
func minMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// truncInt8 converts like C's (int8_t) cast of a float on the usual targets:
// truncate toward zero to 32 bits, then keep the low byte.
func truncInt8(v float32) int8 { return int8(int32(v)) }

// truncUint8 is the (uint8_t) cast counterpart of truncInt8.
func truncUint8(v float32) uint8 { return uint8(int32(v)) }
