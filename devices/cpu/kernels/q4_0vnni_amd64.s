//go:build amd64 && !purego

#include "textflag.h"

// q4_0RowsVNNI is q4_0Rows with AVX512-VNNI's VPDPBUSD (on Y registers, by
// AVX512VL) doing the integer part, four rows a pass so that each block of
// activations is loaded, and its correction made, once for four rows.
//
// VPDPBUSD sums unsigned×signed bytes four at a time into the int32 lane
// that VPMADDUBSW then VPMADDWD would: lane i of a block holds
// Σ_{j=4i..4i+3} (nib_j−8)·x_j either way, exactly, so nibbles straight from
// the weights (0..15, unsigned) need no VPSUBB and the activations no VPSIGNB;
// the −8·Σx_j is the same VPDPBUSD of 8s against x, negated, shared by the
// four rows and loaded into each row's lane sums before its dot. The float
// part is q4_0Rows's, lane for lane and block after block: convert, multiply
// by the f16 weight scale times the activation scale, VFMADD231PS into an
// 8-lane accumulator per row, then the same horizontal sum, so the results
// are q4_0Rows's to the bit (TestQ4_0VNNIBitIdentical).
//
// Per block and row: 3 ops to unpack (broadcast load of the 16 nibble bytes,
// VPSRLVQ by 4 in the upper half, VPAND), a register move and VPDPBUSD, then
// VCVTDQ2PS, VCVTPH2PS, VMULSS, VBROADCASTSS, VFMADD231PS: 10 against
// q4_0Rows's 15, plus per block for all four rows one activation load, the
// correction (VPXOR, VPDPBUSD, VPSUBD) and a broadcast of the activation
// scale. Four accumulators also break the one VFMADD231PS chain per row that
// bounds q4_0Rows at its latency per block.
//
// Reading four rows 18 bytes at a time each defeats the hardware prefetcher:
// without help this kernel read weights from DRAM at half q4_0Rows's rate.
// So each pass prefetches the next four rows, which lie after these in
// memory, front to back, 72 bytes of them a block (two rows at a time, 36):
// the whole next group is in cache when its pass begins.

DATA vnniNibbles<>+0(SB)/4, $0x0f0f0f0f
GLOBL vnniNibbles<>(SB), RODATA|NOPTR, $4
DATA vnniEights<>+0(SB)/4, $0x08080808
GLOBL vnniEights<>(SB), RODATA|NOPTR, $4
DATA vnniShifts<>+0(SB)/8, $0
DATA vnniShifts<>+8(SB)/8, $0
DATA vnniShifts<>+16(SB)/8, $4
DATA vnniShifts<>+24(SB)/8, $4
GLOBL vnniShifts<>(SB), RODATA|NOPTR, $32

// XCORR loads the block's activations at (CX) into Y4 and sets Y5 to
// −8·Σ of each group of 4 of them. Y12 is zero, Y14 holds byte 8s.
#define XCORR \
	VMOVDQU  (CX), Y4 \
	VPXOR    Y5, Y5, Y5 \
	VPDPBUSD Y4, Y14, Y5 \
	VPSUBD   Y5, Y12, Y5

// ROWDOT adds one row's block at off(BX)(idx) into acc: q4_0Rows's
// arithmetic, with Y4, Y5 from XCORR, X6 the activation scale. Uses Y7..Y9;
// Y15 holds byte 0x0f, Y13 the qword shifts 0,0,4,4.
#define ROWDOT(mem2, mem0, acc) \
	VBROADCASTI128 mem2, Y7 \
	VPSRLVQ        Y13, Y7, Y7 \
	VPAND          Y15, Y7, Y7 \
	VMOVDQA        Y5, Y8 \
	VPDPBUSD       Y4, Y7, Y8 \
	VCVTDQ2PS      Y8, Y8 \
	VCVTPH2PS      mem0, X9 \
	VMULSS         X6, X9, X9 \
	VBROADCASTSS   X9, Y9 \
	VFMADD231PS    Y9, Y8, acc

// HSUMTO leaves the sum of acc's 8 lanes (Y) in X's lane 0 as HSUM does, in
// the same order, and stores it at off(DI). Uses X10.
#define HSUMTO(acc, x, off) \
	VEXTRACTF128 $1, acc, X10 \
	VADDPS       X10, x, x \
	VPERMILPS    $0x0e, x, X10 \
	VADDPS       X10, x, x \
	VPERMILPS    $0x01, x, X10 \
	VADDSS       X10, x, x \
	VMOVSS       x, off(DI)

// func q4_0RowsVNNI(w *byte, stride, rows int, xq *int8, xd *float32, xs *float32, nb int, y *float32)
TEXT ·q4_0RowsVNNI(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ xq+24(FP), R10
	MOVQ xd+32(FP), R11
	MOVQ nb+48(FP), R12
	MOVQ y+56(FP), DI
	LEAQ (R8)(R8*2), AX
	VPBROADCASTD vnniNibbles<>(SB), Y15
	VPBROADCASTD vnniEights<>(SB), Y14
	VMOVDQU      vnniShifts<>(SB), Y13
	VPXOR        Y12, Y12, Y12
	CMPQ         R9, $4
	JLT          v40two

v40four:
	MOVQ   SI, BX
	MOVQ   R10, CX
	MOVQ   R11, DX
	MOVQ   R12, R13
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	LEAQ   (SI)(R8*4), R14

v40fourblock:
	PREFETCHT0 (R14)
	PREFETCHT0 64(R14)
	ADDQ       $72, R14
	XCORR
	VMOVSS (DX), X6
	ROWDOT(2(BX), (BX), Y0)
	ROWDOT(2(BX)(R8*1), (BX)(R8*1), Y1)
	ROWDOT(2(BX)(R8*2), (BX)(R8*2), Y2)
	ROWDOT(2(BX)(AX*1), (BX)(AX*1), Y3)
	ADDQ   $18, BX
	ADDQ   $32, CX
	ADDQ   $4, DX
	DECQ   R13
	JNZ    v40fourblock

	HSUMTO(Y0, X0, 0)
	HSUMTO(Y1, X1, 4)
	HSUMTO(Y2, X2, 8)
	HSUMTO(Y3, X3, 12)
	ADDQ $16, DI
	LEAQ (SI)(R8*4), SI
	SUBQ $4, R9
	CMPQ R9, $4
	JGE  v40four

	// Two or three rows left: two together, the next two prefetched as
	// above (36 bytes of them a block).
v40two:
	CMPQ   R9, $2
	JLT    v40one
	MOVQ   SI, BX
	MOVQ   R10, CX
	MOVQ   R11, DX
	MOVQ   R12, R13
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	LEAQ   (SI)(R8*2), R14

v40twoblock:
	PREFETCHT0 (R14)
	ADDQ       $36, R14
	XCORR
	VMOVSS     (DX), X6
	ROWDOT(2(BX), (BX), Y0)
	ROWDOT(2(BX)(R8*1), (BX)(R8*1), Y1)
	ADDQ       $18, BX
	ADDQ       $32, CX
	ADDQ       $4, DX
	DECQ       R13
	JNZ        v40twoblock

	HSUMTO(Y0, X0, 0)
	HSUMTO(Y1, X1, 4)
	ADDQ $8, DI
	LEAQ (SI)(R8*2), SI
	SUBQ $2, R9

v40one:
	TESTQ R9, R9
	JZ    v40done

v40onerow:
	MOVQ   SI, BX
	MOVQ   R10, CX
	MOVQ   R11, DX
	MOVQ   R12, R13
	VXORPS Y0, Y0, Y0

v40oneblock:
	XCORR
	VMOVSS (DX), X6
	ROWDOT(2(BX), (BX), Y0)
	ADDQ   $18, BX
	ADDQ   $32, CX
	ADDQ   $4, DX
	DECQ   R13
	JNZ    v40oneblock

	HSUMTO(Y0, X0, 0)
	ADDQ $4, DI
	ADDQ R8, SI
	DECQ R9
	JNZ  v40onerow

v40done:
	VZEROUPPER
	RET
