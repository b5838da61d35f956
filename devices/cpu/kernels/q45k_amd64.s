//go:build amd64 && !purego

#include "textflag.h"
#include "common_amd64.h"

// Q4_K and Q5_K rows against Q8_K-style activations (blocks of 256 int8, one
// f32 scale, per-16 sums). Per super-block: unpack the eight 6-bit scales and
// mins with scalar ops into two int16 vectors; the mins meet the activations
// only through their sums (VPMADDWD of mins by pairwise-added per-16 sums).
// Then per 32 bytes of nibbles, low and high nibbles (two sub-blocks of 32,
// plus their fifth bits for Q5_K) are multiplied with 64 activations
// (VPMADDUBSW), weighted by their sub-block scales (VPMADDWD, the scale spread
// over the vector by VPSHUFB) and summed in int32 lanes, so floats appear once
// per super-block. About 75 vector ops per 144 bytes (Q4_K), 95 per 176
// (Q5_K). The float steps are llama.cpp's AVX2 ones, in its order
// (ggml_vec_dot_q4_K_q8_K, ggml_vec_dot_q5_K_q8_K): the mins in four f32
// lanes (Q4_K) or one (Q5_K), kept apart from the eight lanes of the scaled
// sums until both are reduced; kquantorder_test.go holds the definition.

DATA knib<>+0(SB)/4, $0x0f0f0f0f
GLOBL knib<>(SB), RODATA|NOPTR, $4
DATA kfifth<>+0(SB)/4, $0x10101010
GLOBL kfifth<>(SB), RODATA|NOPTR, $4

// Masks and shifts for SCALES.
DATA k3f<>+0(SB)/8, $0x3f3f3f3f3f3f3f3f
DATA k3f<>+8(SB)/8, $0
GLOBL k3f<>(SB), RODATA|NOPTR, $16
DATA k30<>+0(SB)/8, $0x3030303030303030
DATA k30<>+8(SB)/8, $0x3030303030303030
GLOBL k30<>(SB), RODATA|NOPTR, $16
DATA kshift<>+0(SB)/8, $0x0000000400000000
DATA kshift<>+8(SB)/8, $0
GLOBL kshift<>(SB), RODATA|NOPTR, $16

// kpick holds, for sub-block s, the VPSHUFB mask that fills a vector with
// int16 lane s of a 128-bit lane.
DATA kpick<>+0(SB)/8, $0x0100010001000100
DATA kpick<>+8(SB)/8, $0x0100010001000100
DATA kpick<>+16(SB)/8, $0x0100010001000100
DATA kpick<>+24(SB)/8, $0x0100010001000100
DATA kpick<>+32(SB)/8, $0x0302030203020302
DATA kpick<>+40(SB)/8, $0x0302030203020302
DATA kpick<>+48(SB)/8, $0x0302030203020302
DATA kpick<>+56(SB)/8, $0x0302030203020302
DATA kpick<>+64(SB)/8, $0x0504050405040504
DATA kpick<>+72(SB)/8, $0x0504050405040504
DATA kpick<>+80(SB)/8, $0x0504050405040504
DATA kpick<>+88(SB)/8, $0x0504050405040504
DATA kpick<>+96(SB)/8, $0x0706070607060706
DATA kpick<>+104(SB)/8, $0x0706070607060706
DATA kpick<>+112(SB)/8, $0x0706070607060706
DATA kpick<>+120(SB)/8, $0x0706070607060706
DATA kpick<>+128(SB)/8, $0x0908090809080908
DATA kpick<>+136(SB)/8, $0x0908090809080908
DATA kpick<>+144(SB)/8, $0x0908090809080908
DATA kpick<>+152(SB)/8, $0x0908090809080908
DATA kpick<>+160(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kpick<>+168(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kpick<>+176(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kpick<>+184(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kpick<>+192(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kpick<>+200(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kpick<>+208(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kpick<>+216(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kpick<>+224(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kpick<>+232(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kpick<>+240(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kpick<>+248(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL kpick<>(SB), RODATA|NOPTR, $256

// SCALES unpacks the 12 scale bytes at 4(BX) into int16 scales 0..7 in both
// lanes of Y5 and int16 mins 0..7 in X6. Seen as u32s u0, u1, u2: scales 0..3
// are u0's bytes' low six bits, mins 0..3 u1's; scales and mins 4..7 have
// their low four bits in the low and high nibbles of u2's bytes and their top
// two bits in the spare top bits of u0's and u1's bytes.
// Uses X7, X8; needs Y15 = 0x0f bytes.
#define SCALES \
	VMOVDQU     4(BX), X5 \
	VPSRLD      $2, X5, X7 \
	VPAND       k30<>(SB), X7, X7 \
	VPSHUFD     $0xaa, X5, X8 \
	VPSRLVD     kshift<>(SB), X8, X8 \
	VPAND       X15, X8, X8 \
	VPOR        X8, X7, X7 \
	VPAND       k3f<>(SB), X5, X5 \
	VPUNPCKLDQ  X7, X5, X5 \
	VPMOVZXBW   X5, Y5 \
	VEXTRACTI128 $1, Y5, X6 \
	VPERMQ      $0x44, Y5, Y5

// SUPERSTART sets Y10 to d·dx, X11 to dmin·dx and X6 to the int32 products
// of SCALES' mins (X6) with pairs of the activations' per-16 sums at (R15):
// four lanes, each two sub-blocks' Σ min·(sub-block sum).
#define SUPERSTART \
	VCVTPH2PS    (BX), X8 \
	VBROADCASTSS (DX), X9 \
	VMULPS       X9, X8, X8 \
	VBROADCASTSS X8, Y10 \
	VPERMILPS    $0x55, X8, X11 \
	VMOVDQU      (R15), X7 \
	VPHADDW      16(R15), X7, X7 \
	VPMADDWD     X7, X6, X6

// MINS4 (Q4_K) adds dmin·dx times SUPERSTART's four lanes into X12's four
// lanes; MINS1 (Q5_K) adds their integer sum, times dmin·dx, into X12's
// lane 0. Both clear Y6 and Y7 for the sums.
#define MINS4 \
	VCVTDQ2PS    X6, X6 \
	VFMADD231PS  X11, X6, X12 \
	VPXOR        Y6, Y6, Y6 \
	VPXOR        Y7, Y7, Y7

#define MINS1 \
	VPHADDD      X6, X6, X6 \
	VPHADDD      X6, X6, X6 \
	VCVTDQ2PS    X6, X6 \
	VFMADD231SS  X11, X6, X12 \
	VPXOR        Y6, Y6, Y6 \
	VPXOR        Y7, Y7, Y7

// SCALEDOT(j) multiplies the unsigned weights of sub-blocks 2j (Y1) and 2j+1
// (Y2) by activations 64j.. at CX and adds them, scaled, into Y6 and Y7.
#define SCALEDOT(j) \
	VPMADDUBSW (64*j)(CX), Y1, Y1 \
	VPMADDUBSW (64*j+32)(CX), Y2, Y2 \
	VPSHUFB    (64*j)(R14), Y5, Y3 \
	VPSHUFB    (64*j+32)(R14), Y5, Y4 \
	VPMADDWD   Y3, Y1, Y1 \
	VPMADDWD   Y4, Y2, Y2 \
	VPADDD     Y1, Y6, Y6 \
	VPADDD     Y2, Y7, Y7

// SUPEREND adds the super-block's int32 sums, scaled by d·dx, into Y0.
#define SUPEREND \
	VPADDD      Y7, Y6, Y6 \
	VCVTDQ2PS   Y6, Y6 \
	VFMADD231PS Y10, Y6, Y0

// Q4CHUNK(j): nibble bytes 32j..32j+31, low nibbles sub-block 2j, high 2j+1.
#define Q4CHUNK(j) \
	VMOVDQU (16+32*j)(BX), Y1 \
	VPSRLW  $4, Y1, Y2 \
	VPAND   Y15, Y1, Y1 \
	VPAND   Y15, Y2, Y2 \
	SCALEDOT(j)

// Q5CHUNK(j) is Q4CHUNK with fifth bits 2j and 2j+1 of the qh bytes, which
// Y9 holds shifted right by 2j.
#define Q5CHUNK(j) \
	VMOVDQU (48+32*j)(BX), Y1 \
	VPSRLW  $4, Y1, Y2 \
	VPAND   Y15, Y1, Y1 \
	VPAND   Y15, Y2, Y2 \
	VPSLLW  $4, Y9, Y3 \
	VPSLLW  $3, Y9, Y4 \
	VPAND   Y14, Y3, Y3 \
	VPAND   Y14, Y4, Y4 \
	VPOR    Y3, Y1, Y1 \
	VPOR    Y4, Y2, Y2 \
	VPSRLW  $2, Y9, Y9 \
	SCALEDOT(j)

// ROWSETUP and ROWNEXT bracket a row: registers as in the functions below.
#define ROWSETUP \
	MOVQ   SI, BX \
	MOVQ   xq+24(FP), CX \
	MOVQ   xd+32(FP), DX \
	MOVQ   bs+40(FP), R15 \
	MOVQ   nb+48(FP), R13 \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y12, Y12, Y12

#define BLOCKNEXT(size, label) \
	ADDQ $size, BX \
	ADDQ $256, CX \
	ADDQ $4, DX \
	ADDQ $32, R15 \
	DECQ R13 \
	JNZ  label

// The row's result is Σ d·scale·dot − Σ dmin·min·sum: Y0's lanes summed
// (HSUM), less X12's reduced as (m0+m2)+(m1+m3), as llama.cpp does.
#define ROWNEXT(label) \
	HSUM \
	VPERMILPS $0x0e, X12, X1 \
	VADDPS    X1, X12, X12 \
	VPERMILPS $0x01, X12, X1 \
	VADDSS    X1, X12, X12 \
	VSUBSS    X12, X0, X0 \
	VMOVSS X0, (DI) \
	ADDQ   $4, DI \
	ADDQ   R8, SI \
	DECQ   R9 \
	JNZ    label

// func q4_KRows(w *byte, stride, rows int, xq *int8, xd *float32, bs *int16, nb int, y *float32)
TEXT ·q4_KRows(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ y+56(FP), DI
	VPBROADCASTD knib<>(SB), Y15
	LEAQ         kpick<>(SB), R14

q4krow:
	ROWSETUP

q4kblock:
	SCALES
	SUPERSTART
	MINS4
	Q4CHUNK(0)
	Q4CHUNK(1)
	Q4CHUNK(2)
	Q4CHUNK(3)
	SUPEREND
	BLOCKNEXT(144, q4kblock)
	ROWNEXT(q4krow)
	VZEROUPPER
	RET

// func q5_KRows(w *byte, stride, rows int, xq *int8, xd *float32, bs *int16, nb int, y *float32)
TEXT ·q5_KRows(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ y+56(FP), DI
	VPBROADCASTD knib<>(SB), Y15
	VPBROADCASTD kfifth<>(SB), Y14
	LEAQ         kpick<>(SB), R14

q5krow:
	ROWSETUP

q5kblock:
	SCALES
	SUPERSTART
	MINS1
	VMOVDQU 16(BX), Y9
	Q5CHUNK(0)
	Q5CHUNK(1)
	Q5CHUNK(2)
	Q5CHUNK(3)
	SUPEREND
	BLOCKNEXT(176, q5kblock)
	ROWNEXT(q5krow)
	VZEROUPPER
	RET
