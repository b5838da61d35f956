//go:build amd64 && !purego

#include "textflag.h"

// Panel unpackers (Q4_0, Q8_0) and packers (Q4_0, Q4_K) for full panels of 16 rows (gemm.go's layout): each group
// of 4 columns is one VPGATHERDD of the 16 rows' 4 bytes (Z31 holds the row
// offsets r·stride), masked and shifted into place, instead of 16 scalar
// loads and stores. The f16 scales are gathered the same way and widened.

DATA unpackNib<>+0(SB)/4, $0x0f0f0f0f
GLOBL unpackNib<>(SB), RODATA|NOPTR, $4
DATA unpackTop<>+0(SB)/4, $0x80808080
GLOBL unpackTop<>(SB), RODATA|NOPTR, $4
DATA unpackRows<>+0(SB)/8, $0x0000000100000000
DATA unpackRows<>+8(SB)/8, $0x0000000300000002
DATA unpackRows<>+16(SB)/8, $0x0000000500000004
DATA unpackRows<>+24(SB)/8, $0x0000000700000006
DATA unpackRows<>+32(SB)/8, $0x0000000900000008
DATA unpackRows<>+40(SB)/8, $0x0000000b0000000a
DATA unpackRows<>+48(SB)/8, $0x0000000d0000000c
DATA unpackRows<>+56(SB)/8, $0x0000000f0000000e
GLOBL unpackRows<>(SB), RODATA|NOPTR, $64

// ROWOFFS sets Z31 to r·stride for r = 0..15, stride in AX. Uses Z30.
#define ROWOFFS \
	VPBROADCASTD AX, Z30 \
	VMOVDQU32    unpackRows<>(SB), Z31 \
	VPMULLD      Z30, Z31, Z31

// GATHER loads the dword at off(base) of each of the 16 rows into z.
#define GATHER(off, base, z) \
	KXNORW K1, K1, K1 \
	VPGATHERDD off(base)(Z31*1), K1, z

// SCALES gathers the f16 at off(base) of each row into 16 floats at (R9).
#define SCALES(off, base) \
	GATHER(off, base, Z0) \
	VPMOVDW   Z0, Y0 \
	VCVTPH2PS Y0, Z0 \
	VMOVUPS   Z0, (R9)

// NIBS gathers the dword at off(SI) of each row and stores its low nibbles
// at lo(DI) and its high ones at hi(DI). Z30 holds byte 0x0f.
#define NIBS(off, lo, hi) \
	GATHER(off, SI, Z1) \
	VPANDD    Z30, Z1, Z2 \
	VMOVDQU32 Z2, lo(DI) \
	VPSRLD    $4, Z1, Z1 \
	VPANDD    Z30, Z1, Z1 \
	VMOVDQU32 Z1, hi(DI)

// func unpackQ4_0Asm(w *byte, stride, nb int, q *byte, sc *float32)
TEXT ·unpackQ4_0Asm(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), AX
	MOVQ nb+16(FP), CX
	MOVQ q+24(FP), DI
	MOVQ sc+32(FP), R9
	ROWOFFS
	VPBROADCASTD unpackNib<>(SB), Z30
q40:
	SCALES(0, SI)
	NIBS(2, 0, 256)
	NIBS(6, 64, 320)
	NIBS(10, 128, 384)
	NIBS(14, 192, 448)
	ADDQ $18, SI
	ADDQ $512, DI
	ADDQ $64, R9
	DECQ CX
	JNZ  q40
	VZEROUPPER
	RET

// FLIP gathers the dword at off(SI) of each row, flips its bytes' top bits
// (signed to unsigned + 128) and stores them at dst(DI). Z30 holds 0x80s.
#define FLIP(off, dst) \
	GATHER(off, SI, Z1) \
	VPXORD    Z30, Z1, Z1 \
	VMOVDQU32 Z1, dst(DI)

// func unpackQ8_0Asm(w *byte, stride, nb int, q *byte, sc *float32)
TEXT ·unpackQ8_0Asm(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), AX
	MOVQ nb+16(FP), CX
	MOVQ q+24(FP), DI
	MOVQ sc+32(FP), R9
	ROWOFFS
	VPBROADCASTD unpackTop<>(SB), Z30
q80:
	SCALES(0, SI)
	FLIP(2, 0)
	FLIP(6, 64)
	FLIP(10, 128)
	FLIP(14, 192)
	FLIP(18, 256)
	FLIP(22, 320)
	FLIP(26, 384)
	FLIP(30, 448)
	ADDQ $34, SI
	ADDQ $512, DI
	ADDQ $64, R9
	DECQ CX
	JNZ  q80
	VZEROUPPER
	RET

// COPY4 gathers the dword at off(SI) of each row and stores it at dst(DI).
#define COPY4(off, dst) \
	GATHER(off, SI, Z1) \
	VMOVDQU32 Z1, dst(DI)

// func packQ4_0Asm(w *byte, stride, nb int, dst *byte)
// Repacks 16 Q4_0 rows into packed.go's layout: per block the 16 f16
// scales, then 4 chunks of the rows' nibble bytes, 4 bytes a row.
TEXT ·packQ4_0Asm(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), AX
	MOVQ nb+16(FP), CX
	MOVQ dst+24(FP), DI
	ROWOFFS
pq40:
	GATHER(0, SI, Z0)
	VPMOVDW   Z0, Y0
	VMOVDQU   Y0, (DI)
	COPY4(2, 32)
	COPY4(6, 96)
	COPY4(10, 160)
	COPY4(14, 224)
	ADDQ $18, SI
	ADDQ $288, DI
	DECQ CX
	JNZ  pq40
	VZEROUPPER
	RET

// K4COPY gathers chunk c of a Q4_K super-block: the rows' qs bytes 4c..4c+3.
#define K4COPY(c) COPY4(16+4*(c), 320+64*(c))

// func packQ4_KAsm(w *byte, stride, nb int, dst *byte)
// Repacks 16 Q4_K rows' d, dmin and nibbles into packed.go's layout; the
// scales and mins (6-bit fields) are left to Go.
TEXT ·packQ4_KAsm(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), AX
	MOVQ nb+16(FP), CX
	MOVQ dst+24(FP), DI
	ROWOFFS
pq4k:
	GATHER(0, SI, Z0)
	VPMOVDW   Z0, Y1
	VMOVDQU   Y1, (DI)
	VPSRLD    $16, Z0, Z0
	VPMOVDW   Z0, Y1
	VMOVDQU   Y1, 32(DI)
	K4COPY(0)
	K4COPY(1)
	K4COPY(2)
	K4COPY(3)
	K4COPY(4)
	K4COPY(5)
	K4COPY(6)
	K4COPY(7)
	K4COPY(8)
	K4COPY(9)
	K4COPY(10)
	K4COPY(11)
	K4COPY(12)
	K4COPY(13)
	K4COPY(14)
	K4COPY(15)
	K4COPY(16)
	K4COPY(17)
	K4COPY(18)
	K4COPY(19)
	K4COPY(20)
	K4COPY(21)
	K4COPY(22)
	K4COPY(23)
	K4COPY(24)
	K4COPY(25)
	K4COPY(26)
	K4COPY(27)
	K4COPY(28)
	K4COPY(29)
	K4COPY(30)
	K4COPY(31)
	ADDQ $144, SI
	ADDQ $2368, DI
	DECQ CX
	JNZ  pq4k
	VZEROUPPER
	RET
