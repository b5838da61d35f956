//go:build amd64 && !purego

#include "textflag.h"

// f16 accumulator updates for attention, 8 lanes at a time with F16C:
// widen, FMA or multiply in f32, round to nearest even back to binary16.

// func madF16AVX2(y, x *uint16, v float32, n int)
TEXT ·madF16AVX2(SB), NOSPLIT, $0-32
	MOVQ         y+0(FP), DI
	MOVQ         x+8(FP), SI
	VBROADCASTSS v+16(FP), Y2
	MOVQ         n+24(FP), CX

mad8:
	VCVTPH2PS   (SI), Y0
	VCVTPH2PS   (DI), Y1
	VFMADD231PS Y2, Y0, Y1
	VCVTPS2PH   $0, Y1, (DI)
	ADDQ        $16, SI
	ADDQ        $16, DI
	SUBQ        $8, CX
	JNZ         mad8
	VZEROUPPER
	RET

// func scaleF16AVX2(y *uint16, v float32, n int)
TEXT ·scaleF16AVX2(SB), NOSPLIT, $0-24
	MOVQ         y+0(FP), DI
	VBROADCASTSS v+8(FP), Y2
	MOVQ         n+16(FP), CX

scale8:
	VCVTPH2PS (DI), Y1
	VMULPS    Y2, Y1, Y1
	VCVTPS2PH $0, Y1, (DI)
	ADDQ      $16, DI
	SUBQ      $8, CX
	JNZ       scale8
	VZEROUPPER
	RET

// func toF16AVX2(dst *uint16, src *float32, n int)
// n a multiple of 8. VCVTPS2PH with immediate 0 rounds to nearest even, as
// quant.F32ToF16 does; only a NaN's payload may differ (both stay NaN).
TEXT ·toF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

to8:
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	SUBQ      $8, CX
	JNZ       to8
	VZEROUPPER
	RET
