package quant

import (
	"encoding/binary"
	"math"
	"testing"
)

// The known-block tests build blocks by hand from the layouts as documented
// (llama.cpp's ggml-common.h), with scales that are small powers of two so
// every expected value is exact, and compute each element's value straight
// from the format's formula, element by element, independently of the
// decoders' loop structure.

const (
	f16Half     = 0x3800 // 0.5
	f16Quarter  = 0x3400 // 0.25
	f16Eighth   = 0x3000 // 0.125
	f16MinusTwo = 0xc000 // -2
)

func putF16(b []byte, h uint16) { binary.LittleEndian.PutUint16(b, h) }

// pattern returns deterministic bytes that exercise every nibble value.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*37) + seed
	}
	return b
}

func checkDequant(t *testing.T, typ Type, blk []byte, want func(i int) float64) {
	t.Helper()
	got := make([]float32, typ.BlockSize())
	if err := Dequantize(typ, blk, got); err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if w := want(i); float64(g) != w {
			t.Fatalf("element %d = %g, want %g", i, g, w)
		}
	}
}

// nibble is element i's 4-bit quant in a 32-element block of 16 packed bytes:
// low nibbles hold elements 0..15, high nibbles 16..31.
func nibble(qs []byte, i int) int {
	if i < 16 {
		return int(qs[i] & 0xf)
	}
	return int(qs[i-16] >> 4)
}

func TestKnownBlocks(t *testing.T) {
	t.Run("F32", func(t *testing.T) {
		blk := make([]byte, 4)
		binary.LittleEndian.PutUint32(blk, math.Float32bits(-1.5))
		checkDequant(t, F32, blk, func(int) float64 { return -1.5 })
	})
	t.Run("F16", func(t *testing.T) {
		for h, want := range map[uint16]float64{0x3c00: 1, 0xc000: -2, 0x7bff: 65504, 0x0001: math.Ldexp(1, -24), 0x03ff: 1023 * math.Ldexp(1, -24), 0x8000: 0} {
			blk := make([]byte, 2)
			putF16(blk, h)
			checkDequant(t, F16, blk, func(int) float64 { return want })
		}
	})
	t.Run("BF16", func(t *testing.T) {
		blk := []byte{0xc0, 0x3f} // 0x3fc0 = 1.5
		checkDequant(t, BF16, blk, func(int) float64 { return 1.5 })
	})
	t.Run("Q4_0", func(t *testing.T) {
		blk := pattern(18, 1)
		putF16(blk, f16Half)
		checkDequant(t, Q4_0, blk, func(i int) float64 { return float64(nibble(blk[2:], i)-8) * 0.5 })
	})
	t.Run("Q4_1", func(t *testing.T) {
		blk := pattern(20, 2)
		putF16(blk, f16Quarter)
		putF16(blk[2:], f16MinusTwo)
		checkDequant(t, Q4_1, blk, func(i int) float64 { return float64(nibble(blk[4:], i))*0.25 - 2 })
	})
	fifthBit := func(qh []byte, i int) int { return int(binary.LittleEndian.Uint32(qh)>>i&1) << 4 }
	t.Run("Q5_0", func(t *testing.T) {
		blk := pattern(22, 3)
		putF16(blk, f16Half)
		checkDequant(t, Q5_0, blk, func(i int) float64 {
			return float64(nibble(blk[6:], i)+fifthBit(blk[2:], i)-16) * 0.5
		})
	})
	t.Run("Q5_1", func(t *testing.T) {
		blk := pattern(24, 4)
		putF16(blk, f16Eighth)
		putF16(blk[2:], f16MinusTwo)
		checkDequant(t, Q5_1, blk, func(i int) float64 {
			return float64(nibble(blk[8:], i)+fifthBit(blk[4:], i))*0.125 - 2
		})
	})
	t.Run("Q8_0", func(t *testing.T) {
		blk := pattern(34, 5)
		putF16(blk, f16Quarter)
		checkDequant(t, Q8_0, blk, func(i int) float64 { return float64(int8(blk[2+i])) * 0.25 })
	})

	// K-quants: sub-block scales and mins of 6 bits. Sub-block s (32
	// elements) has scale sc[s] and min m[s]; sub-blocks 0..3 store them in
	// the low 6 bits of bytes s and s+4; 4..7 store the low 4 bits as the
	// nibbles of byte s+4 and the high 2 bits in the top bits of bytes s-4
	// (scale) and s (min).
	sc := [8]uint8{1, 63, 17, 32, 5, 48, 33, 62}
	mn := [8]uint8{0, 7, 63, 20, 47, 1, 16, 31}
	var packed [12]byte
	for s := range 8 {
		if s < 4 {
			packed[s] |= sc[s]
			packed[s+4] |= mn[s]
		} else {
			packed[s+4] = sc[s]&15 | (mn[s]&15)<<4
			packed[s-4] |= sc[s] >> 4 << 6
			packed[s] |= mn[s] >> 4 << 6
		}
	}
	// Element i of a Q4_K/Q5_K block is in sub-block s = i/32; its nibble is
	// in byte 32*(s/2) + i%32 of the quants, low nibble for even s.
	kNibble := func(qs []byte, i int) int {
		s := i / 32
		b := qs[32*(s/2)+i%32]
		if s%2 == 0 {
			return int(b & 0xf)
		}
		return int(b >> 4)
	}
	t.Run("Q4_K", func(t *testing.T) {
		blk := pattern(144, 6)
		putF16(blk, f16Eighth)
		putF16(blk[2:], f16Quarter)
		copy(blk[4:16], packed[:])
		checkDequant(t, Q4_K, blk, func(i int) float64 {
			s := i / 32
			return 0.125*float64(sc[s])*float64(kNibble(blk[16:], i)) - 0.25*float64(mn[s])
		})
		for s := range 8 {
			if gs, gm := ScaleMinK4(s, blk[4:16]); gs != sc[s] || gm != mn[s] {
				t.Errorf("ScaleMinK4(%d) = %d, %d, want %d, %d", s, gs, gm, sc[s], mn[s])
			}
		}
	})
	t.Run("Q5_K", func(t *testing.T) {
		blk := pattern(176, 7)
		putF16(blk, f16Eighth)
		putF16(blk[2:], f16Quarter)
		copy(blk[4:16], packed[:])
		checkDequant(t, Q5_K, blk, func(i int) float64 {
			s := i / 32
			hi := int(blk[16+i%32]>>s&1) << 4 // bit s of qh[i%32]
			return 0.125*float64(sc[s])*float64(kNibble(blk[48:], i)+hi) - 0.25*float64(mn[s])
		})
	})
	t.Run("Q6_K", func(t *testing.T) {
		blk := pattern(210, 8)
		for j := range 16 {
			blk[192+j] = uint8(int8(j*9 - 70)) // signed scales, -70..65
		}
		putF16(blk[208:], f16Eighth)
		checkDequant(t, Q6_K, blk, func(i int) float64 {
			// Element i: half h = i/128; within it r = i%128, quarter k = r/32,
			// lane l = r%32. Low 4 bits: ql[64h + l + 32*(k%2)], low nibble for
			// k < 2; high 2 bits: bits 2k..2k+1 of qh[32h + l]. Scale: i/16.
			h, r := i/128, i%128
			k, l := r/32, r%32
			b := blk[64*h+l+32*(k%2)]
			lo := int(b & 0xf)
			if k >= 2 {
				lo = int(b >> 4)
			}
			hi := int(blk[128+32*h+l]>>(2*k)&3) << 4
			return 0.125 * float64(int8(blk[192+i/16])) * float64(lo+hi-32)
		})
	})
	// Q2_K and Q3_K: element i = 128h + 32k + l (half h, l = 0..31) has its
	// two low bits at bits 2k..2k+1 of quant byte 32h + l, and its scale in
	// sub-block i/16.
	lowBits := func(qs []byte, i int) int {
		h, k, l := i/128, i%128/32, i%32
		return int(qs[32*h+l] >> (2 * k) & 3)
	}
	t.Run("Q2_K", func(t *testing.T) {
		blk := pattern(84, 9) // scales: every nibble pair, so every scale and min
		putF16(blk[80:], f16Eighth)
		putF16(blk[82:], f16Quarter)
		checkDequant(t, Q2_K, blk, func(i int) float64 {
			sc, m := blk[i/16]&15, blk[i/16]>>4
			return 0.125*float64(sc)*float64(lowBits(blk[16:], i)) - 0.25*float64(m)
		})
	})
	t.Run("Q3_K", func(t *testing.T) {
		blk := pattern(110, 10)
		putF16(blk[108:], f16Eighth)
		// The scales as dequantize_row_q3_K unpacks them: four words, whose
		// bytes are the sixteen 6-bit scales, from three.
		var aux [3]uint32
		for w := range aux {
			aux[w] = binary.LittleEndian.Uint32(blk[96+4*w:])
		}
		const m1, m2 = 0x03030303, 0x0f0f0f0f
		words := [4]uint32{
			aux[0]&m2 | (aux[2]>>0&m1)<<4,
			aux[1]&m2 | (aux[2]>>2&m1)<<4,
			aux[0]>>4&m2 | (aux[2]>>4&m1)<<4,
			aux[1]>>4&m2 | (aux[2]>>6&m1)<<4,
		}
		scale := func(s int) int { return int(words[s/4]>>(8*(s%4))&0xff) - 32 }
		checkDequant(t, Q3_K, blk, func(i int) float64 {
			q := lowBits(blk[32:], i)
			if blk[i%32]>>(i/32)&1 == 0 { // hmask bit i/32 of byte i%32
				q -= 4
			}
			return 0.125 * float64(scale(i/16)) * float64(q)
		})
		for s := range 16 {
			if got := ScaleK3(s, blk[96:108]); int(got) != scale(s) {
				t.Errorf("ScaleK3(%d) = %d, want %d", s, got, scale(s))
			}
		}
	})
	levels := [16]float64{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
	t.Run("IQ4_NL", func(t *testing.T) {
		blk := pattern(18, 11)
		putF16(blk, f16Half)
		checkDequant(t, IQ4_NL, blk, func(i int) float64 { return 0.5 * levels[nibble(blk[2:], i)] })
	})
	t.Run("IQ4_XS", func(t *testing.T) {
		blk := pattern(136, 12)
		putF16(blk, f16Eighth)
		checkDequant(t, IQ4_XS, blk, func(i int) float64 {
			j := i / 32
			ls := int(blk[4+j/2]>>(4*(j%2))&15) | int(binary.LittleEndian.Uint16(blk[2:])>>(2*j)&3)<<4
			return 0.125 * float64(ls-32) * levels[nibble(blk[8+16*j:], i%32)]
		})
	})
}

// TestKnownQuantize pins a few quantized blocks computed by hand from the
// reference algorithms.
func TestKnownQuantize(t *testing.T) {
	t.Run("Q8_0", func(t *testing.T) {
		// amax 127 gives d = 1 and the values themselves as quants.
		x := make([]float32, 32)
		for i := range x {
			x[i] = float32(i*8 - 127)
		}
		x[31] = 127
		q := make([]byte, 34)
		if err := Quantize(Q8_0, x, q); err != nil {
			t.Fatal(err)
		}
		if d := binary.LittleEndian.Uint16(q); d != 0x3c00 {
			t.Errorf("d = %#04x, want 0x3c00 (1.0)", d)
		}
		for i, v := range x {
			if int8(q[2+i]) != int8(v) {
				t.Errorf("q[%d] = %d, want %d", i, int8(q[2+i]), int8(v))
			}
		}
	})
	t.Run("IQ4_NL", func(t *testing.T) {
		// The levels themselves, -127 the signed maximum: of the scales
		// tried, 1/d = (0-127)/-127 fits exactly, so d = 1 and each quant is
		// its level's index.
		x := make([]float32, 32)
		for i := range x {
			x[i] = float32(IQ4Levels[(i*7)%16])
		}
		q := make([]byte, 18)
		if err := Quantize(IQ4_NL, x, q); err != nil {
			t.Fatal(err)
		}
		if d := binary.LittleEndian.Uint16(q); d != 0x3c00 {
			t.Errorf("d = %#04x, want 0x3c00 (1.0)", d)
		}
		for i, v := range x {
			if got := IQ4Levels[nibble(q[2:], i)]; float32(got) != v {
				t.Errorf("element %d: level %d, want %g", i, got, v)
			}
		}
	})
	t.Run("Q4_0", func(t *testing.T) {
		// Signed max -8 gives d = 1; x = q-8 for x in -8..7.
		x := make([]float32, 32)
		for i := range x {
			x[i] = float32(i%16 - 8)
		}
		q := make([]byte, 18)
		if err := Quantize(Q4_0, x, q); err != nil {
			t.Fatal(err)
		}
		if d := binary.LittleEndian.Uint16(q); d != 0x3c00 {
			t.Errorf("d = %#04x, want 0x3c00 (1.0)", d)
		}
		for j := range 16 {
			want := byte(j) | byte(j)<<4
			if q[2+j] != want {
				t.Errorf("qs[%d] = %#02x, want %#02x", j, q[2+j], want)
			}
		}
	})
}
