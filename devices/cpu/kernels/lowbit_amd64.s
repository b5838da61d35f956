//go:build amd64 && !purego

#include "textflag.h"
#include "common_amd64.h"

// Rows of the low-bit types (IQ4_NL, IQ4_XS, Q3_K, Q2_K) against quantized
// activations, to the bit as the Go kernels of iq4_go.go and kquant2_go.go,
// which define the order of the float steps (llama.cpp's). The integer sums
// are exact whatever their grouping: VPMADDUBSW's int16 pairs cannot
// saturate (|weight| ≤ 127 times |activation| ≤ 127, twice, for the IQ4
// levels; less for the others), and every sum after is int32. Signed
// weights meet the signed activations as |q| times weight·sign(q)
// (VPABSB, VPSIGNB). Only the float steps round, and each is the Go
// kernel's, in its order.

// kiq4 is quant.IQ4Levels as bytes, in both 128-bit lanes.
DATA kiq4<>+0(SB)/8, $0xf6eaddcfbfad9881
DATA kiq4<>+8(SB)/8, $0x7159453526190d01
DATA kiq4<>+16(SB)/8, $0xf6eaddcfbfad9881
DATA kiq4<>+24(SB)/8, $0x7159453526190d01
GLOBL kiq4<>(SB), RODATA|NOPTR, $32

// knibsh shifts the upper lane's qwords right by 4: with a 16-byte block
// broadcast to both lanes and masked by 0x0f, the lower lane holds the low
// nibbles (elements 0..15) and the upper lane the high ones (16..31).
DATA knibsh<>+0(SB)/8, $0
DATA knibsh<>+8(SB)/8, $0
DATA knibsh<>+16(SB)/8, $4
DATA knibsh<>+24(SB)/8, $4
GLOBL knibsh<>(SB), RODATA|NOPTR, $32

DATA klb0f<>+0(SB)/4, $0x0f0f0f0f
GLOBL klb0f<>(SB), RODATA|NOPTR, $4
DATA klb03<>+0(SB)/4, $0x03030303
GLOBL klb03<>(SB), RODATA|NOPTR, $4
DATA klb04<>+0(SB)/4, $0x04040404
GLOBL klb04<>(SB), RODATA|NOPTR, $4
DATA klb20<>+0(SB)/4, $0x20202020
GLOBL klb20<>(SB), RODATA|NOPTR, $4
DATA klb1w<>+0(SB)/4, $0x00010001
GLOBL klb1w<>(SB), RODATA|NOPTR, $4

// kq3sh shifts dword i right by 2i (Q3_K's high scale bits).
DATA kq3sh<>+0(SB)/8, $0x0000000200000000
DATA kq3sh<>+8(SB)/8, $0x0000000600000004
GLOBL kq3sh<>(SB), RODATA|NOPTR, $16

// kxspick holds, for sub-block j of IQ4_XS, the VPSHUFB mask that fills both
// lanes with int16 lane j of a 128-bit lane.
DATA kxspick<>+0(SB)/8, $0x0100010001000100
DATA kxspick<>+8(SB)/8, $0x0100010001000100
DATA kxspick<>+16(SB)/8, $0x0100010001000100
DATA kxspick<>+24(SB)/8, $0x0100010001000100
DATA kxspick<>+32(SB)/8, $0x0302030203020302
DATA kxspick<>+40(SB)/8, $0x0302030203020302
DATA kxspick<>+48(SB)/8, $0x0302030203020302
DATA kxspick<>+56(SB)/8, $0x0302030203020302
DATA kxspick<>+64(SB)/8, $0x0504050405040504
DATA kxspick<>+72(SB)/8, $0x0504050405040504
DATA kxspick<>+80(SB)/8, $0x0504050405040504
DATA kxspick<>+88(SB)/8, $0x0504050405040504
DATA kxspick<>+96(SB)/8, $0x0706070607060706
DATA kxspick<>+104(SB)/8, $0x0706070607060706
DATA kxspick<>+112(SB)/8, $0x0706070607060706
DATA kxspick<>+120(SB)/8, $0x0706070607060706
DATA kxspick<>+128(SB)/8, $0x0908090809080908
DATA kxspick<>+136(SB)/8, $0x0908090809080908
DATA kxspick<>+144(SB)/8, $0x0908090809080908
DATA kxspick<>+152(SB)/8, $0x0908090809080908
DATA kxspick<>+160(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kxspick<>+168(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kxspick<>+176(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kxspick<>+184(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kxspick<>+192(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kxspick<>+200(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kxspick<>+208(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kxspick<>+216(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kxspick<>+224(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kxspick<>+232(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kxspick<>+240(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kxspick<>+248(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL kxspick<>(SB), RODATA|NOPTR, $256

// kkpick holds, for group k of 32 elements of a Q2_K or Q3_K half, the
// VPSHUFB mask that fills the lower lane with int16 lane 2k and the upper
// lane with 2k+1: the scales of the group's two sub-blocks of 16.
DATA kkpick<>+0(SB)/8, $0x0100010001000100
DATA kkpick<>+8(SB)/8, $0x0100010001000100
DATA kkpick<>+16(SB)/8, $0x0302030203020302
DATA kkpick<>+24(SB)/8, $0x0302030203020302
DATA kkpick<>+32(SB)/8, $0x0504050405040504
DATA kkpick<>+40(SB)/8, $0x0504050405040504
DATA kkpick<>+48(SB)/8, $0x0706070607060706
DATA kkpick<>+56(SB)/8, $0x0706070607060706
DATA kkpick<>+64(SB)/8, $0x0908090809080908
DATA kkpick<>+72(SB)/8, $0x0908090809080908
DATA kkpick<>+80(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kkpick<>+88(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kkpick<>+96(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kkpick<>+104(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kkpick<>+112(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kkpick<>+120(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL kkpick<>(SB), RODATA|NOPTR, $128

// IQ4DOT(off, q, dst) sets dst (int16 pairs) to the products of the 32
// IQ4 elements whose 16 nibble bytes are at off(BX) with the activations at
// q: lower lane elements 0..15, upper lane 16..31, int16 lane i the sum of
// elements 2i and 2i+1 of its half. Needs Y15 = 0x0f, Y14 = levels, Y13 =
// knibsh; uses Y2.
#define IQ4DOT(off, q, dst) \
	VBROADCASTI128 off(BX), dst \
	VPSRLVQ        Y13, dst, dst \
	VPAND          Y15, dst, dst \
	VPSHUFB        dst, Y14, dst \
	VMOVDQU        q, Y2 \
	VPSIGNB        Y2, dst, dst \
	VPABSB         Y2, Y2 \
	VPMADDUBSW     dst, Y2, dst

// HALFSCALE(off, dst) sets dst's lane 0 to the f16 at off(BX) times the f32
// at (DX), uses AX.
#define HALFSCALE(off, dst) \
	MOVWLZX   off(BX), AX \
	VMOVD     AX, dst \
	VCVTPH2PS dst, dst \
	VMULSS    (DX), dst, dst

// NL4ROW(addr, dst) sets dst to the eight int32 partial sums of an IQ4_NL
// block's elements (nibbles at addr) times the activations: Y2 holds them,
// Y11 their magnitudes, Y12 int16 ones.
#define NL4ROW(addr, dst) \
	VBROADCASTI128 addr, dst \
	VPSRLVQ        Y13, dst, dst \
	VPAND          Y15, dst, dst \
	VPSHUFB        dst, Y14, dst \
	VPSIGNB        Y2, dst, dst \
	VPMADDUBSW     dst, Y11, dst \
	VPMADDWD       Y12, dst, dst

// func iq4_NLRows(w *byte, stride, rows int, xq *int8, xd *float32, nb int, y *float32)
//
// One float per row, FMA'd block by block as dotIQ4_NLGo: sum =
// fma(Σ block, d·dx, sum). Rows go four at a time, one per lane of X0, so
// that the four chains of FMAs overlap; each lane's steps are its row's.
TEXT ·iq4_NLRows(SB), NOSPLIT, $0-56
	MOVQ           w+0(FP), SI
	MOVQ           stride+8(FP), R8
	MOVQ           rows+16(FP), R9
	MOVQ           y+48(FP), DI
	LEAQ           (R8)(R8*2), R12
	VPBROADCASTD   klb0f<>(SB), Y15
	VMOVDQU        kiq4<>(SB), Y14
	VMOVDQU        knibsh<>(SB), Y13
	VPBROADCASTD   klb1w<>(SB), Y12

nlrow4:
	CMPQ   R9, $4
	JLT    nlrow1
	MOVQ   SI, BX
	MOVQ   xq+24(FP), CX
	MOVQ   xd+32(FP), DX
	MOVQ   nb+40(FP), R13
	VXORPS X0, X0, X0

nlblock4:
	VMOVDQU      (CX), Y2
	VPABSB       Y2, Y11
	NL4ROW(2(BX), Y1)
	NL4ROW(2(BX)(R8*1), Y3)
	NL4ROW(2(BX)(R8*2), Y4)
	NL4ROW(2(BX)(R12*1), Y5)
	VPHADDD      Y3, Y1, Y1
	VPHADDD      Y5, Y4, Y4
	VPHADDD      Y4, Y1, Y1
	VEXTRACTI128 $1, Y1, X3
	VPADDD       X3, X1, X1
	VCVTDQ2PS    X1, X1
	MOVWLZX      (BX), AX
	VMOVD        AX, X7
	VPINSRW      $1, (BX)(R8*1), X7, X7
	VPINSRW      $2, (BX)(R8*2), X7, X7
	VPINSRW      $3, (BX)(R12*1), X7, X7
	VCVTPH2PS    X7, X7
	VBROADCASTSS (DX), X6
	VMULPS       X6, X7, X7
	VFMADD231PS  X7, X1, X0
	ADDQ         $18, BX
	ADDQ         $32, CX
	ADDQ         $4, DX
	DECQ         R13
	JNZ          nlblock4

	VMOVUPS X0, (DI)
	ADDQ    $16, DI
	LEAQ    (SI)(R8*4), SI
	SUBQ    $4, R9
	JMP     nlrow4

nlrow1:
	TESTQ R9, R9
	JZ    nldone
	MOVQ   SI, BX
	MOVQ   xq+24(FP), CX
	MOVQ   xd+32(FP), DX
	MOVQ   nb+40(FP), R13
	VXORPS X0, X0, X0

nlblock1:
	IQ4DOT(2, (CX), Y1)
	VPMADDWD     Y12, Y1, Y1
	VEXTRACTI128 $1, Y1, X3
	VPADDD       X3, X1, X1
	VPSHUFD      $0x4e, X1, X3
	VPADDD       X3, X1, X1
	VPSHUFD      $0xb1, X1, X3
	VPADDD       X3, X1, X1
	VCVTDQ2PS    X1, X1
	HALFSCALE(0, X7)
	VFMADD231SS  X7, X1, X0
	ADDQ         $18, BX
	ADDQ         $32, CX
	ADDQ         $4, DX
	DECQ         R13
	JNZ          nlblock1

	VMOVSS X0, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	DECQ   R9
	JMP    nlrow1

nldone:
	VZEROUPPER
	RET

// XSSUB(j) adds sub-block j of an IQ4_XS super-block, times its scale (int16
// lane j of Y5), into the eight int32 lanes of Y6: lane m holds elements
// 4m..4m+3 of the lower half of every sub-block (m < 4) or of the upper.
#define XSSUB(j) \
	IQ4DOT(8+16*j, (32*j)(CX), Y1) \
	VPSHUFB  (32*j)(R14), Y5, Y3 \
	VPMADDWD Y3, Y1, Y1 \
	VPADDD   Y1, Y6, Y6

// func iq4_XSRows(w *byte, stride, rows int, xq *int8, xd *float32, nb int, y *float32)
//
// Eight float lanes per row, as dotIQ4_XSGo. The scales are gathered with
// PDEP: nibble j of scales_l into byte j's low bits, bits 2j..2j+1 of
// scales_h into its bits 4..5.
TEXT ·iq4_XSRows(SB), NOSPLIT, $0-56
	MOVQ           w+0(FP), SI
	MOVQ           stride+8(FP), R8
	MOVQ           rows+16(FP), R9
	MOVQ           y+48(FP), DI
	VPBROADCASTD   klb0f<>(SB), Y15
	VMOVDQU        kiq4<>(SB), Y14
	VMOVDQU        knibsh<>(SB), Y13
	VPBROADCASTD   klb20<>(SB), Y12
	LEAQ           kxspick<>(SB), R14
	MOVQ           $0x0f0f0f0f0f0f0f0f, R11
	MOVQ           $0x3030303030303030, R12

xsrow:
	MOVQ   SI, BX
	MOVQ   xq+24(FP), CX
	MOVQ   xd+32(FP), DX
	MOVQ   nb+40(FP), R13
	VXORPS Y0, Y0, Y0

xsblock:
	MOVWLZX     2(BX), AX
	PDEPQ       R12, AX, AX
	MOVL        4(BX), R10
	PDEPQ       R11, R10, R10
	ORQ         AX, R10
	VMOVQ       R10, X5
	VPSUBB      X12, X5, X5
	VPMOVSXBW   X5, X5
	VINSERTI128 $1, X5, Y5, Y5
	VPXOR       Y6, Y6, Y6
	XSSUB(0)
	XSSUB(1)
	XSSUB(2)
	XSSUB(3)
	XSSUB(4)
	XSSUB(5)
	XSSUB(6)
	XSSUB(7)
	HALFSCALE(0, X7)
	VBROADCASTSS X7, Y7
	VCVTDQ2PS    Y6, Y6
	VFMADD231PS  Y7, Y6, Y0
	ADDQ         $136, BX
	ADDQ         $256, CX
	ADDQ         $4, DX
	DECQ         R13
	JNZ          xsblock

	HSUM
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	DECQ   R9
	JNZ    xsrow
	VZEROUPPER
	RET

// Q3STEP(h, k, S, hop, hn) adds group k (32 elements) of half h of a Q3_K
// super-block into Y8's lanes, scaled by the lanes of S VPSHUFB picks: the
// 2-bit values (bits 2k of the half's qs bytes in Y9), less 4 where the
// hmask bit 4h+k is clear (hop $hn moves it from the hmask bytes in Y6 to
// bit 2), as two products with the activations. Needs Y14 = 0x03, Y13 =
// 0x04.
#define Q3STEP(h, k, S, hop, hn) \
	VPSRLW     $(2*k), Y9, Y1 \
	VPAND      Y14, Y1, Y1 \
	hop        $hn, Y6, Y2 \
	VPANDN     Y13, Y2, Y2 \
	VMOVDQU    (128*h+32*k)(CX), Y3 \
	VPMADDUBSW Y3, Y1, Y1 \
	VPMADDUBSW Y3, Y2, Y2 \
	VPSUBW     Y2, Y1, Y1 \
	VPSHUFB    (32*k)(R14), S, Y2 \
	VPMADDWD   Y2, Y1, Y1 \
	VPADDD     Y1, Y8, Y8

// func q3_KRows(w *byte, stride, rows int, xq *int8, xd *float32, nb int, y *float32)
//
// Eight float lanes per row, as dotQ3_KGo.
TEXT ·q3_KRows(SB), NOSPLIT, $0-56
	MOVQ         w+0(FP), SI
	MOVQ         stride+8(FP), R8
	MOVQ         rows+16(FP), R9
	MOVQ         y+48(FP), DI
	VPBROADCASTD klb0f<>(SB), Y15
	VPBROADCASTD klb03<>(SB), Y14
	VPBROADCASTD klb04<>(SB), Y13
	VMOVDQU      kq3sh<>(SB), X12
	VPBROADCASTD klb20<>(SB), Y11
	LEAQ         kkpick<>(SB), R14

q3row:
	MOVQ   SI, BX
	MOVQ   xq+24(FP), CX
	MOVQ   xd+32(FP), DX
	MOVQ   nb+40(FP), R13
	VXORPS Y0, Y0, Y0

q3block:
	// The 16 scales, as int16: Y4 holds 0..7 in both lanes, Y5 8..15.
	VMOVQ        96(BX), X1
	VPSRLW       $4, X1, X2
	VPUNPCKLQDQ  X2, X1, X1
	VPAND        X15, X1, X1
	VPBROADCASTD 104(BX), X2
	VPSRLVD      X12, X2, X2
	VPAND        X14, X2, X2
	VPSLLW       $4, X2, X2
	VPOR         X2, X1, X1
	VPSUBB       X11, X1, X1
	VPMOVSXBW    X1, Y1
	VPERMQ       $0x44, Y1, Y4
	VPERMQ       $0xee, Y1, Y5
	VMOVDQU      (BX), Y6
	VPXOR        Y8, Y8, Y8
	VMOVDQU      32(BX), Y9
	Q3STEP(0, 0, Y4, VPSLLW, 2)
	Q3STEP(0, 1, Y4, VPSLLW, 1)
	Q3STEP(0, 2, Y4, VPSRLW, 0)
	Q3STEP(0, 3, Y4, VPSRLW, 1)
	VMOVDQU      64(BX), Y9
	Q3STEP(1, 0, Y5, VPSRLW, 2)
	Q3STEP(1, 1, Y5, VPSRLW, 3)
	Q3STEP(1, 2, Y5, VPSRLW, 4)
	Q3STEP(1, 3, Y5, VPSRLW, 5)
	HALFSCALE(108, X7)
	VBROADCASTSS X7, Y7
	VCVTDQ2PS    Y8, Y8
	VFMADD231PS  Y7, Y8, Y0
	ADDQ         $110, BX
	ADDQ         $256, CX
	ADDQ         $4, DX
	DECQ         R13
	JNZ          q3block

	HSUM
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	DECQ   R9
	JNZ    q3row
	VZEROUPPER
	RET

// Q2STEP(h, k, S) adds group k (32 elements) of half h of a Q2_K
// super-block into Y8's lanes, scaled by the lanes of S VPSHUFB picks: bits
// 2k..2k+1 of the half's qs bytes in Y9. Needs Y14 = 0x03.
#define Q2STEP(h, k, S) \
	VPSRLW     $(2*k), Y9, Y1 \
	VPAND      Y14, Y1, Y1 \
	VPMADDUBSW (128*h+32*k)(CX), Y1, Y1 \
	VPSHUFB    (32*k)(R14), S, Y2 \
	VPMADDWD   Y2, Y1, Y1 \
	VPADDD     Y1, Y8, Y8

// func q2_KRows(w *byte, stride, rows int, xq *int8, xd *float32, bs *int16, nb int, y *float32)
//
// Two floats per row, as dotQ2_KGo: lane 0 of X0 the scaled sums, lane 1
// the mins, each FMA'd once per super-block and subtracted at the end.
TEXT ·q2_KRows(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), SI
	MOVQ         stride+8(FP), R8
	MOVQ         rows+16(FP), R9
	MOVQ         y+56(FP), DI
	VPBROADCASTD klb0f<>(SB), Y15
	VPBROADCASTD klb03<>(SB), Y14
	LEAQ         kkpick<>(SB), R14

q2row:
	MOVQ   SI, BX
	MOVQ   xq+24(FP), CX
	MOVQ   xd+32(FP), DX
	MOVQ   bs+40(FP), R15
	MOVQ   nb+48(FP), R13
	VXORPS X0, X0, X0

q2block:
	// The 16 4-bit scales as int16 (Y4: 0..7 in both lanes, Y5: 8..15)
	// and the mins times the per-16 activation sums (Y10).
	VMOVDQU      (BX), X1
	VPAND        X15, X1, X2
	VPMOVZXBW    X2, Y2
	VPERMQ       $0x44, Y2, Y4
	VPERMQ       $0xee, Y2, Y5
	VPSRLW       $4, X1, X3
	VPAND        X15, X3, X3
	VPMOVZXBW    X3, Y3
	VPMADDWD     (R15), Y3, Y10
	VPXOR        Y8, Y8, Y8
	VMOVDQU      16(BX), Y9
	Q2STEP(0, 0, Y4)
	Q2STEP(0, 1, Y4)
	Q2STEP(0, 2, Y4)
	Q2STEP(0, 3, Y4)
	VMOVDQU      48(BX), Y9
	Q2STEP(1, 0, Y5)
	Q2STEP(1, 1, Y5)
	Q2STEP(1, 2, Y5)
	Q2STEP(1, 3, Y5)
	// X1 = [dot, mins, dot, mins] as floats; X7 = [d·dx, dmin·dx, 0, 0].
	VPHADDD      Y10, Y8, Y1
	VEXTRACTI128 $1, Y1, X2
	VPADDD       X2, X1, X1
	VPHADDD      X1, X1, X1
	VCVTDQ2PS    X1, X1
	VMOVD        80(BX), X7
	VCVTPH2PS    X7, X7
	VBROADCASTSS (DX), X2
	VMULPS       X2, X7, X7
	VFMADD231PS  X7, X1, X0
	ADDQ         $84, BX
	ADDQ         $256, CX
	ADDQ         $4, DX
	ADDQ         $32, R15
	DECQ         R13
	JNZ          q2block

	VMOVSHDUP X0, X1
	VSUBSS    X1, X0, X0
	VMOVSS    X0, (DI)
	ADDQ      $4, DI
	ADDQ      R8, SI
	DECQ      R9
	JNZ       q2row
	VZEROUPPER
	RET
