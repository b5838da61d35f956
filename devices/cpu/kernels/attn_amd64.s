//go:build amd64 && !purego

#include "textflag.h"
#include "common_amd64.h"

// The tiled flash-attention kernels of attn.go on AVX-512. Each output
// element is one FMA chain in the order attn.go defines, so blocking rows and
// columns into registers changes nothing but speed: 4 rows of a score tile
// (4×64 scores) or of the output accumulator (4×64 values) are held in
// Z0..Z15 while the keys or values stream through Z16..Z19.

// func attnScores512(s, q, kt *float32, rows, hd int, scale float32)
// s[r*64+j] = (chain over d of q[r*hd+d]·kt[d*64+j]) · scale.
TEXT ·attnScores512(SB), NOSPLIT, $0-44
	MOVQ         s+0(FP), SI
	MOVQ         q+8(FP), DI
	MOVQ         kt+16(FP), DX
	MOVQ         rows+24(FP), CX
	MOVQ         hd+32(FP), BX
	VBROADCASTSS scale+40(FP), Z20
	LEAQ         (BX*4), R10       // a q row in bytes
	LEAQ         (R10)(R10*2), R11 // three of them

sc4:
	CMPQ   CX, $4
	JLT    sc1
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	MOVQ   DI, R12 // &q[r][d]
	MOVQ   DX, R13 // &kt[d][0]
	MOVQ   BX, R8

sc4d:
	VMOVUPS          (R13), Z16
	VMOVUPS          64(R13), Z17
	VMOVUPS          128(R13), Z18
	VMOVUPS          192(R13), Z19
	VFMADD231PS.BCST (R12), Z16, Z0
	VFMADD231PS.BCST (R12), Z17, Z1
	VFMADD231PS.BCST (R12), Z18, Z2
	VFMADD231PS.BCST (R12), Z19, Z3
	VFMADD231PS.BCST (R12)(R10*1), Z16, Z4
	VFMADD231PS.BCST (R12)(R10*1), Z17, Z5
	VFMADD231PS.BCST (R12)(R10*1), Z18, Z6
	VFMADD231PS.BCST (R12)(R10*1), Z19, Z7
	VFMADD231PS.BCST (R12)(R10*2), Z16, Z8
	VFMADD231PS.BCST (R12)(R10*2), Z17, Z9
	VFMADD231PS.BCST (R12)(R10*2), Z18, Z10
	VFMADD231PS.BCST (R12)(R10*2), Z19, Z11
	VFMADD231PS.BCST (R12)(R11*1), Z16, Z12
	VFMADD231PS.BCST (R12)(R11*1), Z17, Z13
	VFMADD231PS.BCST (R12)(R11*1), Z18, Z14
	VFMADD231PS.BCST (R12)(R11*1), Z19, Z15
	ADDQ             $4, R12
	ADDQ             $256, R13
	DECQ             R8
	JNZ              sc4d

	VMULPS  Z20, Z0, Z0
	VMULPS  Z20, Z1, Z1
	VMULPS  Z20, Z2, Z2
	VMULPS  Z20, Z3, Z3
	VMULPS  Z20, Z4, Z4
	VMULPS  Z20, Z5, Z5
	VMULPS  Z20, Z6, Z6
	VMULPS  Z20, Z7, Z7
	VMULPS  Z20, Z8, Z8
	VMULPS  Z20, Z9, Z9
	VMULPS  Z20, Z10, Z10
	VMULPS  Z20, Z11, Z11
	VMULPS  Z20, Z12, Z12
	VMULPS  Z20, Z13, Z13
	VMULPS  Z20, Z14, Z14
	VMULPS  Z20, Z15, Z15
	VMOVUPS Z0, (SI)
	VMOVUPS Z1, 64(SI)
	VMOVUPS Z2, 128(SI)
	VMOVUPS Z3, 192(SI)
	VMOVUPS Z4, 256(SI)
	VMOVUPS Z5, 320(SI)
	VMOVUPS Z6, 384(SI)
	VMOVUPS Z7, 448(SI)
	VMOVUPS Z8, 512(SI)
	VMOVUPS Z9, 576(SI)
	VMOVUPS Z10, 640(SI)
	VMOVUPS Z11, 704(SI)
	VMOVUPS Z12, 768(SI)
	VMOVUPS Z13, 832(SI)
	VMOVUPS Z14, 896(SI)
	VMOVUPS Z15, 960(SI)
	ADDQ    $1024, SI
	LEAQ    (DI)(R10*4), DI
	SUBQ    $4, CX
	JMP     sc4

sc1:
	TESTQ  CX, CX
	JZ     scdone
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ   DI, R12
	MOVQ   DX, R13
	MOVQ   BX, R8

sc1d:
	VMOVUPS          (R13), Z16
	VMOVUPS          64(R13), Z17
	VMOVUPS          128(R13), Z18
	VMOVUPS          192(R13), Z19
	VFMADD231PS.BCST (R12), Z16, Z0
	VFMADD231PS.BCST (R12), Z17, Z1
	VFMADD231PS.BCST (R12), Z18, Z2
	VFMADD231PS.BCST (R12), Z19, Z3
	ADDQ             $4, R12
	ADDQ             $256, R13
	DECQ             R8
	JNZ              sc1d

	VMULPS  Z20, Z0, Z0
	VMULPS  Z20, Z1, Z1
	VMULPS  Z20, Z2, Z2
	VMULPS  Z20, Z3, Z3
	VMOVUPS Z0, (SI)
	VMOVUPS Z1, 64(SI)
	VMOVUPS Z2, 128(SI)
	VMOVUPS Z3, 192(SI)
	ADDQ    $256, SI
	ADDQ    R10, DI
	DECQ    CX
	JMP     sc1

scdone:
	VZEROUPPER
	RET

// ACC4(col, z0, z1, z2, z3): the accumulators of a row in the 4-row block.
#define LOAD4(off, a, b, c, d) \
	VMOVUPS off(R15), a \
	VMOVUPS off(R15)(R10*1), b \
	VMOVUPS off(R15)(R10*2), c \
	VMOVUPS off(R15)(R11*1), d

#define STORE4(off, a, b, c, d) \
	VMOVUPS a, off(R15) \
	VMOVUPS b, off(R15)(R10*1) \
	VMOVUPS c, off(R15)(R10*2) \
	VMOVUPS d, off(R15)(R11*1)

// func attnAccum512(o, p *float32, v *uint16, stride, rows, n, hd int)
// o[r*hd+t] = fma(p[r*64+j], v[j*stride+t], o[r*hd+t]) for j = 0..n-1.
TEXT ·attnAccum512(SB), NOSPLIT, $0-56
	MOVQ o+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ v+16(FP), DX
	MOVQ stride+24(FP), R9
	SHLQ $1, R9
	MOVQ rows+32(FP), CX
	MOVQ n+40(FP), R14
	MOVQ hd+48(FP), R10
	SHLQ $2, R10
	LEAQ (R10)(R10*2), R11

ac4:
	CMPQ CX, $4
	JLT  ac1
	MOVQ hd+48(FP), AX // columns left
	MOVQ DI, R15       // &o[r][c]
	MOVQ DX, BX        // &v[0][c]

ac4c64:
	CMPQ  AX, $64
	JLT   ac4c16
	LOAD4(0, Z0, Z4, Z8, Z12)
	LOAD4(64, Z1, Z5, Z9, Z13)
	LOAD4(128, Z2, Z6, Z10, Z14)
	LOAD4(192, Z3, Z7, Z11, Z15)
	MOVQ  BX, R12
	MOVQ  SI, R13
	MOVQ  R14, R8

ac4c64j:
	VCVTPH2PS        (R12), Z16
	VCVTPH2PS        32(R12), Z17
	VCVTPH2PS        64(R12), Z18
	VCVTPH2PS        96(R12), Z19
	VFMADD231PS.BCST (R13), Z16, Z0
	VFMADD231PS.BCST (R13), Z17, Z1
	VFMADD231PS.BCST (R13), Z18, Z2
	VFMADD231PS.BCST (R13), Z19, Z3
	VFMADD231PS.BCST 256(R13), Z16, Z4
	VFMADD231PS.BCST 256(R13), Z17, Z5
	VFMADD231PS.BCST 256(R13), Z18, Z6
	VFMADD231PS.BCST 256(R13), Z19, Z7
	VFMADD231PS.BCST 512(R13), Z16, Z8
	VFMADD231PS.BCST 512(R13), Z17, Z9
	VFMADD231PS.BCST 512(R13), Z18, Z10
	VFMADD231PS.BCST 512(R13), Z19, Z11
	VFMADD231PS.BCST 768(R13), Z16, Z12
	VFMADD231PS.BCST 768(R13), Z17, Z13
	VFMADD231PS.BCST 768(R13), Z18, Z14
	VFMADD231PS.BCST 768(R13), Z19, Z15
	ADDQ             R9, R12
	ADDQ             $4, R13
	DECQ             R8
	JNZ              ac4c64j

	STORE4(0, Z0, Z4, Z8, Z12)
	STORE4(64, Z1, Z5, Z9, Z13)
	STORE4(128, Z2, Z6, Z10, Z14)
	STORE4(192, Z3, Z7, Z11, Z15)
	ADDQ   $256, R15
	ADDQ   $128, BX
	SUBQ   $64, AX
	JMP    ac4c64

ac4c16:
	CMPQ  AX, $16
	JLT   ac4next
	LOAD4(0, Z0, Z4, Z8, Z12)
	MOVQ  BX, R12
	MOVQ  SI, R13
	MOVQ  R14, R8

ac4c16j:
	VCVTPH2PS        (R12), Z16
	VFMADD231PS.BCST (R13), Z16, Z0
	VFMADD231PS.BCST 256(R13), Z16, Z4
	VFMADD231PS.BCST 512(R13), Z16, Z8
	VFMADD231PS.BCST 768(R13), Z16, Z12
	ADDQ             R9, R12
	ADDQ             $4, R13
	DECQ             R8
	JNZ              ac4c16j

	STORE4(0, Z0, Z4, Z8, Z12)
	ADDQ   $64, R15
	ADDQ   $32, BX
	SUBQ   $16, AX
	JMP    ac4c16

ac4next:
	LEAQ (DI)(R10*4), DI
	ADDQ $1024, SI
	SUBQ $4, CX
	JMP  ac4

ac1:
	TESTQ CX, CX
	JZ    acdone
	MOVQ  hd+48(FP), AX
	MOVQ  DI, R15
	MOVQ  DX, BX

ac1c64:
	CMPQ    AX, $64
	JLT     ac1c16
	VMOVUPS (R15), Z0
	VMOVUPS 64(R15), Z1
	VMOVUPS 128(R15), Z2
	VMOVUPS 192(R15), Z3
	MOVQ    BX, R12
	MOVQ    SI, R13
	MOVQ    R14, R8

ac1c64j:
	VCVTPH2PS        (R12), Z16
	VCVTPH2PS        32(R12), Z17
	VCVTPH2PS        64(R12), Z18
	VCVTPH2PS        96(R12), Z19
	VFMADD231PS.BCST (R13), Z16, Z0
	VFMADD231PS.BCST (R13), Z17, Z1
	VFMADD231PS.BCST (R13), Z18, Z2
	VFMADD231PS.BCST (R13), Z19, Z3
	ADDQ             R9, R12
	ADDQ             $4, R13
	DECQ             R8
	JNZ              ac1c64j

	VMOVUPS Z0, (R15)
	VMOVUPS Z1, 64(R15)
	VMOVUPS Z2, 128(R15)
	VMOVUPS Z3, 192(R15)
	ADDQ    $256, R15
	ADDQ    $128, BX
	SUBQ    $64, AX
	JMP     ac1c64

ac1c16:
	CMPQ    AX, $16
	JLT     ac1next
	VMOVUPS (R15), Z0
	MOVQ    BX, R12
	MOVQ    SI, R13
	MOVQ    R14, R8

ac1c16j:
	VCVTPH2PS        (R12), Z16
	VFMADD231PS.BCST (R13), Z16, Z0
	ADDQ             R9, R12
	ADDQ             $4, R13
	DECQ             R8
	JNZ              ac1c16j

	VMOVUPS Z0, (R15)
	ADDQ    $64, R15
	ADDQ    $32, BX
	SUBQ    $16, AX
	JMP     ac1c16

ac1next:
	ADDQ R10, DI
	ADDQ $256, SI
	DECQ CX
	JMP  ac1

acdone:
	VZEROUPPER
	RET

// func attnSoftMax512(p *float32, n int, m float32) float64
// p[j] = ggml_v_expf(p[j]-m) (AVX-512), 16 lanes at a time; returns the sum
// in float64 of each 16's _mm512_reduce_add_ps, as ggml_vec_soft_max_f32.
TEXT ·attnSoftMax512(SB), NOSPLIT, $0-32
	MOVQ         p+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Z31
	MOVL         $0x4b400000, AX // 0x1.8p23
	VPBROADCASTD AX, Z30
	MOVL         $0x3fb8aa3b, AX // 0x1.715476p+0
	VPBROADCASTD AX, Z29
	MOVL         $0x3f317200, AX // 0x1.62e4p-1
	VPBROADCASTD AX, Z28
	MOVL         $0x35bfbe8e, AX // 0x1.7f7d1cp-20
	VPBROADCASTD AX, Z27
	MOVL         $0x43400000, AX // 192
	VPBROADCASTD AX, Z26
	MOVL         $0x3c072010, AX // 0x1.0e4020p-7
	VPBROADCASTD AX, Z25
	MOVL         $0x3d2b9f17, AX // 0x1.573e2ep-5
	VPBROADCASTD AX, Z24
	MOVL         $0x3e2aaf33, AX // 0x1.555e66p-3
	VPBROADCASTD AX, Z23
	MOVL         $0x3efffedb, AX // 0x1.fffdb6p-2
	VPBROADCASTD AX, Z22
	MOVL         $0x3f7ffff6, AX // 0x1.ffffecp-1
	VPBROADCASTD AX, Z21
	MOVL         $0x3f800000, AX // 1
	VPBROADCASTD AX, Z20
	MOVL         $0x7f800000, AX // +Inf
	VPBROADCASTD AX, Z19
	MOVL         $0x7fffffff, AX // |x| mask
	VPBROADCASTD AX, Z18
	VPXORD       Z17, Z17, Z17   // 0
	VXORPD       X15, X15, X15   // the sum

smloop:
	TESTQ        CX, CX
	JZ           smdone
	VMOVUPS      (SI), Z0
	VSUBPS       Z31, Z0, Z0     // x = p - m
	VMOVAPS      Z30, Z1
	VFMADD231PS  Z29, Z0, Z1     // z = x·log2e + 0x1.8p23
	VSUBPS       Z30, Z1, Z2     // n = z - 0x1.8p23
	VMOVAPS      Z0, Z3
	VFNMADD231PS Z28, Z2, Z3     // b = x - n·ln2hi
	VFNMADD231PS Z27, Z2, Z3     // b -= n·ln2lo
	VPANDD       Z18, Z2, Z4
	VCMPPS       $0x1e, Z26, Z4, K1 // |n| > 192
	VMULPS       Z3, Z3, Z4      // u = b·b
	VMOVAPS      Z24, Z5
	VFMADD231PS  Z25, Z3, Z5     // c1·b + c2
	VMOVAPS      Z22, Z6
	VFMADD231PS  Z23, Z3, Z6     // c3·b + c4
	VFMADD231PS  Z4, Z5, Z6      // (c1·b + c2)·u + (c3·b + c4)
	VMOVAPS      Z20, Z7
	VFMADD231PS  Z21, Z3, Z7     // c5·b + 1
	VFMADD231PS  Z4, Z6, Z7      // j
	VSCALEFPS    Z2, Z7, Z0      // j·2^n
	KORTESTW     K1, K1
	JZ           smstore
	VCMPPS       $0x12, Z17, Z2, K2 // n <= 0
	VMOVAPS      Z19, Z8
	VMOVAPS      Z17, K2, Z8     // 0 where n <= 0, +Inf elsewhere
	VMOVAPS      Z8, K1, Z0

smstore:
	VMOVUPS        Z0, (SI)
	VEXTRACTF64X4  $1, Z0, Y1
	VADDPS         Y1, Y0, Y0
	HSUM
	VCVTSS2SD      X0, X0, X0
	VADDSD         X0, X15, X15
	ADDQ           $64, SI
	SUBQ           $16, CX
	JMP            smloop

smdone:
	VMOVSD     X15, ret+24(FP)
	VZEROUPPER
	RET

// func attnRowMax512(p *float32) float32
// The largest of p[0:64] (AttnRowMax).
TEXT ·attnRowMax512(SB), NOSPLIT, $0-12
	MOVQ          p+0(FP), SI
	VMOVUPS       (SI), Z0
	VMAXPS        64(SI), Z0, Z0
	VMOVUPS       128(SI), Z1
	VMAXPS        192(SI), Z1, Z1
	VMAXPS        Z1, Z0, Z0
	VEXTRACTF32X8 $1, Z0, Y1
	VMAXPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VMAXPS        X1, X0, X0
	VMOVHLPS      X0, X0, X1
	VMAXPS        X1, X0, X0
	VMOVSHDUP     X0, X1
	VMAXSS        X1, X0, X0
	VMOVSS        X0, ret+8(FP)
	VZEROUPPER
	RET
