//go:build amd64 && !purego

#include "textflag.h"
#include "common_amd64.h"

// Row kernels for the 32-element block types against activations in blocks of
// 32 int8 with an f32 scale each (quantize32). Per block: widen the weights to
// 32 signed bytes, multiply them with the activations into int16 pairs
// (VPMADDUBSW wants one unsigned operand, so the weights' signs are moved onto
// the activations with VPSIGNB), sum to 8 int32 (VPMADDWD by ones), convert,
// and multiply-add by d_w*d_x into 8 f32 lanes. A few vector ops per 18..34
// weight bytes: fast enough that two cores are bound by memory bandwidth.

DATA nibbles<>+0(SB)/4, $0x0f0f0f0f
GLOBL nibbles<>(SB), RODATA|NOPTR, $4
DATA eights<>+0(SB)/4, $0x08080808
GLOBL eights<>(SB), RODATA|NOPTR, $4
DATA ones16<>+0(SB)/4, $0x00010001
GLOBL ones16<>(SB), RODATA|NOPTR, $4

// BLOCKDOT multiplies the 32 signed weight bytes in Y1 by the activations at
// (CX), scales by the f16 at (BX) times the f32 at (DX), and adds into Y0.
// Uses Y2..Y4; Y13 holds int16 ones.
#define BLOCKDOT \
	VMOVDQU      (CX), Y2 \
	VPSIGNB      Y1, Y1, Y3 \
	VPSIGNB      Y1, Y2, Y2 \
	VPMADDUBSW   Y2, Y3, Y3 \
	VPMADDWD     Y13, Y3, Y3 \
	VCVTDQ2PS    Y3, Y3 \
	VCVTPH2PS    (BX), X4 \
	VMULSS       (DX), X4, X4 \
	VBROADCASTSS X4, Y4 \
	VFMADD231PS  Y4, Y3, Y0

// func q4_0Rows(w *byte, stride, rows int, xq *int8, xd *float32, nb int, y *float32)
TEXT ·q4_0Rows(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ xq+24(FP), R10
	MOVQ xd+32(FP), R11
	MOVQ nb+40(FP), R12
	MOVQ y+48(FP), DI
	VPBROADCASTD nibbles<>(SB), Y15
	VPBROADCASTD eights<>(SB), Y14
	VPBROADCASTD ones16<>(SB), Y13

q40row:
	MOVQ   SI, BX
	MOVQ   R10, CX
	MOVQ   R11, DX
	MOVQ   R12, R13
	VXORPS Y0, Y0, Y0

q40block:
	// Low nibbles are elements 0..15, high nibbles 16..31.
	VMOVDQU     2(BX), X1
	VPSRLW      $4, X1, X2
	VINSERTI128 $1, X2, Y1, Y1
	VPAND       Y15, Y1, Y1
	VPSUBB      Y14, Y1, Y1
	BLOCKDOT
	ADDQ        $18, BX
	ADDQ        $32, CX
	ADDQ        $4, DX
	DECQ        R13
	JNZ         q40block

	HSUM
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	DECQ   R9
	JNZ    q40row
	VZEROUPPER
	RET

// func q8_0Rows(w *byte, stride, rows int, xq *int8, xd *float32, nb int, y *float32)
TEXT ·q8_0Rows(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ xq+24(FP), R10
	MOVQ xd+32(FP), R11
	MOVQ nb+40(FP), R12
	MOVQ y+48(FP), DI
	VPBROADCASTD ones16<>(SB), Y13

q80row:
	MOVQ   SI, BX
	MOVQ   R10, CX
	MOVQ   R11, DX
	MOVQ   R12, R13
	VXORPS Y0, Y0, Y0

q80block:
	VMOVDQU 2(BX), Y1
	BLOCKDOT
	ADDQ    $34, BX
	ADDQ    $32, CX
	ADDQ    $4, DX
	DECQ    R13
	JNZ     q80block

	HSUM
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	DECQ   R9
	JNZ    q80row
	VZEROUPPER
	RET
