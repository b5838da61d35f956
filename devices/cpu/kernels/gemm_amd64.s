//go:build amd64 && !purego

#include "textflag.h"

// gemmTileVNNI multiplies a panel of 16 unpacked weight rows by a tile of 8
// prepared inputs (gemm.go): gemmTileGo's arithmetic, in its order.
//
// Z0..Z7 hold the 8 inputs' float sums (lane r: row r), Z8..Z15 the integer
// sums of the current sub-block. Per group of 4 columns: one 64-byte load of
// the 16 rows' bytes (unsigned), then for each input a VPDPBUSD of it against
// a broadcast of that input's 4 signed activations, straight from memory:
// 64 multiply-adds an instruction. Per block and input: VPSUBD of the
// offset c·Σq, VCVTDQ2PS, VMULPS of the rows' scales by the input's scale,
// and a VFMADD231PS.

// GROUP runs one group of 4 columns at byte offsets wo (weights, SI) and
// ao (activations, DI) through all 8 inputs, with weight register zw.
#define GROUP(wo, ao, zw) \
	VMOVDQU32         wo(SI), zw \
	VPDPBUSD.BCST     (ao+0)(DI), zw, Z8 \
	VPDPBUSD.BCST     (ao+4)(DI), zw, Z9 \
	VPDPBUSD.BCST     (ao+8)(DI), zw, Z10 \
	VPDPBUSD.BCST     (ao+12)(DI), zw, Z11 \
	VPDPBUSD.BCST     (ao+16)(DI), zw, Z12 \
	VPDPBUSD.BCST     (ao+20)(DI), zw, Z13 \
	VPDPBUSD.BCST     (ao+24)(DI), zw, Z14 \
	VPDPBUSD.BCST     (ao+28)(DI), zw, Z15

// FINISH folds input t's integer sum zi into its float sum zf.
#define FINISH(t, zi, zf) \
	VPSUBD.BCST      (t*4)(R12), zi, zi \
	VCVTDQ2PS        zi, zi \
	VMULPS.BCST      (t*4)(R10), Z20, Z22 \
	VFMADD231PS      Z22, zi, zf

// func gemmTileVNNI(pq *byte, psc *float32, nb int, aq *byte, ad *float32, aoff *int32, out *float32)
TEXT ·gemmTileVNNI(SB), NOSPLIT, $0-56
	MOVQ pq+0(FP), SI
	MOVQ psc+8(FP), R8
	MOVQ nb+16(FP), CX
	MOVQ aq+24(FP), DI
	MOVQ ad+32(FP), R10
	MOVQ aoff+40(FP), R12
	MOVQ out+48(FP), R13
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7

block:
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	MOVQ $2, BX // passes of 4 groups of 4 columns a block

pass:
	GROUP(0, 0, Z16)
	GROUP(64, 32, Z17)
	GROUP(128, 64, Z18)
	GROUP(192, 96, Z19)
	ADDQ $256, SI
	ADDQ $128, DI
	DECQ BX
	JNZ  pass

	VMOVUPS (R8), Z20
	FINISH(0, Z8, Z0)
	FINISH(1, Z9, Z1)
	FINISH(2, Z10, Z2)
	FINISH(3, Z11, Z3)
	FINISH(4, Z12, Z4)
	FINISH(5, Z13, Z5)
	FINISH(6, Z14, Z6)
	FINISH(7, Z15, Z7)
	ADDQ $64, R8
	ADDQ $32, R10
	ADDQ $32, R12
	DECQ CX
	JNZ  block

	VMOVUPS Z0, 0(R13)
	VMOVUPS Z1, 64(R13)
	VMOVUPS Z2, 128(R13)
	VMOVUPS Z3, 192(R13)
	VMOVUPS Z4, 256(R13)
	VMOVUPS Z5, 320(R13)
	VMOVUPS Z6, 384(R13)
	VMOVUPS Z7, 448(R13)
	VZEROUPPER
	RET
