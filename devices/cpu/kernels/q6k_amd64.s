//go:build amd64 && !purego

#include "textflag.h"
#include "common_amd64.h"

// Q6_K rows against Q8_K-style activations. Per half super-block (64 bytes of
// low nibbles ql, 32 of high bit pairs qh), each 32-element run k is rebuilt
// as unsigned 6-bit values (nibble | bit pair << 4), multiplied with its
// activations (VPMADDUBSW), weighted by its two 16-element scales (VPMADDWD,
// the scale pair picked by VPSHUFB from the half's eight int16 scales) and
// summed in int32 lanes. The weights' -32 offset is applied once per
// super-block through the activations' per-16 sums. About 80 vector ops per
// 210 bytes: memory bound on two cores.

DATA q6knib<>+0(SB)/4, $0x0f0f0f0f
GLOBL q6knib<>(SB), RODATA|NOPTR, $4
DATA q6khi<>+0(SB)/4, $0x30303030
GLOBL q6khi<>(SB), RODATA|NOPTR, $4

// q6kPick (shared with q6k4_amd64.s): for run k, VPSHUFB masks that fill the low lane with int16 scale
// 2k of the half and the high lane with scale 2k+1.
DATA ·q6kPick+0(SB)/8, $0x0100010001000100
DATA ·q6kPick+8(SB)/8, $0x0100010001000100
DATA ·q6kPick+16(SB)/8, $0x0302030203020302
DATA ·q6kPick+24(SB)/8, $0x0302030203020302
DATA ·q6kPick+32(SB)/8, $0x0504050405040504
DATA ·q6kPick+40(SB)/8, $0x0504050405040504
DATA ·q6kPick+48(SB)/8, $0x0706070607060706
DATA ·q6kPick+56(SB)/8, $0x0706070607060706
DATA ·q6kPick+64(SB)/8, $0x0908090809080908
DATA ·q6kPick+72(SB)/8, $0x0908090809080908
DATA ·q6kPick+80(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ·q6kPick+88(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ·q6kPick+96(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ·q6kPick+104(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ·q6kPick+112(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA ·q6kPick+120(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL ·q6kPick(SB), RODATA|NOPTR, $128

// RUN(k, nib, hi, x) finishes run k of a half: nib holds its 4-bit parts in
// the low nibbles of every byte, hi its bit pairs already in bits 4..5.
// Adds into Y7; uses Y3, Y5 (the half's scales in both lanes) and R14
// (q6kpick).
#define RUN(k, nib, hi, x) \
	VPAND      Y15, nib, nib \
	VPAND      Y14, hi, hi \
	VPOR       hi, nib, nib \
	VPMADDUBSW (32*k+x)(CX), nib, nib \
	VPSHUFB    (32*k)(R14), Y5, Y3 \
	VPMADDWD   Y3, nib, nib \
	VPADDD     nib, Y7, Y7

// HALF(h) does elements 128h..128h+127.
#define HALF(h) \
	VPMOVSXBW    (192+8*h)(BX), X5 \
	VINSERTI128  $1, X5, Y5, Y5 \
	VMOVDQU      (64*h)(BX), Y1 \
	VMOVDQU      (64*h+32)(BX), Y2 \
	VMOVDQU      (128+32*h)(BX), Y8 \
	VPSLLW       $4, Y8, Y9 \
	RUN(0, Y1, Y9, 128*h) \
	VMOVDQU      (64*h)(BX), Y1 \
	VPSRLW       $4, Y1, Y1 \
	VPSLLW       $2, Y8, Y9 \
	VMOVDQU      (64*h+32)(BX), Y4 \
	RUN(1, Y2, Y9, 128*h) \
	VMOVDQU      Y8, Y9 \
	RUN(2, Y1, Y9, 128*h) \
	VPSRLW       $4, Y4, Y4 \
	VPSRLW       $2, Y8, Y8 \
	RUN(3, Y4, Y8, 128*h)

// func q6_KRows(w *byte, stride, rows int, xq *int8, xd *float32, bs *int16, nb int, y *float32)
TEXT ·q6_KRows(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ y+56(FP), DI
	VPBROADCASTD q6knib<>(SB), Y15
	VPBROADCASTD q6khi<>(SB), Y14
	LEAQ         ·q6kPick(SB), R14

row:
	MOVQ   SI, BX
	MOVQ   xq+24(FP), CX
	MOVQ   xd+32(FP), DX
	MOVQ   bs+40(FP), R15
	MOVQ   nb+48(FP), R13
	VXORPS Y0, Y0, Y0

block:
	// Software prefetch 4 KiB ahead, as q8_0Rows (q32_amd64.s).
	PREFETCHT0 4096(BX)
	PREFETCHT0 4160(BX)
	PREFETCHT0 4224(BX)
	PREFETCHT0 4288(BX)
	// d*dx broadcast in Y10.
	VPBROADCASTW 208(BX), X10
	VCVTPH2PS    X10, X10
	VMULSS       (DX), X10, X10
	VBROADCASTSS X10, Y10

	// Start the int32 sum at -32·Σ scale·(per-16 activation sum).
	VPMOVSXBW 192(BX), Y6
	VPMADDWD  (R15), Y6, Y6
	VPSLLD    $5, Y6, Y6
	VPXOR     Y7, Y7, Y7
	VPSUBD    Y6, Y7, Y7

	HALF(0)
	HALF(1)

	VCVTDQ2PS   Y7, Y7
	VFMADD231PS Y10, Y7, Y0

	ADDQ $210, BX
	ADDQ $256, CX
	ADDQ $4, DX
	ADDQ $32, R15
	DECQ R13
	JNZ  block

	HSUM
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	DECQ   R9
	JNZ    row
	VZEROUPPER
	RET
