package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// ggmlF16ToF32 and ggmlF32ToF16 transcribe ggml's portable conversions
// (ggml-impl.h, after Maratyszcza's FP16 library) float operation for float
// operation. They are the independent references the bit-level versions in
// f16.go are checked against.
func ggmlF16ToF32(h uint16) float32 {
	w := uint32(h) << 16
	sign := w & 0x80000000
	twoW := w + w
	const expOffset = 0xE0 << 23
	expScale := math.Float32frombits(0x7800000) // 2^-112
	normalized := math.Float32frombits(twoW>>4+expOffset) * expScale
	const magicMask = 126 << 23
	denormalized := math.Float32frombits(twoW>>17|magicMask) - 0.5
	var bits uint32
	if twoW < 1<<27 {
		bits = math.Float32bits(denormalized)
	} else {
		bits = math.Float32bits(normalized)
	}
	return math.Float32frombits(sign | bits)
}

func ggmlF32ToF16(f float32) uint16 {
	scaleToInf := math.Float32frombits(0x77800000)  // 2^112
	scaleToZero := math.Float32frombits(0x08800000) // 2^-110
	base := float32(float32(abs32(f)*scaleToInf) * scaleToZero)
	w := math.Float32bits(f)
	shl1W := w + w
	sign := w & 0x80000000
	bias := shl1W & 0xFF000000
	if bias < 0x71000000 {
		bias = 0x71000000
	}
	base = math.Float32frombits(bias>>1+0x07800000) + base
	bits := math.Float32bits(base)
	expBits := bits >> 13 & 0x7C00
	mantBits := bits & 0x0FFF
	nonsign := expBits + mantBits
	if shl1W > 0xFF000000 {
		nonsign = 0x7E00
	}
	return uint16(sign>>16) | uint16(nonsign)
}

func TestF16ToF32Exhaustive(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		got, want := F16ToF32(h), ggmlF16ToF32(h)
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("F16ToF32(%#04x) = %#08x, ggml gives %#08x", h, math.Float32bits(got), math.Float32bits(want))
		}
		if tab := f16Table()[h]; math.Float32bits(tab) != math.Float32bits(want) {
			t.Fatalf("f16Table[%#04x] = %#08x, want %#08x", h, math.Float32bits(tab), math.Float32bits(want))
		}
		back := F32ToF16(got)
		if isNaN16(h) {
			if back != h&0x8000|0x7e00 {
				t.Fatalf("F32ToF16(NaN from %#04x) = %#04x, want the quiet NaN 0x7e00 with its sign", h, back)
			}
		} else if back != h {
			t.Fatalf("F32ToF16(F16ToF32(%#04x)) = %#04x", h, back)
		}
	}
}

func isNaN16(h uint16) bool { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }

// TestF32ToF16 compares against ggml's arithmetic on the values where rounding
// decides: each half value's neighbours and the midpoints between adjacent
// halves (ties), one f32 ulp either side, plus random bit patterns.
func TestF32ToF16(t *testing.T) {
	check := func(f float32) {
		t.Helper()
		if got, want := F32ToF16(f), ggmlF32ToF16(f); got != want {
			t.Fatalf("F32ToF16(%g = %#08x) = %#04x, ggml gives %#04x", f, math.Float32bits(f), got, want)
		}
	}
	for i := range 0x7c00 { // every finite non-negative half and the next
		lo, hi := float64(F16ToF32(uint16(i))), float64(F16ToF32(uint16(i+1)))
		mid := float32((lo + hi) / 2) // exact: halves have 11 significant bits
		for _, f := range []float32{float32(lo), mid} {
			bits := math.Float32bits(f)
			for _, b := range []uint32{bits - 1, bits, bits + 1} {
				check(math.Float32frombits(b))
				check(-math.Float32frombits(b))
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		check(math.Float32frombits(rng.Uint32()))
	}
	for _, f := range []float32{0, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32, math.SmallestNonzeroFloat32} {
		check(f)
	}
}

// refF32ToBF16 rounds through float64 arithmetic: pick the nearer of the two
// bfloat16 values around f, the even one on a tie.
func refF32ToBF16(f float32) uint16 {
	bits := math.Float32bits(f)
	lo := uint16(bits >> 16)
	if bits&0xffff == 0 {
		return lo
	}
	flo, fhi := float64(BF16ToF32(lo)), float64(BF16ToF32(lo+1))
	if lo&0x7f80 == 0x7f00 && lo&0x7f == 0x7f { // lo+1 is infinity
		fhi = math.Copysign(math.Ldexp(1, 128), flo)
	}
	dlo, dhi := math.Abs(float64(f)-flo), math.Abs(fhi-float64(f))
	if dlo < dhi || dlo == dhi && lo&1 == 0 {
		return lo
	}
	return lo + 1
}

func TestBF16(t *testing.T) {
	for i := range 1 << 16 {
		b := uint16(i)
		f := BF16ToF32(b)
		if math.Float32bits(f) != uint32(b)<<16 {
			t.Fatalf("BF16ToF32(%#04x) = %#08x", b, math.Float32bits(f))
		}
		back := F32ToBF16(f)
		if f != f {
			if back != b|0x40 {
				t.Fatalf("F32ToBF16(NaN %#08x) = %#04x, want %#04x (quieted)", math.Float32bits(f), back, b|0x40)
			}
		} else if back != b {
			t.Fatalf("F32ToBF16(BF16ToF32(%#04x)) = %#04x", b, back)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 1 << 20 {
		bits := rng.Uint32()
		if i%4 == 0 {
			bits = bits&^0xffff | 0x8000 // exact ties
		}
		f := math.Float32frombits(bits)
		if f != f {
			continue
		}
		if got, want := F32ToBF16(f), refF32ToBF16(f); got != want {
			t.Fatalf("F32ToBF16(%g = %#08x) = %#04x, want %#04x", f, bits, got, want)
		}
	}
}
