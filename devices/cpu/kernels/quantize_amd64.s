//go:build amd64 && !purego

#include "textflag.h"

// quantize32AVX512 and quantize256AVX512 are quantize32Go and quantize256Go
// (activation.go) on 16 lanes, with the same float ops in the same order, so
// that every q, d, s and bs is the Go code's to the bit
// (TestQuantize32BitIdentical, TestQuantize256BitIdentical):
//
//   - the max of |x| is exact in any order (NaN-free input);
//   - roundInt is done as in Go, not by VCVTPS2DQ: add 0x1.8p23, keep the low
//     23 bits, subtract 0x400000 (this also gives Go's result where ±Inf or
//     NaN reach it, as when max|x| is so small that 127/max overflows), and
//     int8(q) and int16(sum) truncate (VPMOVDB, VPMOVDW), as Go's conversions;
//   - integer sums wrap as Go's int32 and may be added in any order;
//   - F32ToF16 is VCVTPS2PH with round to nearest even, as quant.F32ToF16.

DATA qkPerm<>+0(SB)/4, $0
DATA qkPerm<>+4(SB)/4, $4
DATA qkPerm<>+8(SB)/4, $8
DATA qkPerm<>+12(SB)/4, $12
DATA qkPerm<>+16(SB)/4, $1
DATA qkPerm<>+20(SB)/4, $5
DATA qkPerm<>+24(SB)/4, $9
DATA qkPerm<>+28(SB)/4, $13
DATA qkPerm<>+32(SB)/4, $2
DATA qkPerm<>+36(SB)/4, $6
DATA qkPerm<>+40(SB)/4, $10
DATA qkPerm<>+44(SB)/4, $14
DATA qkPerm<>+48(SB)/4, $3
DATA qkPerm<>+52(SB)/4, $7
DATA qkPerm<>+56(SB)/4, $11
DATA qkPerm<>+60(SB)/4, $15
GLOBL qkPerm<>(SB), RODATA|NOPTR, $64

// BCAST broadcasts the 32-bit constant c into every lane of z.
#define BCAST(c, z) \
	MOVL         c, AX \
	VPBROADCASTD AX, z

// ROUNDINT turns the floats of z into roundInt of them, in place. Z14 holds
// 0x1.8p23, Z13 0x7fffff, Z12 0x400000.
#define ROUNDINT(z) \
	VADDPS Z14, z, z \
	VPANDD Z13, z, z \
	VPSUBD Z12, z, z

// func quantize32AVX512(x *float32, q *int8, d, s *float32, nb int, q81 bool)
TEXT ·quantize32AVX512(SB), NOSPLIT, $0-41
	MOVQ    x+0(FP), SI
	MOVQ    q+8(FP), DI
	MOVQ    d+16(FP), R8
	MOVQ    s+24(FP), R9
	MOVQ    nb+32(FP), CX
	MOVBLZX q81+40(FP), DX
	BCAST($0x7fffffff, Z15)
	BCAST($0x4b400000, Z14)
	BCAST($0x007fffff, Z13)
	BCAST($0x00400000, Z12)
	MOVL    $0x42fe0000, AX // 127
	VMOVD   AX, X11
	VXORPS  X10, X10, X10

q32block:
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z1

	// amax = max |x|, and d = amax/127, id = amax ≠ 0 ? 127/amax : 0.
	VPANDD        Z15, Z0, Z2
	VPANDD        Z15, Z1, Z3
	VMAXPS        Z3, Z2, Z2
	VEXTRACTF64X4 $1, Z2, Y3
	VMAXPS        Y3, Y2, Y2
	VEXTRACTF128  $1, Y2, X3
	VMAXPS        X3, X2, X2
	VPERMILPS     $0x0e, X2, X3
	VMAXPS        X3, X2, X2
	VPERMILPS     $0x01, X2, X3
	VMAXSS        X3, X2, X2
	VDIVSS        X11, X2, X4
	VDIVSS        X2, X11, X5
	VCMPSS        $0, X10, X2, X6
	VANDNPS       X5, X6, X5
	VBROADCASTSS  X5, Z5

	// q = roundInt(x·id), stored as int8.
	VMULPS  Z5, Z0, Z0
	VMULPS  Z5, Z1, Z1
	ROUNDINT(Z0)
	ROUNDINT(Z1)
	VPMOVDB Z0, (DI)
	VPMOVDB Z1, 16(DI)

	// sum of q, as float32.
	VPADDD        Z1, Z0, Z0
	VEXTRACTI64X4 $1, Z0, Y1
	VPADDD        Y1, Y0, Y0
	VEXTRACTI128  $1, Y0, X1
	VPADDD        X1, X0, X0
	VPSHUFD       $0x4e, X0, X1
	VPADDD        X1, X0, X0
	VPSHUFD       $0xb1, X0, X1
	VPADDD        X1, X0, X0
	VCVTDQ2PS     X0, X0

	// d rounded through binary16, and s.
	VCVTPS2PH $0, X4, X6
	VCVTPH2PS X6, X6
	VMOVSS    X6, (R8)
	TESTQ     DX, DX
	JNZ       q32q81
	VMULSS    X0, X6, X7
	JMP       q32store

q32q81:
	VMULSS    X0, X4, X7
	VCVTPS2PH $0, X7, X7
	VCVTPH2PS X7, X7

q32store:
	VMOVSS X7, (R9)
	ADDQ   $128, SI
	ADDQ   $32, DI
	ADDQ   $4, R8
	ADDQ   $4, R9
	DECQ   CX
	JNZ    q32block
	VZEROUPPER
	RET

DATA q32Perm<>+0(SB)/4, $0
DATA q32Perm<>+4(SB)/4, $4
DATA q32Perm<>+8(SB)/4, $1
DATA q32Perm<>+12(SB)/4, $5
DATA q32Perm<>+16(SB)/4, $2
DATA q32Perm<>+20(SB)/4, $6
DATA q32Perm<>+24(SB)/4, $3
DATA q32Perm<>+28(SB)/4, $7
GLOBL q32Perm<>(SB), RODATA|NOPTR, $32

// BCASTY broadcasts the 32-bit constant c into every lane of y; x is y's
// low half.
#define BCASTY(c, x, y) \
	MOVL         c, AX \
	VMOVD        AX, x \
	VPBROADCASTD x, y

// ROUNDINTY is ROUNDINT on Y registers: Y14 holds 0x1.8p23, Y13 0x7fffff,
// Y12 0x400000.
#define ROUNDINTY(y) \
	VADDPS Y14, y, y \
	VPAND  Y13, y, y \
	VPSUBD Y12, y, y

// func quantize32AVX2(x *float32, q *int8, d, s *float32, nb int, q81 bool)
//
// quantize32AVX512 on 8 lanes. For int8(q), which truncates, each q is cut
// to its low byte (0..255), then the unsigned saturating packs leave the
// bytes as they are and VPERMD restores their order.
TEXT ·quantize32AVX2(SB), NOSPLIT, $0-41
	MOVQ    x+0(FP), SI
	MOVQ    q+8(FP), DI
	MOVQ    d+16(FP), R8
	MOVQ    s+24(FP), R9
	MOVQ    nb+32(FP), CX
	MOVBLZX q81+40(FP), DX
	BCASTY($0x7fffffff, X15, Y15)
	BCASTY($0x4b400000, X14, Y14)
	BCASTY($0x007fffff, X13, Y13)
	BCASTY($0x00400000, X12, Y12)
	BCASTY($0x000000ff, X11, Y11)
	VMOVDQU q32Perm<>(SB), Y10
	MOVL    $0x42fe0000, AX // 127
	VMOVD   AX, X9
	VXORPS  X8, X8, X8

q32yblock:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3

	// amax = max |x|, and d = amax/127, id = amax ≠ 0 ? 127/amax : 0.
	VANDPS       Y15, Y0, Y4
	VANDPS       Y15, Y1, Y5
	VMAXPS       Y5, Y4, Y4
	VANDPS       Y15, Y2, Y5
	VMAXPS       Y5, Y4, Y4
	VANDPS       Y15, Y3, Y5
	VMAXPS       Y5, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS       X5, X4, X4
	VPERMILPS    $0x0e, X4, X5
	VMAXPS       X5, X4, X4
	VPERMILPS    $0x01, X4, X5
	VMAXSS       X5, X4, X4
	VDIVSS       X9, X4, X6
	VDIVSS       X4, X9, X7
	VCMPSS       $0, X8, X4, X5
	VANDNPS      X7, X5, X7
	VBROADCASTSS X7, Y7

	// q = roundInt(x·id).
	VMULPS Y7, Y0, Y0
	VMULPS Y7, Y1, Y1
	VMULPS Y7, Y2, Y2
	VMULPS Y7, Y3, Y3
	ROUNDINTY(Y0)
	ROUNDINTY(Y1)
	ROUNDINTY(Y2)
	ROUNDINTY(Y3)

	// sum of q, as float32.
	VPADDD       Y1, Y0, Y4
	VPADDD       Y3, Y2, Y5
	VPADDD       Y5, Y4, Y4
	VEXTRACTI128 $1, Y4, X5
	VPADDD       X5, X4, X4
	VPSHUFD      $0x4e, X4, X5
	VPADDD       X5, X4, X4
	VPSHUFD      $0xb1, X4, X5
	VPADDD       X5, X4, X4
	VCVTDQ2PS    X4, X4

	// q stored as int8.
	VPAND     Y11, Y0, Y0
	VPAND     Y11, Y1, Y1
	VPAND     Y11, Y2, Y2
	VPAND     Y11, Y3, Y3
	VPACKUSDW Y1, Y0, Y0
	VPACKUSDW Y3, Y2, Y2
	VPACKUSWB Y2, Y0, Y0
	VPERMD    Y0, Y10, Y0
	VMOVDQU   Y0, (DI)

	// d rounded through binary16, and s.
	VCVTPS2PH $0, X6, X5
	VCVTPH2PS X5, X5
	VMOVSS    X5, (R8)
	TESTQ     DX, DX
	JNZ       q32yq81
	VMULSS    X4, X5, X7
	JMP       q32ystore

q32yq81:
	VMULSS    X4, X6, X7
	VCVTPS2PH $0, X7, X7
	VCVTPH2PS X7, X7

q32ystore:
	VMOVSS X7, (R9)
	ADDQ   $128, SI
	ADDQ   $32, DI
	ADDQ   $4, R8
	ADDQ   $4, R9
	DECQ   CX
	JNZ    q32yblock
	VZEROUPPER
	RET

// FIND jumps to q256found with AX = off and BX the mask of lanes of z whose
// |x| equals amax (Z0). Uses Z1, K1.
#define FIND(z, off) \
	VPANDD  Z15, z, Z1 \
	VCMPPS  $0, Z0, Z1, K1 \
	KMOVW   K1, BX \
	MOVQ    $off, AX \
	TESTL   BX, BX \
	JNZ     q256found

// QUANT256 turns the 16 floats of z into q = min(127, roundInt(iscale·x))
// (Z3 holds iscale, Z11 the int32 127s) and stores them at off(DI) as int8.
#define QUANT256(z, off) \
	VMULPS  Z3, z, z \
	ROUNDINT(z) \
	VPMINSD Z11, z, z \
	VPMOVDB z, off(DI)

// PAIRS adds groups a and b (16 int32 lanes each) into a: its 128-bit
// chunks 0, 1 then hold partial sums of a, chunks 2, 3 of b. Uses Z1, Z2.
#define PAIRS(a, b) \
	VSHUFI64X2 $0x44, b, a, Z1 \
	VSHUFI64X2 $0xee, b, a, Z2 \
	VPADDD     Z2, Z1, a

// QUADS adds two PAIRS results a, b into a: chunk c then holds four
// partial sums of group c of the four (a's two, then b's two). Uses Z1, Z2.
#define QUADS(a, b) \
	VSHUFI64X2 $0x88, b, a, Z1 \
	VSHUFI64X2 $0xdd, b, a, Z2 \
	VPADDD     Z2, Z1, a

// func quantize256AVX512(x *float32, q *int8, d *float32, bs *int16, nb int)
TEXT ·quantize256AVX512(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ q+8(FP), DI
	MOVQ d+16(FP), R8
	MOVQ bs+24(FP), R9
	MOVQ nb+32(FP), CX
	BCAST($0x7fffffff, Z15)
	BCAST($0x4b400000, Z14)
	BCAST($0x007fffff, Z13)
	BCAST($0x00400000, Z12)
	BCAST($127, Z11)
	VMOVDQU32 qkPerm<>(SB), Z10
	MOVL  $0xc2fe0000, AX // -127
	VMOVD AX, X9
	MOVL  $0x3f800000, AX // 1
	VMOVD AX, X8

q256block:
	VMOVUPS 0(SI), Z16
	VMOVUPS 64(SI), Z17
	VMOVUPS 128(SI), Z18
	VMOVUPS 192(SI), Z19
	VMOVUPS 256(SI), Z20
	VMOVUPS 320(SI), Z21
	VMOVUPS 384(SI), Z22
	VMOVUPS 448(SI), Z23
	VMOVUPS 512(SI), Z24
	VMOVUPS 576(SI), Z25
	VMOVUPS 640(SI), Z26
	VMOVUPS 704(SI), Z27
	VMOVUPS 768(SI), Z28
	VMOVUPS 832(SI), Z29
	VMOVUPS 896(SI), Z30
	VMOVUPS 960(SI), Z31

	// amax = max |x|.
	VPANDD Z15, Z16, Z0
	VPANDD Z15, Z17, Z1
	VPANDD Z15, Z18, Z2
	VPANDD Z15, Z19, Z3
	VPANDD Z15, Z20, Z4
	VMAXPS Z4, Z0, Z0
	VPANDD Z15, Z21, Z4
	VMAXPS Z4, Z1, Z1
	VPANDD Z15, Z22, Z4
	VMAXPS Z4, Z2, Z2
	VPANDD Z15, Z23, Z4
	VMAXPS Z4, Z3, Z3
	VPANDD Z15, Z24, Z4
	VMAXPS Z4, Z0, Z0
	VPANDD Z15, Z25, Z4
	VMAXPS Z4, Z1, Z1
	VPANDD Z15, Z26, Z4
	VMAXPS Z4, Z2, Z2
	VPANDD Z15, Z27, Z4
	VMAXPS Z4, Z3, Z3
	VPANDD Z15, Z28, Z4
	VMAXPS Z4, Z0, Z0
	VPANDD Z15, Z29, Z4
	VMAXPS Z4, Z1, Z1
	VPANDD Z15, Z30, Z4
	VMAXPS Z4, Z2, Z2
	VPANDD Z15, Z31, Z4
	VMAXPS Z4, Z3, Z3
	VMAXPS Z1, Z0, Z0
	VMAXPS Z3, Z2, Z2
	VMAXPS Z2, Z0, Z0
	VEXTRACTF64X4 $1, Z0, Y1
	VMAXPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VMAXPS        X1, X0, X0
	VPERMILPS     $0x0e, X0, X1
	VMAXPS        X1, X0, X0
	VPERMILPS     $0x01, X0, X1
	VMAXSS        X1, X0, X0
	VXORPS        X1, X1, X1
	VUCOMISS      X1, X0
	JEQ           q256zero
	VBROADCASTSS  X0, Z0

	// mx = the first x with |x| = amax.
	FIND(Z16, 0)
	FIND(Z17, 16)
	FIND(Z18, 32)
	FIND(Z19, 48)
	FIND(Z20, 64)
	FIND(Z21, 80)
	FIND(Z22, 96)
	FIND(Z23, 112)
	FIND(Z24, 128)
	FIND(Z25, 144)
	FIND(Z26, 160)
	FIND(Z27, 176)
	FIND(Z28, 192)
	FIND(Z29, 208)
	FIND(Z30, 224)
	FIND(Z31, 240)
	MOVL $1, BX // not reached with NaN-free input

q256found:
	BSFL         BX, BX
	ADDQ         BX, AX
	VMOVSS       (SI)(AX*4), X2
	VDIVSS       X2, X9, X3     // iscale = -127/mx
	VDIVSS       X3, X8, X4     // d = 1/iscale
	VMOVSS       X4, (R8)
	VBROADCASTSS X3, Z3

	QUANT256(Z16, 0)
	QUANT256(Z17, 16)
	QUANT256(Z18, 32)
	QUANT256(Z19, 48)
	QUANT256(Z20, 64)
	QUANT256(Z21, 80)
	QUANT256(Z22, 96)
	QUANT256(Z23, 112)
	QUANT256(Z24, 128)
	QUANT256(Z25, 144)
	QUANT256(Z26, 160)
	QUANT256(Z27, 176)
	QUANT256(Z28, 192)
	QUANT256(Z29, 208)
	QUANT256(Z30, 224)
	QUANT256(Z31, 240)

	// The 16 group sums: a tree of adds leaves group 4p+c in lane 4c+p,
	// which VPERMD puts in order.
	PAIRS(Z16, Z17)
	PAIRS(Z18, Z19)
	PAIRS(Z20, Z21)
	PAIRS(Z22, Z23)
	PAIRS(Z24, Z25)
	PAIRS(Z26, Z27)
	PAIRS(Z28, Z29)
	PAIRS(Z30, Z31)
	QUADS(Z16, Z18)
	QUADS(Z20, Z22)
	QUADS(Z24, Z26)
	QUADS(Z28, Z30)
	VPUNPCKLQDQ Z20, Z16, Z1
	VPUNPCKHQDQ Z20, Z16, Z2
	VPADDD      Z2, Z1, Z16
	VPUNPCKLQDQ Z28, Z24, Z1
	VPUNPCKHQDQ Z28, Z24, Z2
	VPADDD      Z2, Z1, Z24
	VSHUFPS     $0x88, Z24, Z16, Z1
	VSHUFPS     $0xdd, Z24, Z16, Z2
	VPADDD      Z2, Z1, Z1
	VPERMD      Z1, Z10, Z1
	VPMOVDW     Z1, (R9)

q256next:
	ADDQ $1024, SI
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $32, R9
	DECQ CX
	JNZ  q256block
	VZEROUPPER
	RET

q256zero:
	VPXORD    Z1, Z1, Z1
	VMOVDQU32 Z1, (DI)
	VMOVDQU32 Z1, 64(DI)
	VMOVDQU32 Z1, 128(DI)
	VMOVDQU32 Z1, 192(DI)
	VMOVDQU   Y1, (R9)
	VMOVSS    X1, (R8)
	JMP       q256next
