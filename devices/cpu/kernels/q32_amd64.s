//go:build amd64 && !purego

#include "textflag.h"
#include "common_amd64.h"

// Row kernels for the 32-element block types against activations in blocks of
// 32 int8 with an f32 scale and scaled sum each (quantize32). Per block: widen
// the weights to 32 bytes, multiply them with the activations into int16 pairs
// (VPMADDUBSW), sum to 8 int32 (VPMADDWD by ones), convert, and multiply-add
// by d_w*d_x into 8 f32 lanes. VPMADDUBSW wants one unsigned operand: signed
// weights (Q8_0, Q5_0) move their signs onto the activations with VPSIGNB;
// Q4_0 subtracts its 8 first and is then signed; the offset weights (Q4_1's
// and Q5_1's m) stay unsigned and their offset meets the activations through
// the block sums. 8 to 15 vector ops per 18..34 weight bytes: Q8_0 is bound
// by memory bandwidth on two cores, the 4- and 5-bit types by these ops
// (about 20 GB/s of weights on two cores).

DATA nibbles<>+0(SB)/4, $0x0f0f0f0f
GLOBL nibbles<>(SB), RODATA|NOPTR, $4
DATA eights<>+0(SB)/4, $0x08080808
GLOBL eights<>(SB), RODATA|NOPTR, $4
DATA ones16<>+0(SB)/4, $0x00010001
GLOBL ones16<>(SB), RODATA|NOPTR, $4

// BLOCKDOT multiplies the 32 signed weight bytes in Y1 by the activations at
// (CX), scales by the f16 at (BX) times the f32 at (DX), and adds into Y0.
// Uses Y2..Y4; Y13 holds int16 ones.
#define BLOCKDOT BLOCKDOTW(BX, Y0)

// BLOCKDOTW is BLOCKDOT for the weights already in Y1, with their f16 scale
// at (R), into ACC.
#define BLOCKDOTW(R, ACC) \
	VMOVDQU      (CX), Y2 \
	VPSIGNB      Y1, Y1, Y3 \
	VPSIGNB      Y1, Y2, Y2 \
	VPMADDUBSW   Y2, Y3, Y3 \
	VPMADDWD     Y13, Y3, Y3 \
	VCVTDQ2PS    Y3, Y3 \
	VCVTPH2PS    (R), X4 \
	VMULSS       (DX), X4, X4 \
	VBROADCASTSS X4, Y4 \
	VFMADD231PS  Y4, Y3, ACC

// BLOCKDOTR is BLOCKDOTW for the Q8_0 block at (R): its 32 weight bytes at
// 2(R) loaded first.
#define BLOCKDOTR(R, ACC) \
	VMOVDQU 2(R), Y1 \
	BLOCKDOTW(R, ACC)

// Q4_0 goes block by block as ggml_vec_dot_q4_0_q8_0 does, so that the sum
// is llama.cpp's to the bit: nibbles minus 8 as signed bytes, then BLOCKDOT.

// Function bodies as macros sit before the first TEXT, where go vet's
// frame checks do not take their argument names for another function's.
// Q8PF prefetches 4 KiB ahead of R; NOPF8 is q8_0Rows4NP's nothing.
#define Q8PF(R) PREFETCHT0 4096(R)
#define NOPF8(R)

// Q8ROWS4 is q8_0Rows4's body, PF(R) its prefetch of the row at R.
#define Q8ROWS4(PF) \
	MOVQ w+0(FP), SI \
	MOVQ stride+8(FP), R8 \
	MOVQ quads+24(FP), R9 \
	MOVQ xq+32(FP), R10 \
	MOVQ xd+40(FP), R11 \
	MOVQ nb+48(FP), R12 \
	MOVQ y+56(FP), DI \
	VPBROADCASTD ones16<>(SB), Y13 \
q80quad: \
	MOVQ   SI, BX \
	MOVQ   gap+16(FP), R14 \
	ADDQ   SI, R14 \
	MOVQ   gap+16(FP), R15 \
	ADDQ   R14, R15 \
	MOVQ   gap+16(FP), AX \
	ADDQ   R15, AX \
	MOVQ   R10, CX \
	MOVQ   R11, DX \
	MOVQ   R12, R13 \
	VXORPS Y5, Y5, Y5 \
	VXORPS Y6, Y6, Y6 \
	VXORPS Y7, Y7, Y7 \
	VXORPS Y8, Y8, Y8 \
q80qblock: \
	PF(BX) \
	PF(R14) \
	PF(R15) \
	PF(AX) \
	BLOCKDOTR(BX, Y5) \
	BLOCKDOTR(R14, Y6) \
	BLOCKDOTR(R15, Y7) \
	BLOCKDOTR(AX, Y8) \
	ADDQ    $34, BX \
	ADDQ    $34, R14 \
	ADDQ    $34, R15 \
	ADDQ    $34, AX \
	ADDQ    $32, CX \
	ADDQ    $4, DX \
	DECQ    R13 \
	JNZ     q80qblock \
	MOVQ ygap+64(FP), R13 \
	STORESUM(Y5, 0) \
	ADDQ R13, DI \
	STORESUM(Y6, 0) \
	ADDQ R13, DI \
	STORESUM(Y7, 0) \
	ADDQ R13, DI \
	STORESUM(Y8, 0) \
	SUBQ R13, DI \
	SUBQ R13, DI \
	SUBQ R13, DI \
	ADDQ $4, DI \
	ADDQ R8, SI \
	DECQ R9 \
	JNZ  q80quad \
	VZEROUPPER \
	RET

// func q4_0Rows(w *byte, stride, rows int, xq *int8, xd *float32, xs *float32, nb int, y *float32)
TEXT ·q4_0Rows(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ xq+24(FP), R10
	MOVQ xd+32(FP), R11
	MOVQ nb+48(FP), R12
	MOVQ y+56(FP), DI
	VPBROADCASTD nibbles<>(SB), Y15
	VPBROADCASTD eights<>(SB), Y14
	VPBROADCASTD ones16<>(SB), Y13

q40row:
	MOVQ   SI, BX
	MOVQ   R10, CX
	MOVQ   R11, DX
	MOVQ   R12, R13
	VXORPS Y0, Y0, Y0

q40block:
	VMOVDQU     2(BX), X1
	VPSRLW      $4, X1, X2
	VINSERTI128 $1, X2, Y1, Y1
	VPAND       Y15, Y1, Y1
	VPSUBB      Y14, Y1, Y1
	BLOCKDOT
	ADDQ        $18, BX
	ADDQ        $32, CX
	ADDQ        $4, DX
	DECQ        R13
	JNZ         q40block

	HSUM
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	DECQ   R9
	JNZ    q40row
	VZEROUPPER
	RET

// func q8_0Rows(w *byte, stride, rows int, xq *int8, xd *float32, nb int, y *float32)
TEXT ·q8_0Rows(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ xq+24(FP), R10
	MOVQ xd+32(FP), R11
	MOVQ nb+40(FP), R12
	MOVQ y+48(FP), DI
	VPBROADCASTD ones16<>(SB), Y13

q80row:
	MOVQ   SI, BX
	MOVQ   R10, CX
	MOVQ   R11, DX
	MOVQ   R12, R13
	VXORPS Y0, Y0, Y0

q80block:
	// Software prefetch 4 KiB ahead: on the 16-core Xeon host the hardware
	// prefetchers alone left decode at 31 tok/s on 8 threads, 43-54 with it.
	PREFETCHT0 4096(BX)
	BLOCKDOTR(BX, Y0)
	ADDQ    $34, BX
	ADDQ    $32, CX
	ADDQ    $4, DX
	DECQ    R13
	JNZ     q80block

	HSUM
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	DECQ   R9
	JNZ    q80row
	VZEROUPPER
	RET

DATA sixteens<>+0(SB)/4, $0x10101010
GLOBL sixteens<>(SB), RODATA|NOPTR, $4
DATA highs<>+0(SB)/4, $0xf0f0f0f0
GLOBL highs<>(SB), RODATA|NOPTR, $4

// bitbytes and bitmask spread a 32-bit little-endian word over 32 bytes,
// byte i keeping bit i: VPSHUFB copies byte i/8 of the word to byte i, then
// each byte is tested against its own bit.
DATA bitbytes<>+0(SB)/8, $0x0000000000000000
DATA bitbytes<>+8(SB)/8, $0x0101010101010101
DATA bitbytes<>+16(SB)/8, $0x0202020202020202
DATA bitbytes<>+24(SB)/8, $0x0303030303030303
GLOBL bitbytes<>(SB), RODATA|NOPTR, $32
DATA bitmask<>+0(SB)/8, $0x8040201008040201
GLOBL bitmask<>(SB), RODATA|NOPTR, $8

// FIFTHBITS sets Y5 to 0xff in byte i where bit i of the u32 at off(BX) is
// set, 0 elsewhere. Needs Y11 = bitbytes, Y12 = bitmask.
#define FIFTHBITS(off) \
	VPBROADCASTD off(BX), Y5 \
	VPSHUFB      Y11, Y5, Y5 \
	VPAND        Y12, Y5, Y5 \
	VPCMPEQB     Y12, Y5, Y5

// NIBBLES(off) sets Y1 to the 32 nibbles of the 16 bytes at off(BX): low
// nibbles in bytes 0..15, high nibbles in bytes 16..31. Needs Y15 = 0x0f.
#define NIBBLES(off) \
	VMOVDQU     off(BX), X1 \
	VPSRLW      $4, X1, X2 \
	VINSERTI128 $1, X2, Y1, Y1 \
	VPAND       Y15, Y1, Y1

// OFFSETDOT multiplies the 32 unsigned weight bytes in Y1 by the activations
// at (CX) and adds them into Y0 scaled by d·dx, d the f16 at (BX) and dx the
// f32 at (DX); adds m·s into X10's lane 0, m the f16 at 2(BX), s the f32 at
// (R14). For the types with x = q·d + m.
#define OFFSETDOT \
	VPMADDUBSW   (CX), Y1, Y3 \
	VPMADDWD     Y13, Y3, Y3 \
	VCVTDQ2PS    Y3, Y3 \
	VCVTPH2PS    (BX), X4 \
	VMOVSHDUP    X4, X6 \
	VFMADD231SS  (R14), X6, X10 \
	VMULSS       (DX), X4, X4 \
	VBROADCASTSS X4, Y4 \
	VFMADD231PS  Y4, Y3, Y0

// ROWEND adds X10 to the row's sum and stores it, then steps to the next row.
#define ROWEND(label) \
	HSUM \
	VADDSS X10, X0, X0 \
	VMOVSS X0, (DI) \
	ADDQ   $4, DI \
	ADDQ   R8, SI \
	DECQ   R9 \
	JNZ    label

// func q5_0Rows(w *byte, stride, rows int, xq *int8, xd *float32, nb int, y *float32)
TEXT ·q5_0Rows(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ xq+24(FP), R10
	MOVQ xd+32(FP), R11
	MOVQ nb+40(FP), R12
	MOVQ y+48(FP), DI
	VPBROADCASTD nibbles<>(SB), Y15
	VPBROADCASTD highs<>(SB), Y14
	VPBROADCASTD ones16<>(SB), Y13
	VPBROADCASTQ bitmask<>(SB), Y12
	VMOVDQU      bitbytes<>(SB), Y11

q50row:
	MOVQ   SI, BX
	MOVQ   R10, CX
	MOVQ   R11, DX
	MOVQ   R12, R13
	VXORPS Y0, Y0, Y0

q50block:
	// q-16 as int8 is the nibble with 0xf0 ORed in where the fifth bit is 0.
	NIBBLES(6)
	FIFTHBITS(2)
	VPANDN Y14, Y5, Y5
	VPOR   Y5, Y1, Y1
	BLOCKDOT
	ADDQ   $22, BX
	ADDQ   $32, CX
	ADDQ   $4, DX
	DECQ   R13
	JNZ    q50block

	HSUM
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	DECQ   R9
	JNZ    q50row
	VZEROUPPER
	RET

// func q4_1Rows(w *byte, stride, rows int, xq *int8, xd *float32, xs *float32, nb int, y *float32)
TEXT ·q4_1Rows(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ xq+24(FP), R10
	MOVQ xd+32(FP), R11
	MOVQ nb+48(FP), R12
	MOVQ y+56(FP), DI
	VPBROADCASTD nibbles<>(SB), Y15
	VPBROADCASTD ones16<>(SB), Y13

q41row:
	MOVQ   SI, BX
	MOVQ   R10, CX
	MOVQ   R11, DX
	MOVQ   xs+40(FP), R14
	MOVQ   R12, R13
	VXORPS Y0, Y0, Y0
	VXORPS X10, X10, X10

q41block:
	NIBBLES(4)
	OFFSETDOT
	ADDQ $20, BX
	ADDQ $32, CX
	ADDQ $4, DX
	ADDQ $4, R14
	DECQ R13
	JNZ  q41block

	ROWEND(q41row)
	VZEROUPPER
	RET

// func q5_1Rows(w *byte, stride, rows int, xq *int8, xd *float32, xs *float32, nb int, y *float32)
TEXT ·q5_1Rows(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ xq+24(FP), R10
	MOVQ xd+32(FP), R11
	MOVQ nb+48(FP), R12
	MOVQ y+56(FP), DI
	VPBROADCASTD nibbles<>(SB), Y15
	VPBROADCASTD sixteens<>(SB), Y14
	VPBROADCASTD ones16<>(SB), Y13
	VPBROADCASTQ bitmask<>(SB), Y12
	VMOVDQU      bitbytes<>(SB), Y11

q51row:
	MOVQ   SI, BX
	MOVQ   R10, CX
	MOVQ   R11, DX
	MOVQ   xs+40(FP), R14
	MOVQ   R12, R13
	VXORPS Y0, Y0, Y0
	VXORPS X10, X10, X10

q51block:
	NIBBLES(8)
	FIFTHBITS(4)
	VPAND Y14, Y5, Y5
	VPOR  Y5, Y1, Y1
	OFFSETDOT
	ADDQ  $24, BX
	ADDQ  $32, CX
	ADDQ  $4, DX
	ADDQ  $4, R14
	DECQ  R13
	JNZ   q51block

	ROWEND(q51row)
	VZEROUPPER
	RET

// STORESUM reduces ACC's lanes as HSUM does and stores the sum at OFF(DI).
#define STORESUM(ACC, OFF) \
	VMOVAPS ACC, Y0 \
	HSUM \
	VMOVSS  X0, OFF(DI)

// func q8_0Rows4(w *byte, stride, gap, quads int, xq *int8, xd *float32, nb int, y *float32, ygap int)
//
// q8_0Rows for four rows at once, gap bytes (and ygap outputs) apart: rows
// i, i+q, i+2q, i+3q for i < quads, so that each thread streams four
// places of its weights at a time, as llama.cpp's repacked kernels read four
// tiles; each row's arithmetic is q8_0Rows's, to the bit. q8_0Rows4NP is
// the same without software prefetch.
TEXT ·q8_0Rows4(SB), NOSPLIT, $0-72
	Q8ROWS4(Q8PF)

// func q8_0Rows4NP(w *byte, stride, gap, quads int, xq *int8, xd *float32, nb int, y *float32, ygap int)
TEXT ·q8_0Rows4NP(SB), NOSPLIT, $0-72
	Q8ROWS4(NOPF8)
