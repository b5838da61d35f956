//go:build amd64 && !purego

#include "textflag.h"

// q8_0RowsVNNI is q8_0Rows with AVX512-VNNI's VPDPBUSD (on Y registers, by
// AVX512VL) doing the integer part, four rows a pass: each block of
// activations is loaded once for four rows, and the four rows' float
// accumulators are four independent VFMADD231PS chains where q8_0Rows has one.
//
// VPDPBUSD wants unsigned×signed bytes, as VPMADDUBSW does, so the signs move
// onto the activations as in q8_0Rows (|w| by VPSIGNB, x·sign(w) by VPSIGNB);
// it then sums each group of four products into the int32 lane that
// VPMADDUBSW and VPMADDWD by ones would, exactly (a pair's sum is at most
// 2·128·127, inside VPMADDUBSW's int16, so q8_0Rows never saturates either).
// The float part is q8_0Rows's, lane for lane and block after block, and the
// horizontal sum is HSUM's order: the results are q8_0Rows's to the bit
// (TestVNNIRowsBitIdentical).
//
// Bound by memory: 34 bytes a row and block against 10 vector ops. Four rows
// read 34 bytes at a time each would defeat the hardware prefetcher (as it
// did for q4_0RowsVNNI), so each pass prefetches the next four rows, which lie
// after these, front to back, 136 bytes of them a block (two rows: 68).

// ROWDOT8 adds one row's block, its quants at mem2 and its f16 scale at mem0,
// into acc. Y4 holds the block's activations, X6 their scale. Uses Y7..Y11.
#define ROWDOT8(mem2, mem0, acc) \
	VMOVDQU      mem2, Y7 \
	VPSIGNB      Y7, Y7, Y8 \
	VPSIGNB      Y7, Y4, Y9 \
	VPXOR        Y10, Y10, Y10 \
	VPDPBUSD     Y9, Y8, Y10 \
	VCVTDQ2PS    Y10, Y10 \
	VCVTPH2PS    mem0, X11 \
	VMULSS       X6, X11, X11 \
	VBROADCASTSS X11, Y11 \
	VFMADD231PS  Y11, Y10, acc

// HSUM8 leaves the sum of acc's 8 lanes in x's lane 0 in HSUM's order and
// stores it at off(DI). Uses X10.
#define HSUM8(acc, x, off) \
	VEXTRACTF128 $1, acc, X10 \
	VADDPS       X10, x, x \
	VPERMILPS    $0x0e, x, X10 \
	VADDPS       X10, x, x \
	VPERMILPS    $0x01, x, X10 \
	VADDSS       X10, x, x \
	VMOVSS       x, off(DI)

// func q8_0RowsVNNI(w *byte, stride, rows int, xq *int8, xd *float32, nb int, y *float32)
TEXT ·q8_0RowsVNNI(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ xq+24(FP), R10
	MOVQ xd+32(FP), R11
	MOVQ nb+40(FP), R12
	MOVQ y+48(FP), DI
	LEAQ (R8)(R8*2), AX
	CMPQ R9, $4
	JLT  v80two

v80four:
	MOVQ   SI, BX
	MOVQ   R10, CX
	MOVQ   R11, DX
	MOVQ   R12, R13
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	LEAQ   (SI)(R8*4), R14

v80fourblock:
	PREFETCHT0 (R14)
	PREFETCHT0 64(R14)
	PREFETCHT0 128(R14)
	ADDQ       $136, R14
	VMOVDQU    (CX), Y4
	VMOVSS     (DX), X6
	ROWDOT8(2(BX), (BX), Y0)
	ROWDOT8(2(BX)(R8*1), (BX)(R8*1), Y1)
	ROWDOT8(2(BX)(R8*2), (BX)(R8*2), Y2)
	ROWDOT8(2(BX)(AX*1), (BX)(AX*1), Y3)
	ADDQ       $34, BX
	ADDQ       $32, CX
	ADDQ       $4, DX
	DECQ       R13
	JNZ        v80fourblock

	HSUM8(Y0, X0, 0)
	HSUM8(Y1, X1, 4)
	HSUM8(Y2, X2, 8)
	HSUM8(Y3, X3, 12)
	ADDQ $16, DI
	LEAQ (SI)(R8*4), SI
	SUBQ $4, R9
	CMPQ R9, $4
	JGE  v80four

	// Two or three rows left: two together, the next two prefetched.
v80two:
	CMPQ   R9, $2
	JLT    v80one
	MOVQ   SI, BX
	MOVQ   R10, CX
	MOVQ   R11, DX
	MOVQ   R12, R13
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	LEAQ   (SI)(R8*2), R14

v80twoblock:
	PREFETCHT0 (R14)
	PREFETCHT0 64(R14)
	ADDQ       $68, R14
	VMOVDQU    (CX), Y4
	VMOVSS     (DX), X6
	ROWDOT8(2(BX), (BX), Y0)
	ROWDOT8(2(BX)(R8*1), (BX)(R8*1), Y1)
	ADDQ       $34, BX
	ADDQ       $32, CX
	ADDQ       $4, DX
	DECQ       R13
	JNZ        v80twoblock

	HSUM8(Y0, X0, 0)
	HSUM8(Y1, X1, 4)
	ADDQ $8, DI
	LEAQ (SI)(R8*2), SI
	SUBQ $2, R9

v80one:
	TESTQ R9, R9
	JZ    v80done
	MOVQ   SI, BX
	MOVQ   R10, CX
	MOVQ   R11, DX
	MOVQ   R12, R13
	VXORPS Y0, Y0, Y0

v80oneblock:
	PREFETCHT0 4096(BX)
	VMOVDQU    (CX), Y4
	VMOVSS     (DX), X6
	ROWDOT8(2(BX), (BX), Y0)
	ADDQ       $34, BX
	ADDQ       $32, CX
	ADDQ       $4, DX
	DECQ       R13
	JNZ        v80oneblock

	HSUM8(Y0, X0, 0)

v80done:
	VZEROUPPER
	RET
