//go:build amd64 && !purego

#include "textflag.h"

// siluMul512 and siluMul256 are ggml_vec_swiglu_f32's vector loops of the
// AVX-512 and AVX2 builds: out = x/(1+ggml_v_expf(-x))·u, instruction for
// instruction, so lane for lane the results are those of devices/cpu's Go
// emulations vexpf512 and vexpf256 (silu_test.go). -x is a sign flip, as in
// the Go (ggml's 0-x differs only for x = ±0, where e(±0) = 1 either way).

// BCASTC broadcasts the 32-bit constant c into every lane of z (Z or Y).
#define BCASTC(c, z) \
	MOVL         c, AX \
	VPBROADCASTD AX, z

// func siluMul512(gate, up, out *float32, n int)
TEXT ·siluMul512(SB), NOSPLIT, $0-32
	MOVQ gate+0(FP), SI
	MOVQ up+8(FP), DX
	MOVQ out+16(FP), DI
	MOVQ n+24(FP), CX
	SHRQ $4, CX
	JZ   s512done
	BCASTC($0x80000000, Z31) // sign
	BCASTC($0x7fffffff, Z30) // abs
	BCASTC($0x4b400000, Z29) // r = 0x1.8p23
	BCASTC($0x3fb8aa3b, Z28) // 0x1.715476p+0
	BCASTC($0x3f317200, Z27) // 0x1.62e4p-1
	BCASTC($0x35bfbe8e, Z26) // 0x1.7f7d1cp-20
	BCASTC($0x3c072010, Z25) // 0x1.0e4020p-7
	BCASTC($0x3d2b9f17, Z24) // 0x1.573e2ep-5
	BCASTC($0x3e2aaf33, Z23) // 0x1.555e66p-3
	BCASTC($0x3efffedb, Z22) // 0x1.fffdb6p-2
	BCASTC($0x3f7ffff6, Z21) // 0x1.ffffecp-1
	BCASTC($0x3f800000, Z20) // 1
	BCASTC($0x43400000, Z19) // 192
	BCASTC($0x7f800000, Z18) // +Inf
	VPXORD Z17, Z17, Z17     // 0

s512loop:
	VMOVUPS      (SI), Z0
	VPXORD       Z31, Z0, Z1  // t = -x
	VMOVAPS      Z29, Z2
	VFMADD231PS  Z28, Z1, Z2  // z = t·log2(e) + r
	VSUBPS       Z29, Z2, Z3  // n = z - r
	VMOVAPS      Z1, Z4
	VFNMADD231PS Z27, Z3, Z4  // t - n·c1
	VFNMADD231PS Z26, Z3, Z4  // b = that - n·c2
	VMULPS       Z4, Z4, Z5   // u = b·b
	VMOVAPS      Z24, Z6
	VFMADD231PS  Z25, Z4, Z6  // p0·b + p1
	VMOVAPS      Z22, Z7
	VFMADD231PS  Z23, Z4, Z7  // p2·b + p3
	VFMADD213PS  Z7, Z5, Z6   // (p0·b + p1)·u + (p2·b + p3)
	VMOVAPS      Z20, Z8
	VFMADD231PS  Z21, Z4, Z8  // p4·b + 1
	VFMADD213PS  Z8, Z5, Z6   // j
	VSCALEFPS    Z3, Z6, Z6   // j·2^n
	VPANDD       Z30, Z3, Z9
	VCMPPS       $0x1e, Z19, Z9, K1 // |n| > 192 (GT_OQ)
	KORTESTW     K1, K1
	JNZ          s512special

s512store:
	VADDPS  Z20, Z6, Z6 // 1 + e
	VDIVPS  Z6, Z0, Z6  // x/(1 + e)
	VMULPS  (DX), Z6, Z6
	VMOVUPS Z6, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, DI
	DECQ    CX
	JNZ     s512loop

s512done:
	VZEROUPPER
	RET

s512special: // where |n| > 192: 0 if n ≤ 0, else +Inf
	VCMPPS  $0x12, Z17, Z3, K2 // n ≤ 0 (LE_OQ)
	KANDNW  K1, K2, K3         // K3 = K1 &^ K2
	KANDW   K1, K2, K4
	VMOVAPS Z18, K3, Z6
	VMOVAPS Z17, K4, Z6
	JMP     s512store

// siluMul256's constants, broadcast from here as needed.
DATA siluC<>+0(SB)/4, $0x3fb8aa3b  // 0x1.715476p+0
DATA siluC<>+4(SB)/4, $0x3f317200  // 0x1.62e4p-1
DATA siluC<>+8(SB)/4, $0x35bfbe8e  // 0x1.7f7d1cp-20
DATA siluC<>+12(SB)/4, $0x3c072010 // 0x1.0e4020p-7
DATA siluC<>+16(SB)/4, $0x3d2b9f17 // 0x1.573e2ep-5
DATA siluC<>+20(SB)/4, $0x3e2aaf33 // 0x1.555e66p-3
DATA siluC<>+24(SB)/4, $0x3efffedb // 0x1.fffdb6p-2
DATA siluC<>+28(SB)/4, $0x3f7ffff6 // 0x1.ffffecp-1
DATA siluC<>+32(SB)/4, $0x42fc0000 // 126
DATA siluC<>+36(SB)/4, $0x43400000 // 192
DATA siluC<>+40(SB)/4, $0x82000000
DATA siluC<>+44(SB)/4, $0x7f000000
GLOBL siluC<>(SB), RODATA|NOPTR, $48

// BCASTV is BCASTC for AVX2 (no broadcast from a general register): x is
// y's low half.
#define BCASTV(c, x, y) \
	MOVL         c, AX \
	VMOVD        AX, x \
	VPBROADCASTD x, y

// func siluMul256(gate, up, out *float32, n int)
TEXT ·siluMul256(SB), NOSPLIT, $0-32
	MOVQ gate+0(FP), SI
	MOVQ up+8(FP), DX
	MOVQ out+16(FP), DI
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   s256done
	BCASTV($0x80000000, X15, Y15) // sign
	BCASTV($0x4b400000, X14, Y14) // r = 0x1.8p23
	BCASTV($0x3f800000, X11, Y11) // 1

s256loop:
	VMOVUPS      (SI), Y0
	VXORPS       Y15, Y0, Y1          // t = -x
	VBROADCASTSS siluC<>+0(SB), Y10
	VMOVAPS      Y14, Y2
	VFMADD231PS  Y10, Y1, Y2          // z = t·log2(e) + r
	VSUBPS       Y14, Y2, Y3          // n = z - r
	VBROADCASTSS siluC<>+4(SB), Y4
	VFNMADD213PS Y1, Y3, Y4           // t - n·c1
	VBROADCASTSS siluC<>+8(SB), Y10
	VFNMADD231PS Y10, Y3, Y4          // b = that - n·c2
	VPSLLD       $23, Y2, Y5          // e = z << 23
	VPADDD       Y11, Y5, Y6          // k = e + bits(1)
	VANDNPS      Y3, Y15, Y7          // |n|
	VBROADCASTSS siluC<>+32(SB), Y8
	VCMPPS       $0x1e, Y8, Y7, Y8    // c = |n| > 126 (GT_OQ)
	VMULPS       Y4, Y4, Y9           // u = b·b
	VBROADCASTSS siluC<>+12(SB), Y10
	VBROADCASTSS siluC<>+16(SB), Y12
	VFMADD213PS  Y12, Y4, Y10         // p0·b + p1
	VBROADCASTSS siluC<>+20(SB), Y12
	VBROADCASTSS siluC<>+24(SB), Y13
	VFMADD213PS  Y13, Y4, Y12         // p2·b + p3
	VFMADD213PS  Y12, Y9, Y10         // (p0·b + p1)·u + (p2·b + p3)
	VBROADCASTSS siluC<>+28(SB), Y12
	VMULPS       Y4, Y12, Y12         // p4·b
	VFMADD213PS  Y12, Y9, Y10         // j
	VMOVMSKPS    Y8, AX
	TESTL        AX, AX
	JNZ          s256special
	VFMADD213PS  Y6, Y6, Y10          // j·k + k

s256store:
	VADDPS  Y11, Y10, Y10 // 1 + e
	VDIVPS  Y10, Y0, Y10  // x/(1 + e)
	VMULPS  (DX), Y10, Y10
	VMOVUPS Y10, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     s256loop

s256done:
	VZEROUPPER
	RET

s256special: // some |n| > 126: ggml's scaled and saturated results, blended
	VXORPS       Y12, Y12, Y12
	VCMPPS       $0x12, Y12, Y3, Y12  // n ≤ 0 (LE_OQ)
	VBROADCASTSS siluC<>+40(SB), Y13
	VANDPS       Y13, Y12, Y12        // g = n ≤ 0 ? 0x82000000 : 0
	VBROADCASTSS siluC<>+44(SB), Y13
	VPADDD       Y13, Y12, Y13        // s1 = g + 0x7f000000
	VPSUBD       Y12, Y5, Y5          // s2 = e - g
	VBROADCASTSS siluC<>+36(SB), Y12
	VCMPPS       $0x1e, Y12, Y7, Y7   // d = |n| > 192
	VMULPS       Y13, Y13, Y12        // s1·s1
	VFMADD213PS  Y5, Y10, Y5          // s2·j + s2
	VMULPS       Y13, Y5, Y5          // (s2·j + s2)·s1
	VFMADD213PS  Y6, Y6, Y10          // k·j + k
	VANDPS       Y8, Y5, Y5
	VANDNPS      Y10, Y8, Y10
	VORPS        Y5, Y10, Y10         // c ? (s2·j + s2)·s1 : k·j + k
	VANDNPS      Y10, Y7, Y10
	VANDPS       Y7, Y12, Y12
	VORPS        Y12, Y10, Y10        // d ? s1·s1 : that
	JMP          s256store
