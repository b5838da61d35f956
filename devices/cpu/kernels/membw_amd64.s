//go:build amd64 && !purego

#include "textflag.h"

// SUMQ leaves in AX the sum of the uint64 lanes of Y0..Y3, using Y1 and Y2.
#define SUMQ \
	VPADDQ Y1, Y0, Y0 \
	VPADDQ Y3, Y2, Y2 \
	VPADDQ Y2, Y0, Y0 \
	VEXTRACTI128 $1, Y0, X1 \
	VPADDQ X1, X0, X0 \
	VPSHUFD $0x4e, X0, X1 \
	VPADDQ X1, X0, X0 \
	MOVQ X0, AX

// func readSumAVX2(p *uint64, n int) uint64
// Sums n uint64s (n a multiple of 32) with four YMM accumulators: the loads
// stream at the core's read bandwidth, the adds are free beside them.
TEXT ·readSumAVX2(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $5, CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
loop:
	VPADDQ (SI), Y0, Y0
	VPADDQ 32(SI), Y1, Y1
	VPADDQ 64(SI), Y2, Y2
	VPADDQ 96(SI), Y3, Y3
	VPADDQ 128(SI), Y0, Y0
	VPADDQ 160(SI), Y1, Y1
	VPADDQ 192(SI), Y2, Y2
	VPADDQ 224(SI), Y3, Y3
	ADDQ $256, SI
	DECQ CX
	JNZ  loop
	SUMQ
	MOVQ AX, ret+16(FP)
	VZEROUPPER
	RET

// func readSum4AVX2(p *uint64, gap, n int) uint64
// Sums n uint64s (n a multiple of 8) at each of p, p+gap bytes, p+2·gap and
// p+3·gap, 64 bytes of each in turn: four streams at once, as the decode
// kernels read their weights.
TEXT ·readSum4AVX2(SB), NOSPLIT, $0-32
	MOVQ p+0(FP), SI
	MOVQ gap+8(FP), AX
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	LEAQ (SI)(AX*1), R8
	LEAQ (R8)(AX*1), R9
	LEAQ (R9)(AX*1), R10
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
loop4:
	VPADDQ (SI), Y0, Y0
	VPADDQ 32(SI), Y1, Y1
	VPADDQ (R8), Y2, Y2
	VPADDQ 32(R8), Y3, Y3
	VPADDQ (R9), Y0, Y0
	VPADDQ 32(R9), Y1, Y1
	VPADDQ (R10), Y2, Y2
	VPADDQ 32(R10), Y3, Y3
	ADDQ $64, SI
	ADDQ $64, R8
	ADDQ $64, R9
	ADDQ $64, R10
	DECQ CX
	JNZ  loop4
	SUMQ
	MOVQ AX, ret+24(FP)
	VZEROUPPER
	RET
