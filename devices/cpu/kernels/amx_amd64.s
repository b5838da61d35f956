//go:build amd64 && !purego

#include "textflag.h"

// gemmTileAMX multiplies a panel of 16 unpacked weight rows by a batch laid
// out in tiles of 16 inputs (amx.go): gemmAMXGo's arithmetic, in its order.
//
// Per tile of inputs, Z0..Z15 hold the 16 inputs' float sums (lane r: row
// r). Per block: the inputs' 32 activations are tile A (tmm2, 16 rows of 32
// bytes, 32 apart), the panel's block tile B (tmm4, 8 rows of 64 bytes, 64
// apart); TDPBSUD adds A·B to the zeroed C (tmm0), 16 inputs × 16 rows of
// exact int32 sums, which TILESTORED writes to a scratch buffer (64 bytes a
// row). Then per input, as gemmTileVNNI's FINISH: VPSUBD of the offset
// c·Σq, VCVTDQ2PS, VMULPS of the rows' scales by the input's scale, and a
// VFMADD231PS.
//
// The blocks are pipelined, each stage one block: load the next block's A
// and B tiles (tmm3, tmm5 or tmm2, tmm4, taking turns), store this block's
// C (tmm0 or tmm1) to its half of the scratch, start the next block's
// TDPBSUD, then fold the previous block, stored a stage before, so that the
// vector units never wait for the tile store they read. (On the H100 host's
// Xeon this and a version folding two blocks at a time, a pair behind,
// measured the same: 165-173 GMAC/s on one core against the VNNI kernel's
// 115, BenchmarkGEMM at 512 inputs. The tile work alone and the folds alone
// each ran about twice as fast as both, so they hardly overlap; what
// serializes them was not found.)

// Go's assembler has no AMX instructions: they are written as bytes, each
// with the fixed registers named (AX = 32, A's row stride; BX = 64, B's and
// C's). An assembly function is never preempted asynchronously, so the
// tiles live within one call: LDTILECFG at the start, TILERELEASE at the end.

#define LDTILECFG_R9          BYTE $0xc4; BYTE $0xc2; BYTE $0x78; BYTE $0x49; BYTE $0x01
#define TILERELEASE           BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0xc0
#define TILEZERO_TMM0         BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc0
#define TILEZERO_TMM1         BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc8
// tileloadd (DI)(AX*1), tmm2 or tmm3
#define TILELOADD_TMM2_DI     BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x14; BYTE $0x07
#define TILELOADD_TMM3_DI     BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x1c; BYTE $0x07
// tileloadd 512(DI)(AX*1), tmm3 (gemmTileAMXK's odd sub-block)
#define TILELOADD_TMM3_DI512  BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x9c; BYTE $0x07; BYTE $0x00; BYTE $0x02; BYTE $0x00; BYTE $0x00
// tileloadd (SI)(BX*1), tmm4 or tmm5
#define TILELOADD_TMM4_SI     BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x24; BYTE $0x1e
#define TILELOADD_TMM5_SI     BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x2c; BYTE $0x1e
// tileloadd 512(SI)(BX*1), tmm5
#define TILELOADD_TMM5_SI512  BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0xac; BYTE $0x1e; BYTE $0x00; BYTE $0x02; BYTE $0x00; BYTE $0x00
// tdpbsud tmm0 += tmm2·tmm4 and tmm1 += tmm3·tmm5 (A signed, B unsigned)
#define TDPBSUD_TMM0_TMM2_TMM4 BYTE $0xc4; BYTE $0xe2; BYTE $0x5a; BYTE $0x5e; BYTE $0xc2
#define TDPBSUD_TMM1_TMM3_TMM5 BYTE $0xc4; BYTE $0xe2; BYTE $0x52; BYTE $0x5e; BYTE $0xcb
// tilestored tmm0, (R11)(BX*1) and tmm1, 1024(R11)(BX*1)
#define TILESTORED_R11_TMM0   BYTE $0xc4; BYTE $0xc2; BYTE $0x7a; BYTE $0x4b; BYTE $0x04; BYTE $0x1b
#define TILESTORED_R11_1024_TMM1 BYTE $0xc4; BYTE $0xc2; BYTE $0x7a; BYTE $0x4b; BYTE $0x8c; BYTE $0x1b; BYTE $0x00; BYTE $0x04; BYTE $0x00; BYTE $0x00

// FOLD folds input t's integer sums at offset c from R11 into its float
// sums zf, with the rows' scales in Z16.
#define FOLD(c, t, zf) \
	VMOVDQU32        (c+t*64)(R11), Z17 \
	VPSUBD.BCST      (t*4)(R12), Z17, Z17 \
	VCVTDQ2PS        Z17, Z17 \
	VMULPS.BCST      (t*4)(R10), Z16, Z18 \
	VFMADD231PS      Z18, Z17, zf

// LOAD0 and LOAD1 load the next block's A and B tiles into tmm2, tmm4 or
// tmm3, tmm5; DP0 and DP1 multiply them into C tmm0 or tmm1.
#define LOAD0 \
	TILELOADD_TMM2_DI \
	TILELOADD_TMM4_SI \
	ADDQ $512, DI \
	ADDQ $512, SI
#define LOAD1 \
	TILELOADD_TMM3_DI \
	TILELOADD_TMM5_SI \
	ADDQ $512, DI \
	ADDQ $512, SI
#define DP0 \
	TILEZERO_TMM0 \
	TDPBSUD_TMM0_TMM2_TMM4
#define DP1 \
	TILEZERO_TMM1 \
	TDPBSUD_TMM1_TMM3_TMM5

// func gemmTileAMX(pq *byte, psc *float32, nb int, aq *byte, ad *float32, aoff *int32, tiles int, out *float32, cbuf *int32, cfg *byte)
TEXT ·gemmTileAMX(SB), NOSPLIT, $0-80
	MOVQ aq+24(FP), DI
	MOVQ ad+32(FP), R10
	MOVQ aoff+40(FP), R12
	MOVQ tiles+48(FP), DX
	MOVQ out+56(FP), R13
	MOVQ cbuf+64(FP), R11
	MOVQ cfg+72(FP), R9
	MOVQ $32, AX
	MOVQ $64, BX
	LDTILECFG_R9

tile:
	MOVQ pq+0(FP), SI
	MOVQ psc+8(FP), R8
	MOVQ nb+16(FP), CX
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
	LOAD0
	DP0
	DECQ CX
	JZ   only
	// Block 0 is in tmm0; the first stage has nothing to fold.
	LOAD1
	TILESTORED_R11_TMM0
	DP1
	DECQ CX

odd:
	// The block in tmm1 is in flight, the one before it is in the buffer's
	// first half.
	TESTQ CX, CX
	JZ   end1
	LOAD0
	TILESTORED_R11_1024_TMM1
	DP0
	DECQ CX
	VMOVUPS (R8), Z16
	FOLD(0, 0, Z0)
	FOLD(0, 1, Z1)
	FOLD(0, 2, Z2)
	FOLD(0, 3, Z3)
	FOLD(0, 4, Z4)
	FOLD(0, 5, Z5)
	FOLD(0, 6, Z6)
	FOLD(0, 7, Z7)
	FOLD(0, 8, Z8)
	FOLD(0, 9, Z9)
	FOLD(0, 10, Z10)
	FOLD(0, 11, Z11)
	FOLD(0, 12, Z12)
	FOLD(0, 13, Z13)
	FOLD(0, 14, Z14)
	FOLD(0, 15, Z15)
	ADDQ $64, R8
	ADDQ $64, R10
	ADDQ $64, R12
	// The block in tmm0 is in flight, the one before it in the second half.
	TESTQ CX, CX
	JZ   end0
	LOAD1
	TILESTORED_R11_TMM0
	DP1
	DECQ CX
	VMOVUPS (R8), Z16
	FOLD(1024, 0, Z0)
	FOLD(1024, 1, Z1)
	FOLD(1024, 2, Z2)
	FOLD(1024, 3, Z3)
	FOLD(1024, 4, Z4)
	FOLD(1024, 5, Z5)
	FOLD(1024, 6, Z6)
	FOLD(1024, 7, Z7)
	FOLD(1024, 8, Z8)
	FOLD(1024, 9, Z9)
	FOLD(1024, 10, Z10)
	FOLD(1024, 11, Z11)
	FOLD(1024, 12, Z12)
	FOLD(1024, 13, Z13)
	FOLD(1024, 14, Z14)
	FOLD(1024, 15, Z15)
	ADDQ $64, R8
	ADDQ $64, R10
	ADDQ $64, R12
	JMP  odd

only:
	TILESTORED_R11_TMM0
	VMOVUPS (R8), Z16
	FOLD(0, 0, Z0)
	FOLD(0, 1, Z1)
	FOLD(0, 2, Z2)
	FOLD(0, 3, Z3)
	FOLD(0, 4, Z4)
	FOLD(0, 5, Z5)
	FOLD(0, 6, Z6)
	FOLD(0, 7, Z7)
	FOLD(0, 8, Z8)
	FOLD(0, 9, Z9)
	FOLD(0, 10, Z10)
	FOLD(0, 11, Z11)
	FOLD(0, 12, Z12)
	FOLD(0, 13, Z13)
	FOLD(0, 14, Z14)
	FOLD(0, 15, Z15)
	ADDQ $64, R8
	ADDQ $64, R10
	ADDQ $64, R12
	JMP  store

end1:
	TILESTORED_R11_1024_TMM1
	VMOVUPS (R8), Z16
	FOLD(0, 0, Z0)
	FOLD(0, 1, Z1)
	FOLD(0, 2, Z2)
	FOLD(0, 3, Z3)
	FOLD(0, 4, Z4)
	FOLD(0, 5, Z5)
	FOLD(0, 6, Z6)
	FOLD(0, 7, Z7)
	FOLD(0, 8, Z8)
	FOLD(0, 9, Z9)
	FOLD(0, 10, Z10)
	FOLD(0, 11, Z11)
	FOLD(0, 12, Z12)
	FOLD(0, 13, Z13)
	FOLD(0, 14, Z14)
	FOLD(0, 15, Z15)
	ADDQ $64, R8
	ADDQ $64, R10
	ADDQ $64, R12
	VMOVUPS (R8), Z16
	FOLD(1024, 0, Z0)
	FOLD(1024, 1, Z1)
	FOLD(1024, 2, Z2)
	FOLD(1024, 3, Z3)
	FOLD(1024, 4, Z4)
	FOLD(1024, 5, Z5)
	FOLD(1024, 6, Z6)
	FOLD(1024, 7, Z7)
	FOLD(1024, 8, Z8)
	FOLD(1024, 9, Z9)
	FOLD(1024, 10, Z10)
	FOLD(1024, 11, Z11)
	FOLD(1024, 12, Z12)
	FOLD(1024, 13, Z13)
	FOLD(1024, 14, Z14)
	FOLD(1024, 15, Z15)
	ADDQ $64, R8
	ADDQ $64, R10
	ADDQ $64, R12
	JMP  store

end0:
	TILESTORED_R11_TMM0
	VMOVUPS (R8), Z16
	FOLD(1024, 0, Z0)
	FOLD(1024, 1, Z1)
	FOLD(1024, 2, Z2)
	FOLD(1024, 3, Z3)
	FOLD(1024, 4, Z4)
	FOLD(1024, 5, Z5)
	FOLD(1024, 6, Z6)
	FOLD(1024, 7, Z7)
	FOLD(1024, 8, Z8)
	FOLD(1024, 9, Z9)
	FOLD(1024, 10, Z10)
	FOLD(1024, 11, Z11)
	FOLD(1024, 12, Z12)
	FOLD(1024, 13, Z13)
	FOLD(1024, 14, Z14)
	FOLD(1024, 15, Z15)
	ADDQ $64, R8
	ADDQ $64, R10
	ADDQ $64, R12
	VMOVUPS (R8), Z16
	FOLD(0, 0, Z0)
	FOLD(0, 1, Z1)
	FOLD(0, 2, Z2)
	FOLD(0, 3, Z3)
	FOLD(0, 4, Z4)
	FOLD(0, 5, Z5)
	FOLD(0, 6, Z6)
	FOLD(0, 7, Z7)
	FOLD(0, 8, Z8)
	FOLD(0, 9, Z9)
	FOLD(0, 10, Z10)
	FOLD(0, 11, Z11)
	FOLD(0, 12, Z12)
	FOLD(0, 13, Z13)
	FOLD(0, 14, Z14)
	FOLD(0, 15, Z15)
	ADDQ $64, R8
	ADDQ $64, R10
	ADDQ $64, R12

store:
	VMOVUPS Z0, 0(R13)
	VMOVUPS Z1, 64(R13)
	VMOVUPS Z2, 128(R13)
	VMOVUPS Z3, 192(R13)
	VMOVUPS Z4, 256(R13)
	VMOVUPS Z5, 320(R13)
	VMOVUPS Z6, 384(R13)
	VMOVUPS Z7, 448(R13)
	VMOVUPS Z8, 512(R13)
	VMOVUPS Z9, 576(R13)
	VMOVUPS Z10, 640(R13)
	VMOVUPS Z11, 704(R13)
	VMOVUPS Z12, 768(R13)
	VMOVUPS Z13, 832(R13)
	VMOVUPS Z14, 896(R13)
	VMOVUPS Z15, 960(R13)
	ADDQ $1024, R13
	DECQ DX
	JNZ  tile

	TILERELEASE
	VZEROUPPER
	RET

// gemmTileAMXK multiplies an unpacked Q4_K panel by a batch laid out in
// tiles of 16 inputs (amxk.go): gemmAMXKGo's arithmetic, in its order.
//
// Per tile, Z0..Z15 hold the 16 inputs' sums acc and the tile's output rows
// (R13) their sums accMin, until the end, when out = acc − accMin. Per pair
// of sub-blocks, two TDPBSUDs (tmm0 += tmm2·tmm4 for the even one, tmm1 +=
// tmm3·tmm5 for the odd) give the exact sums, stored to one of two buffers
// (R11 written, R9 read, taking turns), folded a pair later: per input,
// ie·sc_e + io·sc_o and m_e·bs_e + m_o·bs_o in floats (exact, amxk.go), each
// times its scale into its sum. The scales d·xd and dmin·xd of each input
// are made once per super-block, before its first pair's folds, into the
// scratch at R14.

// PAIRK multiplies the next pair of sub-blocks into the buffer at R11.
#define PAIRK \
	TILELOADD_TMM2_DI \
	TILELOADD_TMM4_SI \
	TILEZERO_TMM0 \
	TDPBSUD_TMM0_TMM2_TMM4 \
	TILELOADD_TMM3_DI512 \
	TILELOADD_TMM5_SI512 \
	TILEZERO_TMM1 \
	TDPBSUD_TMM1_TMM3_TMM5 \
	TILESTORED_R11_TMM0 \
	TILESTORED_R11_1024_TMM1 \
	ADDQ $1024, DI \
	ADDQ $1024, SI

// SCALEK makes input t's d·xd and dmin·xd, from the rows' d in Z26 and dmin
// in Z27 and its scale at R10.
#define SCALEK(t) \
	VMULPS.BCST (t*4)(R10), Z26, Z19 \
	VMOVUPS     Z19, (t*64)(R14) \
	VMULPS.BCST (t*4)(R10), Z27, Z21 \
	VMOVUPS     Z21, (1024+t*64)(R14)

// FOLDK folds input t's sums of a pair from R9 into zf and its output row,
// with the panel's scales in Z16 (even), Z23 (odd), mins Z24, Z25; its sums
// at R12.
#define FOLDK(t, zf) \
	VCVTDQ2PS        (t*64)(R9), Z17 \
	VCVTDQ2PS        (1024+t*64)(R9), Z18 \
	VMULPS           Z23, Z18, Z18 \
	VFMADD213PS      Z18, Z16, Z17 \
	VFMADD231PS      (t*64)(R14), Z17, zf \
	VMULPS.BCST      (64+t*4)(R12), Z25, Z20 \
	VFMADD231PS.BCST (t*4)(R12), Z24, Z20 \
	VMOVUPS          (t*64)(R13), Z22 \
	VFMADD231PS      (1024+t*64)(R14), Z20, Z22 \
	VMOVUPS          Z22, (t*64)(R13)

// func gemmTileAMXK(pq *byte, pk *float32, pairs int, aq *byte, axd *float32, abs *float32, tiles int, out *float32, cbuf *int32, cfg *byte)
TEXT ·gemmTileAMXK(SB), NOSPLIT, $0-80
	MOVQ aq+24(FP), DI
	MOVQ axd+32(FP), R10
	MOVQ abs+40(FP), R12
	MOVQ tiles+48(FP), DX
	MOVQ out+56(FP), R13
	MOVQ cfg+72(FP), R9
	MOVQ $32, AX
	MOVQ $64, BX
	LDTILECFG_R9

ktile:
	MOVQ pq+0(FP), SI
	MOVQ pk+8(FP), R8
	MOVQ pairs+16(FP), CX
	MOVQ cbuf+64(FP), R11
	LEAQ 2048(R11), R9
	LEAQ 4096(R11), R14
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
	VMOVUPS Z0, 0(R13)
	VMOVUPS Z0, 64(R13)
	VMOVUPS Z0, 128(R13)
	VMOVUPS Z0, 192(R13)
	VMOVUPS Z0, 256(R13)
	VMOVUPS Z0, 320(R13)
	VMOVUPS Z0, 384(R13)
	VMOVUPS Z0, 448(R13)
	VMOVUPS Z0, 512(R13)
	VMOVUPS Z0, 576(R13)
	VMOVUPS Z0, 640(R13)
	VMOVUPS Z0, 704(R13)
	VMOVUPS Z0, 768(R13)
	VMOVUPS Z0, 832(R13)
	VMOVUPS Z0, 896(R13)
	VMOVUPS Z0, 960(R13)
	PAIRK
	XCHGQ R9, R11
	DECQ CX

kpairs:
	TESTQ CX, CX
	JZ    klast
	PAIRK
	// The pair to fold starts a super-block when CX ≡ 3 (mod 4): pairs
	// is a multiple of 4 and CX = pairs − (the pair's index + 1).
	MOVQ CX, AX
	ANDQ $3, AX
	CMPQ AX, $3
	MOVQ $32, AX
	JNE  kfold
	VMOVUPS (R8), Z26
	VMOVUPS 64(R8), Z27
	SCALEK(0)
	SCALEK(1)
	SCALEK(2)
	SCALEK(3)
	SCALEK(4)
	SCALEK(5)
	SCALEK(6)
	SCALEK(7)
	SCALEK(8)
	SCALEK(9)
	SCALEK(10)
	SCALEK(11)
	SCALEK(12)
	SCALEK(13)
	SCALEK(14)
	SCALEK(15)
	ADDQ $128, R8
	ADDQ $64, R10

kfold:
	VMOVUPS (R8), Z16
	VMOVUPS 64(R8), Z23
	VMOVUPS 128(R8), Z24
	VMOVUPS 192(R8), Z25
	FOLDK(0, Z0)
	FOLDK(1, Z1)
	FOLDK(2, Z2)
	FOLDK(3, Z3)
	FOLDK(4, Z4)
	FOLDK(5, Z5)
	FOLDK(6, Z6)
	FOLDK(7, Z7)
	FOLDK(8, Z8)
	FOLDK(9, Z9)
	FOLDK(10, Z10)
	FOLDK(11, Z11)
	FOLDK(12, Z12)
	FOLDK(13, Z13)
	FOLDK(14, Z14)
	FOLDK(15, Z15)
	ADDQ $256, R8
	ADDQ $128, R12
	XCHGQ R9, R11
	DECQ CX
	JMP  kpairs

klast:
	// The last pair ends its super-block, never starts one.
	VMOVUPS (R8), Z16
	VMOVUPS 64(R8), Z23
	VMOVUPS 128(R8), Z24
	VMOVUPS 192(R8), Z25
	FOLDK(0, Z0)
	FOLDK(1, Z1)
	FOLDK(2, Z2)
	FOLDK(3, Z3)
	FOLDK(4, Z4)
	FOLDK(5, Z5)
	FOLDK(6, Z6)
	FOLDK(7, Z7)
	FOLDK(8, Z8)
	FOLDK(9, Z9)
	FOLDK(10, Z10)
	FOLDK(11, Z11)
	FOLDK(12, Z12)
	FOLDK(13, Z13)
	FOLDK(14, Z14)
	FOLDK(15, Z15)
	ADDQ $256, R8
	ADDQ $128, R12
	VSUBPS 0(R13), Z0, Z0
	VMOVUPS Z0, 0(R13)
	VSUBPS 64(R13), Z1, Z1
	VMOVUPS Z1, 64(R13)
	VSUBPS 128(R13), Z2, Z2
	VMOVUPS Z2, 128(R13)
	VSUBPS 192(R13), Z3, Z3
	VMOVUPS Z3, 192(R13)
	VSUBPS 256(R13), Z4, Z4
	VMOVUPS Z4, 256(R13)
	VSUBPS 320(R13), Z5, Z5
	VMOVUPS Z5, 320(R13)
	VSUBPS 384(R13), Z6, Z6
	VMOVUPS Z6, 384(R13)
	VSUBPS 448(R13), Z7, Z7
	VMOVUPS Z7, 448(R13)
	VSUBPS 512(R13), Z8, Z8
	VMOVUPS Z8, 512(R13)
	VSUBPS 576(R13), Z9, Z9
	VMOVUPS Z9, 576(R13)
	VSUBPS 640(R13), Z10, Z10
	VMOVUPS Z10, 640(R13)
	VSUBPS 704(R13), Z11, Z11
	VMOVUPS Z11, 704(R13)
	VSUBPS 768(R13), Z12, Z12
	VMOVUPS Z12, 768(R13)
	VSUBPS 832(R13), Z13, Z13
	VMOVUPS Z13, 832(R13)
	VSUBPS 896(R13), Z14, Z14
	VMOVUPS Z14, 896(R13)
	VSUBPS 960(R13), Z15, Z15
	VMOVUPS Z15, 960(R13)
	ADDQ $1024, R13
	DECQ DX
	JNZ  ktile

	TILERELEASE
	VZEROUPPER
	RET

// gemmTileAMX6 multiplies an unpacked Q6_K panel by a batch laid out in
// tiles of 16 inputs (amx6.go): gemmAMX6Go's arithmetic, in its order.
//
// Its tiles are one sub-block of 16 columns deep (amxConfig6): A 16 inputs
// × 16 bytes (16 apart, AX), B 4 rows × 64 bytes. Per tile, Z0..Z15 hold
// the 16 inputs' int32 sums of the current super-block and the tile's
// output rows (R13) their float sums. Per pair of sub-blocks two TDPBSSDs
// (signed weights less 32, signed activations) give the exact sums, stored
// to one of two buffers (R11 written, R9 read, taking turns) and folded a
// pair later: each times its rows' scales (VPMULLD) into the int32 sums;
// after a super-block's eighth pair, each input's int32 sums times d·xd go
// into its float sums (R12 counts the pairs left in the super-block).

// tileloadd 256(DI)(AX*1), tmm3 and 256(SI)(BX*1), tmm5
#define TILELOADD_TMM3_DI256  BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x9c; BYTE $0x07; BYTE $0x00; BYTE $0x01; BYTE $0x00; BYTE $0x00
#define TILELOADD_TMM5_SI256  BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0xac; BYTE $0x1e; BYTE $0x00; BYTE $0x01; BYTE $0x00; BYTE $0x00
// tdpbssd tmm0 += tmm2·tmm4 and tmm1 += tmm3·tmm5 (both signed)
#define TDPBSSD_TMM0_TMM2_TMM4 BYTE $0xc4; BYTE $0xe2; BYTE $0x5b; BYTE $0x5e; BYTE $0xc2
#define TDPBSSD_TMM1_TMM3_TMM5 BYTE $0xc4; BYTE $0xe2; BYTE $0x53; BYTE $0x5e; BYTE $0xcb

// PAIR6 multiplies the next two sub-blocks into the buffer at R11.
#define PAIR6 \
	TILELOADD_TMM2_DI \
	TILELOADD_TMM4_SI \
	TILEZERO_TMM0 \
	TDPBSSD_TMM0_TMM2_TMM4 \
	TILELOADD_TMM3_DI256 \
	TILELOADD_TMM5_SI256 \
	TILEZERO_TMM1 \
	TDPBSSD_TMM1_TMM3_TMM5 \
	TILESTORED_R11_TMM0 \
	TILESTORED_R11_1024_TMM1 \
	ADDQ $512, DI \
	ADDQ $512, SI

// FOLD6 adds input t's sums of a pair, from R9, times the rows' scales
// (Z16 even, Z17 odd) to its int32 sums zi.
#define FOLD6(t, zi) \
	VPMULLD (t*64)(R9), Z16, Z18 \
	VPADDD  Z18, zi, zi \
	VPMULLD (1024+t*64)(R9), Z17, Z19 \
	VPADDD  Z19, zi, zi

// SBEND6 folds input t's int32 sums zi into its float sums (its output row)
// with the rows' d in Z16 and its scale at R10, and clears zi.
#define SBEND6(t, zi) \
	VCVTDQ2PS   zi, Z17 \
	VMULPS.BCST (t*4)(R10), Z16, Z18 \
	VMOVUPS     (t*64)(R13), Z19 \
	VFMADD231PS Z18, Z17, Z19 \
	VMOVUPS     Z19, (t*64)(R13) \
	VPXORD      zi, zi, zi

// func gemmTileAMX6(pq *byte, pki *int32, pd *float32, nsb int, aq *byte, axd *float32, tiles int, out *float32, cbuf *int32, cfg *byte)
TEXT ·gemmTileAMX6(SB), NOSPLIT, $0-80
	MOVQ aq+32(FP), DI
	MOVQ axd+40(FP), R10
	MOVQ tiles+48(FP), DX
	MOVQ out+56(FP), R13
	MOVQ cfg+72(FP), R9
	MOVQ $16, AX
	MOVQ $64, BX
	LDTILECFG_R9

tile6:
	MOVQ pq+0(FP), SI
	MOVQ pki+8(FP), R8
	MOVQ pd+16(FP), R14
	MOVQ nsb+24(FP), CX
	SHLQ $3, CX
	MOVQ $8, R12
	MOVQ cbuf+64(FP), R11
	LEAQ 2048(R11), R9
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
	VMOVUPS Z0, 0(R13)
	VMOVUPS Z0, 64(R13)
	VMOVUPS Z0, 128(R13)
	VMOVUPS Z0, 192(R13)
	VMOVUPS Z0, 256(R13)
	VMOVUPS Z0, 320(R13)
	VMOVUPS Z0, 384(R13)
	VMOVUPS Z0, 448(R13)
	VMOVUPS Z0, 512(R13)
	VMOVUPS Z0, 576(R13)
	VMOVUPS Z0, 640(R13)
	VMOVUPS Z0, 704(R13)
	VMOVUPS Z0, 768(R13)
	VMOVUPS Z0, 832(R13)
	VMOVUPS Z0, 896(R13)
	VMOVUPS Z0, 960(R13)
	PAIR6
	XCHGQ R9, R11
	DECQ CX

pairs6:
	TESTQ CX, CX
	JZ    last6
	PAIR6
	VMOVDQU32 (R8), Z16
	VMOVDQU32 64(R8), Z17
	FOLD6(0, Z0)
	FOLD6(1, Z1)
	FOLD6(2, Z2)
	FOLD6(3, Z3)
	FOLD6(4, Z4)
	FOLD6(5, Z5)
	FOLD6(6, Z6)
	FOLD6(7, Z7)
	FOLD6(8, Z8)
	FOLD6(9, Z9)
	FOLD6(10, Z10)
	FOLD6(11, Z11)
	FOLD6(12, Z12)
	FOLD6(13, Z13)
	FOLD6(14, Z14)
	FOLD6(15, Z15)
	ADDQ $128, R8
	DECQ R12
	JNZ  next6
	VMOVUPS (R14), Z16
	SBEND6(0, Z0)
	SBEND6(1, Z1)
	SBEND6(2, Z2)
	SBEND6(3, Z3)
	SBEND6(4, Z4)
	SBEND6(5, Z5)
	SBEND6(6, Z6)
	SBEND6(7, Z7)
	SBEND6(8, Z8)
	SBEND6(9, Z9)
	SBEND6(10, Z10)
	SBEND6(11, Z11)
	SBEND6(12, Z12)
	SBEND6(13, Z13)
	SBEND6(14, Z14)
	SBEND6(15, Z15)
	ADDQ $64, R14
	ADDQ $64, R10
	MOVQ $8, R12

next6:
	XCHGQ R9, R11
	DECQ CX
	JMP  pairs6

last6:
	VMOVDQU32 (R8), Z16
	VMOVDQU32 64(R8), Z17
	FOLD6(0, Z0)
	FOLD6(1, Z1)
	FOLD6(2, Z2)
	FOLD6(3, Z3)
	FOLD6(4, Z4)
	FOLD6(5, Z5)
	FOLD6(6, Z6)
	FOLD6(7, Z7)
	FOLD6(8, Z8)
	FOLD6(9, Z9)
	FOLD6(10, Z10)
	FOLD6(11, Z11)
	FOLD6(12, Z12)
	FOLD6(13, Z13)
	FOLD6(14, Z14)
	FOLD6(15, Z15)
	ADDQ $128, R8
	VMOVUPS (R14), Z16
	SBEND6(0, Z0)
	SBEND6(1, Z1)
	SBEND6(2, Z2)
	SBEND6(3, Z3)
	SBEND6(4, Z4)
	SBEND6(5, Z5)
	SBEND6(6, Z6)
	SBEND6(7, Z7)
	SBEND6(8, Z8)
	SBEND6(9, Z9)
	SBEND6(10, Z10)
	SBEND6(11, Z11)
	SBEND6(12, Z12)
	SBEND6(13, Z13)
	SBEND6(14, Z14)
	SBEND6(15, Z15)
	ADDQ $64, R14
	ADDQ $64, R10
	ADDQ $1024, R13
	DECQ DX
	JNZ  tile6

	TILERELEASE
	VZEROUPPER
	RET
