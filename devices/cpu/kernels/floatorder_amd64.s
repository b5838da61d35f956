//go:build amd64 && !purego

#include "textflag.h"
#include "common_amd64.h"

// The float dots in llama.cpp's order (see floatorder.go), with YMM pairs
// standing for ZMM registers: lanes 0-7 in the first, 8-15 in the second.

#define LF32(off, reg) VMOVUPS off(SI), reg
#define LF16(off, reg) VCVTPH2PS off(SI), reg

// TINY(load, wstep, label): n = DX > 0, a multiple of 16.
#define TINY(load, wstep, label) \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
label: \
	load(0, Y4) \
	load(8*wstep, Y5) \
	VFMADD231PS (DI), Y4, Y0 \
	VFMADD231PS 32(DI), Y5, Y1 \
	ADDQ        $(16*wstep), SI \
	ADDQ        $64, DI \
	SUBQ        $16, DX \
	JNZ         label \
	VADDPS      Y0, Y1, Y0 \
	HSUM \
	VZEROUPPER

// VEC(load, wstep, label): n = DX > 0, a multiple of 64.
#define VEC(load, wstep, label) \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	VXORPS Y6, Y6, Y6 \
	VXORPS Y7, Y7, Y7 \
	VXORPS Y8, Y8, Y8 \
	VXORPS Y9, Y9, Y9 \
label: \
	load(0, Y10) \
	load(8*wstep, Y11) \
	load(16*wstep, Y12) \
	load(24*wstep, Y13) \
	VFMADD231PS (DI), Y10, Y0 \
	VFMADD231PS 32(DI), Y11, Y1 \
	VFMADD231PS 64(DI), Y12, Y2 \
	VFMADD231PS 96(DI), Y13, Y3 \
	load(32*wstep, Y10) \
	load(40*wstep, Y11) \
	load(48*wstep, Y12) \
	load(56*wstep, Y13) \
	VFMADD231PS 128(DI), Y10, Y6 \
	VFMADD231PS 160(DI), Y11, Y7 \
	VFMADD231PS 192(DI), Y12, Y8 \
	VFMADD231PS 224(DI), Y13, Y9 \
	ADDQ        $(64*wstep), SI \
	ADDQ        $256, DI \
	SUBQ        $64, DX \
	JNZ         label \
	VADDPS      Y6, Y0, Y0 \
	VADDPS      Y7, Y1, Y1 \
	VADDPS      Y8, Y2, Y2 \
	VADDPS      Y9, Y3, Y3 \
	VADDPS      Y2, Y0, Y0 \
	VADDPS      Y3, Y1, Y1 \
	VADDPS      Y0, Y1, Y0 \
	HSUM \
	VZEROUPPER

// func dotTinyF32(w *byte, x *float32, n int) float32
TEXT ·dotTinyF32(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), DX
	TINY(LF32, 4, tf32)
	MOVSS X0, ret+24(FP)
	RET

// func dotTinyF16(w *byte, x *float32, n int) float32
TEXT ·dotTinyF16(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), DX
	TINY(LF16, 2, tf16)
	MOVSS X0, ret+24(FP)
	RET

// func dotVecF32(w *byte, x *float32, n int) float32
TEXT ·dotVecF32(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), DX
	VEC(LF32, 4, vf32)
	MOVSS X0, ret+24(FP)
	RET

// func dotVecF16(w *byte, x *float32, n int) float32
TEXT ·dotVecF16(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), DX
	VEC(LF16, 2, vf16)
	MOVSS X0, ret+24(FP)
	RET
