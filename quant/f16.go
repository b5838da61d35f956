package quant

import (
	"math"
	"sync"
)

// F16ToF32 widens an IEEE binary16 value to float32. Every finite value and
// infinity converts exactly; a NaN keeps its sign and payload and comes back
// quiet, as ggml_compute_fp16_to_fp32 (and the F16C instruction) return it.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0:
		// Zero or subnormal: mant * 2^-24 is exact in float32.
		v := float32(mant) * (1.0 / (1 << 24))
		return math.Float32frombits(sign | math.Float32bits(v))
	case exp == 0x1f:
		bits := sign | 0x7f800000 | mant<<13
		if mant != 0 {
			bits |= 0x00400000 // quiet the NaN
		}
		return math.Float32frombits(bits)
	default:
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	}
}

// F32ToF16 rounds a float32 to the nearest IEEE binary16 value, ties to even,
// overflowing to infinity, as ggml_compute_fp32_to_fp16 does. Every NaN becomes
// the quiet NaN 0x7e00 with the input's sign, as in ggml.
func F32ToF16(f float32) uint16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	abs := bits & 0x7fffffff
	switch {
	case abs > 0x7f800000:
		return sign | 0x7e00
	case abs >= 0x477ff000: // 65520: halfway to 2^16 rounds (to even) up to infinity
		return sign | 0x7c00
	case abs < 0x38800000: // below 2^-14: a half subnormal or zero
		exp := abs >> 23
		if exp < 102 { // below 2^-25: rounds to zero (f32 subnormals included)
			return sign
		}
		m := abs&0x7fffff | 0x800000
		shift := 126 - exp // value = m * 2^(exp-150); want m * 2^(exp-126) in half ulps
		return sign | uint16(roundShift(m, shift))
	default:
		h := (abs>>23-112)<<10 | (abs&0x7fffff)>>13
		h = roundShiftTail(h, abs&0x1fff, 13)
		return sign | uint16(h)
	}
}

// roundShift returns m >> shift rounded to nearest, ties to even.
func roundShift(m, shift uint32) uint32 {
	return roundShiftTail(m>>shift, m&(1<<shift-1), shift)
}

// roundShiftTail rounds the truncated value q up when the dropped low bits rem
// (out of shift bits) exceed one half, or equal it and q is odd.
func roundShiftTail(q, rem, shift uint32) uint32 {
	half := uint32(1) << (shift - 1)
	if rem > half || rem == half && q&1 == 1 {
		q++
	}
	return q
}

// BF16ToF32 widens a bfloat16 value to float32; this is exact for every input.
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// F32ToBF16 rounds a float32 to bfloat16, ties to even, as
// ggml_compute_fp32_to_bf16 does: subnormals are kept, and a NaN keeps its top
// payload bits with the quiet bit forced on.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// F16Table returns a table of F16ToF32 for every binary16 bit pattern (256
// KiB, built on first use and shared: callers must not modify it). A lookup is
// about three times faster than F16ToF32 in bulk conversions.
func F16Table() *[1 << 16]float32 { return f16Table() }

var f16Table = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = F16ToF32(uint16(i))
	}
	return &t
})
