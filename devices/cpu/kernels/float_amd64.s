//go:build amd64 && !purego

#include "textflag.h"
#include "common_amd64.h"

// Float dot products and axpy. The dots keep four 8-lane FMA accumulators so
// that 32 products are in flight (FMA latency is 4 cycles), convert F16 with
// VCVTPH2PS and BF16 by widening and shifting into the top half of an f32. For
// weights streamed from memory they are bound by bandwidth; for attention's
// cached vectors, by the two loads per 8 products.

// DOTLOOP(load, load1, wstep, labels...) is the body of a dot over n = DX elements of the weights
// at SI (read by load(off, reg), wstep bytes per element) and f32 at DI, sum
// returned in X0.
#define DOTLOOP(load, load1, wstep, l32, l8, l1, ltail, ldone) \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
l32: \
	CMPQ        DX, $32 \
	JLT         l8 \
	load(0, Y4) \
	load(8*wstep, Y5) \
	load(16*wstep, Y6) \
	load(24*wstep, Y7) \
	VFMADD231PS (DI), Y4, Y0 \
	VFMADD231PS 32(DI), Y5, Y1 \
	VFMADD231PS 64(DI), Y6, Y2 \
	VFMADD231PS 96(DI), Y7, Y3 \
	ADDQ        $(32*wstep), SI \
	ADDQ        $128, DI \
	SUBQ        $32, DX \
	JMP         l32 \
l8: \
	CMPQ        DX, $8 \
	JLT         l1 \
	load(0, Y4) \
	VFMADD231PS (DI), Y4, Y0 \
	ADDQ        $(8*wstep), SI \
	ADDQ        $32, DI \
	SUBQ        $8, DX \
	JMP         l8 \
l1: \
	VADDPS      Y1, Y0, Y0 \
	VADDPS      Y3, Y2, Y2 \
	VADDPS      Y2, Y0, Y0 \
	HSUM \
	TESTQ       DX, DX \
	JZ          ldone \
ltail: \
	load1(X4) \
	VFMADD231SS (DI), X4, X0 \
	ADDQ        $(wstep), SI \
	ADDQ        $4, DI \
	DECQ        DX \
	JNZ         ltail \
ldone: \
	VZEROUPPER

#define LOADF32(off, reg) VMOVUPS off(SI), reg
#define LOADF321(reg) VMOVSS (SI), reg
#define LOADF16(off, reg) VCVTPH2PS off(SI), reg
#define LOADF161(reg) MOVWLZX (SI), AX; MOVQ AX, reg; VCVTPH2PS reg, reg
#define LOADBF16(off, reg) VPMOVZXWD off(SI), reg; VPSLLD $16, reg, reg
#define LOADBF161(reg) MOVWLZX (SI), AX; SHLL $16, AX; MOVQ AX, reg

// func dotF32(w *byte, x *float32, n int) float32
TEXT ·dotF32(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), DX
	DOTLOOP(LOADF32, LOADF321, 4, f32a, f32b, f32c, f32d, f32e)
	MOVSS X0, ret+24(FP)
	RET

// func dotBF16(w *byte, x *float32, n int) float32
TEXT ·dotBF16(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), DX
	DOTLOOP(LOADBF16, LOADBF161, 2, bf16a, bf16b, bf16c, bf16d, bf16e)
	MOVSS X0, ret+24(FP)
	RET

// func axpyF32(a float32, x, y *float32, n int)
TEXT ·axpyF32(SB), NOSPLIT, $0-32
	VBROADCASTSS a+0(FP), Y15
	MOVQ         x+8(FP), SI
	MOVQ         y+16(FP), DI
	MOVQ         n+24(FP), DX

loop32:
	CMPQ        DX, $32
	JLT         loop8
	VMOVUPS     (DI), Y0
	VMOVUPS     32(DI), Y1
	VMOVUPS     64(DI), Y2
	VMOVUPS     96(DI), Y3
	VFMADD231PS (SI), Y15, Y0
	VFMADD231PS 32(SI), Y15, Y1
	VFMADD231PS 64(SI), Y15, Y2
	VFMADD231PS 96(SI), Y15, Y3
	VMOVUPS     Y0, (DI)
	VMOVUPS     Y1, 32(DI)
	VMOVUPS     Y2, 64(DI)
	VMOVUPS     Y3, 96(DI)
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, DX
	JMP         loop32

loop8:
	CMPQ        DX, $8
	JLT         tail
	VMOVUPS     (DI), Y0
	VFMADD231PS (SI), Y15, Y0
	VMOVUPS     Y0, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, DX
	JMP         loop8

tail:
	TESTQ DX, DX
	JZ    done

tail1:
	VMOVSS      (DI), X0
	VFMADD231SS (SI), X15, X0
	VMOVSS      X0, (DI)
	ADDQ        $4, SI
	ADDQ        $4, DI
	DECQ        DX
	JNZ         tail1

done:
	VZEROUPPER
	RET
