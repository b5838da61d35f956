//go:build amd64 && !purego

#include "textflag.h"
#include "common_amd64.h"

// q4_KRowsVNNI is q4_KRows with AVX-512 (EVEX registers Y16..Y31, embedded
// broadcasts) and AVX512-VNNI's VPDPWSSD, four rows a pass so that each
// super-block's activations, their pairwise per-16 sums and the activation
// scale are loaded once for four rows.
//
// Integers: VPMADDUBSW gives the same int16 pair sums as q4_KRows; where
// q4_KRows then spreads the sub-block's scale with VPSHUFB, multiplies it in
// with VPMADDWD and adds with VPADDD, VPDPWSSD multiplies by the scale as a
// 32-bit broadcast from the stack (the scale in both halves, stored once per
// super-block) and accumulates in one op. Lane m still ends as
// Σ_s scale_s·Σ_{e=4m..4m+3} nib·x, an exact int32 either way (at most
// 8·63·4·15·127 in magnitude). Floats: the same ops on the same lanes in the
// same order as q4_KRows (SUPERSTART, MINS4, SUPEREND, ROWNEXT), per row.
//
// Per super-block and row: 15 ops for the scales and mins (q4_KRows's 12 less
// its VPERMQ, plus two unpacks and two stores of the broadcast pairs), 7 for
// d, dmin and the mins, 7 per 32 nibble bytes (28, against 12 each), 5 to
// finish (two of them zeroing idioms): 55 against q4_KRows's 75, plus, for
// all four rows, two activation loads per 32 nibble bytes and three ops for
// the activation scale and the per-16 sums. The multiplies are as many as
// q4_KRows's (16 a row); VPDPBUSD for the dots would add a zeroed register
// and still need a multiply by the scale per sub-block.
//
// Four interleaved streams defeat the hardware prefetcher (without help
// this kernel read 5632x2048 from DRAM at 20 GB/s against q4_KRows's 24), so
// each four-row pass prefetches the group after next, front to back, 576
// bytes a super-block: 27-28 GB/s; the next group instead, as q4_0RowsVNNI
// does, gave 23-26; the one after that, 25-27 (MatVecCold, 2 cores).

DATA qkvNib<>+0(SB)/4, $0x0f0f0f0f
GLOBL qkvNib<>(SB), RODATA|NOPTR, $4
DATA qkv3f<>+0(SB)/8, $0x3f3f3f3f3f3f3f3f
DATA qkv3f<>+8(SB)/8, $0
GLOBL qkv3f<>(SB), RODATA|NOPTR, $16
DATA qkv30<>+0(SB)/8, $0x3030303030303030
DATA qkv30<>+8(SB)/8, $0x3030303030303030
GLOBL qkv30<>(SB), RODATA|NOPTR, $16
DATA qkvShift<>+0(SB)/8, $0x0000000400000000
DATA qkvShift<>+8(SB)/8, $0
GLOBL qkvShift<>(SB), RODATA|NOPTR, $16

// KSTART(base, so, dacc, macc) is q4_KRows's SCALES, SUPERSTART and MINS4 for
// the row at base: the scale of sub-block s, in both halves of a dword, goes
// to so+4s(SP); d·dx broadcast to dacc; the mins FMA into macc. Needs X13 =
// dx broadcast, X14 = pairwise per-16 sums, X15 = 0x0f bytes; uses X8..X12.
#define KSTART(base, so, dacc, macc) \
	VMOVDQU      4(base), X8 \
	VPSRLD       $2, X8, X9 \
	VPAND        qkv30<>(SB), X9, X9 \
	VPSHUFD      $0xaa, X8, X10 \
	VPSRLVD      qkvShift<>(SB), X10, X10 \
	VPAND        X15, X10, X10 \
	VPOR         X10, X9, X9 \
	VPAND        qkv3f<>(SB), X8, X8 \
	VPUNPCKLDQ   X9, X8, X8 \
	VPMOVZXBW    X8, Y8 \
	VEXTRACTI128 $1, Y8, X12 \
	VPUNPCKLWD   X8, X8, X9 \
	VPUNPCKHWD   X8, X8, X10 \
	VMOVDQU      X9, so(SP) \
	VMOVDQU      X10, (so+16)(SP) \
	VCVTPH2PS    (base), X9 \
	VMULPS       X13, X9, X9 \
	VBROADCASTSS X9, dacc \
	VPERMILPS    $0x55, X9, X10 \
	VPMADDWD     X14, X12, X12 \
	VCVTDQ2PS    X12, X12 \
	VFMADD231PS  X10, X12, macc

// KCHUNK(j, base, so, ia, ib) multiplies nibble bytes 32j..32j+31 of the row
// at base (low nibbles sub-block 2j, high 2j+1) with the activations in Y28,
// Y29 and adds them, scaled, into ia and ib. Uses Y30, Y31.
#define KCHUNK(j, base, so, ia, ib) \
	VPANDD          (16+32*j)(base), Y15, Y30 \
	VPSRLW          $4, (16+32*j)(base), Y31 \
	VPANDD          Y15, Y31, Y31 \
	VPMADDUBSW      Y28, Y30, Y30 \
	VPMADDUBSW      Y29, Y31, Y31 \
	VPDPWSSD.BCST   (so+8*j)(SP), Y30, ia \
	VPDPWSSD.BCST   (so+8*j+4)(SP), Y31, ib

// XLOAD(j) loads activations 64j..64j+63 into Y28, Y29.
#define XLOAD(j) \
	VMOVDQU32 (64*j)(CX), Y28 \
	VMOVDQU32 (64*j+32)(CX), Y29

// KEND is q4_KRows's SUPEREND for one row, then clears its int32 sums.
#define KEND(dacc, ia, ib, acc) \
	VPADDD      ib, ia, ia \
	VCVTDQ2PS   ia, ia \
	VFMADD231PS dacc, ia, acc \
	VPXORD      ia, ia, ia \
	VPXORD      ib, ib, ib

// SBSTART loads the super-block's shared values: X13 the activation scale
// broadcast, X14 the pairwise per-16 sums.
#define SBSTART \
	VBROADCASTSS (DX), X13 \
	VMOVDQU      (R15), X14 \
	VPHADDW      16(R15), X14, X14

#define SBNEXT(label) \
	ADDQ $256, CX \
	ADDQ $4, DX \
	ADDQ $32, R15 \
	DECQ R13 \
	JNZ  label

// KFINISH is q4_KRows's ROWNEXT for the row in acc (Y0..Y3) with mins macc
// (X4..X7): HSUM as common_amd64.h's, (m0+m2)+(m1+m3), subtract, store at
// off(DI). Uses X8.
#define KFINISH(acc, x, macc, off) \
	VEXTRACTF128 $1, acc, X8 \
	VADDPS       X8, x, x \
	VPERMILPS    $0x0e, x, X8 \
	VADDPS       X8, x, x \
	VPERMILPS    $0x01, x, X8 \
	VADDSS       X8, x, x \
	VPERMILPS    $0x0e, macc, X8 \
	VADDPS       X8, macc, macc \
	VPERMILPS    $0x01, macc, X8 \
	VADDSS       X8, macc, macc \
	VSUBSS       macc, x, x \
	VMOVSS       x, off(DI)

// PASSINIT starts a pass: activation pointers, count, cleared accumulators.
#define PASSINIT \
	MOVQ   xq+24(FP), CX \
	MOVQ   xd+32(FP), DX \
	MOVQ   bs+40(FP), R15 \
	MOVQ   nb+48(FP), R13 \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	VXORPS Y4, Y4, Y4 \
	VXORPS Y5, Y5, Y5 \
	VXORPS Y6, Y6, Y6 \
	VXORPS Y7, Y7, Y7 \
	VPXORD Y20, Y20, Y20 \
	VPXORD Y21, Y21, Y21 \
	VPXORD Y22, Y22, Y22 \
	VPXORD Y23, Y23, Y23 \
	VPXORD Y24, Y24, Y24 \
	VPXORD Y25, Y25, Y25 \
	VPXORD Y26, Y26, Y26 \
	VPXORD Y27, Y27, Y27

// Four rows: at BX, R10, R11, R12; stack slots 0, 32, 64, 96.
#define CHUNK4(j) \
	XLOAD(j) \
	KCHUNK(j, BX, 0, Y20, Y24) \
	KCHUNK(j, R10, 32, Y21, Y25) \
	KCHUNK(j, R11, 64, Y22, Y26) \
	KCHUNK(j, R12, 96, Y23, Y27)

// func q4_KRowsVNNI(w *byte, stride, rows int, xq *int8, xd *float32, bs *int16, nb int, y *float32)
TEXT ·q4_KRowsVNNI(SB), NOSPLIT, $128-64
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ y+56(FP), DI
	VPBROADCASTD qkvNib<>(SB), Y15
	CMPQ R9, $4
	JLT  k4two

k4four:
	PASSINIT
	MOVQ SI, BX
	LEAQ (SI)(R8*1), R10
	LEAQ (SI)(R8*2), R11
	LEAQ (R10)(R8*2), R12
	LEAQ (SI)(R8*8), R14

k4fourblock:
	PREFETCHT0 (R14)
	PREFETCHT0 64(R14)
	PREFETCHT0 128(R14)
	PREFETCHT0 192(R14)
	PREFETCHT0 256(R14)
	PREFETCHT0 320(R14)
	PREFETCHT0 384(R14)
	PREFETCHT0 448(R14)
	PREFETCHT0 512(R14)
	ADDQ       $576, R14
	SBSTART
	KSTART(BX, 0, Y16, X4)
	KSTART(R10, 32, Y17, X5)
	KSTART(R11, 64, Y18, X6)
	KSTART(R12, 96, Y19, X7)
	CHUNK4(0)
	CHUNK4(1)
	CHUNK4(2)
	CHUNK4(3)
	KEND(Y16, Y20, Y24, Y0)
	KEND(Y17, Y21, Y25, Y1)
	KEND(Y18, Y22, Y26, Y2)
	KEND(Y19, Y23, Y27, Y3)
	ADDQ $144, BX
	ADDQ $144, R10
	ADDQ $144, R11
	ADDQ $144, R12
	SBNEXT(k4fourblock)

	KFINISH(Y0, X0, X4, 0)
	KFINISH(Y1, X1, X5, 4)
	KFINISH(Y2, X2, X6, 8)
	KFINISH(Y3, X3, X7, 12)
	ADDQ $16, DI
	LEAQ (SI)(R8*4), SI
	SUBQ $4, R9
	CMPQ R9, $4
	JGE  k4four

	// Two or three rows left: two together, the next two prefetched.
k4two:
	CMPQ R9, $2
	JLT  k4one
	PASSINIT
	MOVQ SI, BX
	LEAQ (SI)(R8*1), R10
	LEAQ (SI)(R8*2), R14

k4twoblock:
	PREFETCHT0 (R14)
	PREFETCHT0 64(R14)
	PREFETCHT0 128(R14)
	PREFETCHT0 192(R14)
	PREFETCHT0 256(R14)
	ADDQ       $288, R14
	SBSTART
	KSTART(BX, 0, Y16, X4)
	KSTART(R10, 32, Y17, X5)
	XLOAD(0)
	KCHUNK(0, BX, 0, Y20, Y24)
	KCHUNK(0, R10, 32, Y21, Y25)
	XLOAD(1)
	KCHUNK(1, BX, 0, Y20, Y24)
	KCHUNK(1, R10, 32, Y21, Y25)
	XLOAD(2)
	KCHUNK(2, BX, 0, Y20, Y24)
	KCHUNK(2, R10, 32, Y21, Y25)
	XLOAD(3)
	KCHUNK(3, BX, 0, Y20, Y24)
	KCHUNK(3, R10, 32, Y21, Y25)
	KEND(Y16, Y20, Y24, Y0)
	KEND(Y17, Y21, Y25, Y1)
	ADDQ $144, BX
	ADDQ $144, R10
	SBNEXT(k4twoblock)

	KFINISH(Y0, X0, X4, 0)
	KFINISH(Y1, X1, X5, 4)
	ADDQ $8, DI
	LEAQ (SI)(R8*2), SI
	SUBQ $2, R9

k4one:
	TESTQ R9, R9
	JZ    k4done
	PASSINIT
	MOVQ  SI, BX

k4oneblock:
	SBSTART
	KSTART(BX, 0, Y16, X4)
	XLOAD(0)
	KCHUNK(0, BX, 0, Y20, Y24)
	XLOAD(1)
	KCHUNK(1, BX, 0, Y20, Y24)
	XLOAD(2)
	KCHUNK(2, BX, 0, Y20, Y24)
	XLOAD(3)
	KCHUNK(3, BX, 0, Y20, Y24)
	KEND(Y16, Y20, Y24, Y0)
	ADDQ $144, BX
	SBNEXT(k4oneblock)

	KFINISH(Y0, X0, X4, 0)

k4done:
	VZEROUPPER
	RET
