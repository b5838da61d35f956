//go:build amd64 && !purego

#include "textflag.h"
#include "common_amd64.h"

// Q4_K rows against Q8_K-style activations (blocks of 256 int8, one f32 scale,
// per-16 sums). Per super-block of 144 bytes: unpack the eight 6-bit scales
// and mins with scalar ops; the mins meet the activations only through their
// sums (VPMADDWD of mins by pairwise-added per-16 sums); then per 32 bytes of
// nibbles, low and high nibbles (two sub-blocks) are multiplied with 64
// activations (VPMADDUBSW), weighted by their sub-block scales (VPMADDWD) and
// summed in int32 lanes, so floats appear once per super-block. About 60
// vector ops per 144 bytes: memory bound on two cores.

DATA q4knib<>+0(SB)/4, $0x0f0f0f0f
GLOBL q4knib<>(SB), RODATA|NOPTR, $4

// CHUNK j multiplies nibble bytes 32j..32j+31 (sub-blocks 2j and 2j+1) by
// activations 64j..64j+63 and adds them, scaled, into Y6 and Y7.
#define CHUNK(j) \
	VMOVDQU      (16+32*j)(BX), Y1 \
	VPSRLW       $4, Y1, Y2 \
	VPAND        Y15, Y1, Y1 \
	VPAND        Y15, Y2, Y2 \
	VPMADDUBSW   (64*j)(CX), Y1, Y1 \
	VPMADDUBSW   (64*j+32)(CX), Y2, Y2 \
	VPBROADCASTW (16+4*j)(SP), Y3 \
	VPBROADCASTW (18+4*j)(SP), Y4 \
	VPMADDWD     Y3, Y1, Y1 \
	VPMADDWD     Y4, Y2, Y2 \
	VPADDD       Y1, Y6, Y6 \
	VPADDD       Y2, Y7, Y7

// func q4_KRows(w *byte, stride, rows int, xq *int8, xd *float32, bs *int16, nb int, y *float32)
TEXT ·q4_KRows(SB), NOSPLIT, $48-64
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ y+56(FP), DI
	VPBROADCASTD q4knib<>(SB), Y15

row:
	MOVQ   SI, BX
	MOVQ   xq+24(FP), CX
	MOVQ   xd+32(FP), DX
	MOVQ   bs+40(FP), R15
	MOVQ   nb+48(FP), R13
	VXORPS Y0, Y0, Y0
	VXORPS Y12, Y12, Y12

block:
	// Scales and mins: bytes 0..3 keep scale j and min j in their low six
	// bits (bytes j, j+4); scales and mins 4..7 have their low four bits in
	// the nibbles of bytes 8..11 and their top two in the spare top bits of
	// bytes 0..3 (scales) and 4..7 (mins).
	MOVL 4(BX), AX
	MOVL 8(BX), R10
	MOVL 12(BX), R11
	MOVL AX, R12
	ANDL $0x3f3f3f3f, R12
	MOVL R12, 0(SP)        // scales 0..3
	MOVL R10, R12
	ANDL $0x3f3f3f3f, R12
	MOVL R12, 8(SP)        // mins 0..3
	SHRL $2, AX
	ANDL $0x30303030, AX
	MOVL R11, R12
	ANDL $0x0f0f0f0f, R12
	ORL  R12, AX
	MOVL AX, 4(SP)         // scales 4..7
	SHRL $2, R10
	ANDL $0x30303030, R10
	SHRL $4, R11
	ANDL $0x0f0f0f0f, R11
	ORL  R11, R10
	MOVL R10, 12(SP)       // mins 4..7
	VPMOVZXBW 0(SP), Y5    // 8 scales, then 8 mins, as int16
	VMOVDQU   Y5, 16(SP)

	// d*dx broadcast in Y10; dmin*dx in every lane of X11.
	VCVTPH2PS    (BX), X8
	VBROADCASTSS (DX), X9
	VMULPS       X9, X8, X8
	VBROADCASTSS X8, Y10
	VPERMILPS    $0x55, X8, X11

	// Mins times sub-block sums of the activations.
	VEXTRACTI128 $1, Y5, X5
	VMOVDQU      (R15), X6
	VPHADDW      16(R15), X6, X6
	VPMADDWD     X6, X5, X5
	VCVTDQ2PS    X5, X5
	VFMADD231PS  X11, X5, X12

	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	CHUNK(0)
	CHUNK(1)
	CHUNK(2)
	CHUNK(3)
	VPADDD      Y7, Y6, Y6
	VCVTDQ2PS   Y6, Y6
	VFMADD231PS Y10, Y6, Y0

	ADDQ $144, BX
	ADDQ $256, CX
	ADDQ $4, DX
	ADDQ $32, R15
	DECQ R13
	JNZ  block

	// y = Σ d·scale·dot − Σ dmin·min·sum; X12's upper half is zero.
	VSUBPS Y12, Y0, Y0
	HSUM
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	DECQ   R9
	JNZ    row
	VZEROUPPER
	RET
