package kernels

import "encoding/binary"

// Portable dot products of the 32-element block types with activations
// quantized by quantize32. Each block's integer sum is exact; only the
// per-block float scaling rounds.

// half returns the f16 at b[0:2] as f32.
func half(b []byte) float32 { return f16[binary.LittleEndian.Uint16(b)] }

// Q4_0: {f16 d; u8 qs[16]}, element j is (low nibble of qs[j] - 8)*d for
// j < 16 and (high nibble of qs[j-16] - 8)*d after.
func dotQ4_0Go(w []byte, x *xrow) float32 {
	var sum float32
	for b, xd := range x.d {
		blk, q := w[18*b:18*b+18], x.q[32*b:32*b+32]
		var s int32
		for j, v := range blk[2:18] {
			s += (int32(v&15)-8)*int32(q[j]) + (int32(v>>4)-8)*int32(q[j+16])
		}
		sum += half(blk) * xd * float32(s)
	}
	return sum
}

// Q4_1: {f16 d, m; u8 qs[16]}, element q*d + m with q the nibble as in Q4_0.
// The m term needs the activation block's sum, which x.s carries scaled.
func dotQ4_1Go(w []byte, x *xrow) float32 {
	var sum float32
	for b, xd := range x.d {
		blk, q := w[20*b:20*b+20], x.q[32*b:32*b+32]
		var s int32
		for j, v := range blk[4:20] {
			s += int32(v&15)*int32(q[j]) + int32(v>>4)*int32(q[j+16])
		}
		sum += half(blk)*xd*float32(s) + half(blk[2:])*x.s[b]
	}
	return sum
}

// Q5_0: {f16 d; u32 qh; u8 qs[16]}, element j is ((nibble | bit j of qh << 4)
// - 16)*d, nibbles laid out as in Q4_0.
func dotQ5_0Go(w []byte, x *xrow) float32 {
	var sum float32
	for b, xd := range x.d {
		blk, q := w[22*b:22*b+22], x.q[32*b:32*b+32]
		qh := binary.LittleEndian.Uint32(blk[2:])
		var s int32
		for j, v := range blk[6:22] {
			lo := int32(v&15) | int32(qh>>j&1)<<4
			hi := int32(v>>4) | int32(qh>>(j+16)&1)<<4
			s += (lo-16)*int32(q[j]) + (hi-16)*int32(q[j+16])
		}
		sum += half(blk) * xd * float32(s)
	}
	return sum
}

// Q5_1: {f16 d, m; u32 qh; u8 qs[16]}, element q*d + m with q as in Q5_0
// before its offset.
func dotQ5_1Go(w []byte, x *xrow) float32 {
	var sum float32
	for b, xd := range x.d {
		blk, q := w[24*b:24*b+24], x.q[32*b:32*b+32]
		qh := binary.LittleEndian.Uint32(blk[4:])
		var s int32
		for j, v := range blk[8:24] {
			lo := int32(v&15) | int32(qh>>j&1)<<4
			hi := int32(v>>4) | int32(qh>>(j+16)&1)<<4
			s += lo*int32(q[j]) + hi*int32(q[j+16])
		}
		sum += half(blk)*xd*float32(s) + half(blk[2:])*x.s[b]
	}
	return sum
}

// Q8_0: {f16 d; i8 qs[32]}, element qs[j]*d.
func dotQ8_0Go(w []byte, x *xrow) float32 {
	var sum float32
	for b, xd := range x.d {
		blk, q := w[34*b:34*b+34], x.q[32*b:32*b+32]
		var s int32
		for j, v := range blk[2:34] {
			s += int32(int8(v)) * int32(q[j])
		}
		sum += half(blk) * xd * float32(s)
	}
	return sum
}
