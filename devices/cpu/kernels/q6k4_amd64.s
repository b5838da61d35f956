//go:build amd64 && !purego

#include "textflag.h"
#include "common_amd64.h"

// Q6_K rows against four inputs at once (batch4.go's tile), each (row,
// input) in q6_KRows's order to the bit: the same int32 lanes per
// super-block (integer sums, exact in any order), the same d·dx product,
// fused multiply-add and horizontal sum. Each run's 6-bit weights are
// rebuilt once for the four inputs instead of once per input. Needs
// AVX512-BW/VL (the upper sixteen registers); callers check for VNNI, which
// every such CPU has with them.

DATA q6k4nib<>+0(SB)/4, $0x0f0f0f0f
GLOBL q6k4nib<>(SB), RODATA|NOPTR, $4
DATA q6k4hi<>+0(SB)/4, $0x30303030
GLOBL q6k4hi<>(SB), RODATA|NOPTR, $4

// The scale-pair masks are q6k_amd64.s's ·q6kPick.

// RUN4(k, nib, hi, x) finishes run k of a half for the four inputs: nib
// holds its 4-bit parts in the low nibbles of every byte, hi its bit pairs
// in bits 4..5. Input t's activations are at 256t+32k+x in the tile (CX);
// its int32 lanes are Y24+t.
#define RUN4(k, nib, hi, x) \
	VPAND      Y15, nib, nib \
	VPAND      Y14, hi, hi \
	VPOR       hi, nib, nib \
	VPSHUFB    (32*k)(R14), Y5, Y3 \
	VPMADDUBSW (32*k+x)(CX), nib, Y28 \
	VPMADDUBSW (256+32*k+x)(CX), nib, Y29 \
	VPMADDUBSW (512+32*k+x)(CX), nib, Y30 \
	VPMADDUBSW (768+32*k+x)(CX), nib, Y31 \
	VPMADDWD   Y3, Y28, Y28 \
	VPMADDWD   Y3, Y29, Y29 \
	VPMADDWD   Y3, Y30, Y30 \
	VPMADDWD   Y3, Y31, Y31 \
	VPADDD     Y28, Y24, Y24 \
	VPADDD     Y29, Y25, Y25 \
	VPADDD     Y30, Y26, Y26 \
	VPADDD     Y31, Y27, Y27

// HALF4(h) does elements 128h..128h+127, as q6k_amd64.s's HALF.
#define HALF4(h) \
	VPMOVSXBW    (192+8*h)(BX), X5 \
	VINSERTI128  $1, X5, Y5, Y5 \
	VMOVDQU      (64*h)(BX), Y1 \
	VMOVDQU      (64*h+32)(BX), Y2 \
	VMOVDQU      (128+32*h)(BX), Y8 \
	VPSLLW       $4, Y8, Y9 \
	RUN4(0, Y1, Y9, 128*h) \
	VMOVDQU      (64*h)(BX), Y1 \
	VPSRLW       $4, Y1, Y1 \
	VPSLLW       $2, Y8, Y9 \
	VMOVDQU      (64*h+32)(BX), Y4 \
	RUN4(1, Y2, Y9, 128*h) \
	VMOVDQU      Y8, Y9 \
	RUN4(2, Y1, Y9, 128*h) \
	VPSRLW       $4, Y4, Y4 \
	VPSRLW       $2, Y8, Y8 \
	RUN4(3, Y4, Y8, 128*h)

// OFFSET(t, acc) starts input t's int32 lanes at -32·Σ scale·(its per-16
// activation sums), from the super-block's scales in Y6.
#define OFFSET(t, acc) \
	VPMADDWD (1040+32*t)(CX), Y6, Y7 \
	VPSLLD   $5, Y7, Y7 \
	VPXORD   acc, acc, acc \
	VPSUBD   Y7, acc, acc

// SCALE(t, dst) broadcasts d·dx of input t.
#define SCALE(t, dst) \
	VMULSS       (1024+4*t)(CX), X10, X11 \
	VBROADCASTSS X11, dst

// FINISH(t, acc, dacc, f) adds the super-block's lanes of input t.
#define FINISH(acc, dacc, f) \
	VCVTDQ2PS   acc, acc \
	VFMADD231PS dacc, acc, f

// STORE(f, off) writes input t's row sum (f's horizontal sum) at DI+off.
#define STORE(f, off) \
	VMOVAPS f, Y0 \
	HSUM \
	VMOVSS  X0, off

// func q6_KRows4(w *byte, stride, rows int, tile *byte, nb int, y *float32, ystride int)
TEXT ·q6_KRows4(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ y+40(FP), DI
	MOVQ ystride+48(FP), R10
	SHLQ $2, R10
	LEAQ (R10)(R10*2), R11
	VPBROADCASTD q6k4nib<>(SB), Y15
	VPBROADCASTD q6k4hi<>(SB), Y14
	LEAQ         ·q6kPick(SB), R14

row:
	MOVQ   SI, BX
	MOVQ   tile+24(FP), CX
	MOVQ   nb+32(FP), R13
	VPXORD Y16, Y16, Y16
	VPXORD Y17, Y17, Y17
	VPXORD Y18, Y18, Y18
	VPXORD Y19, Y19, Y19

block:
	VPBROADCASTW 208(BX), X10
	VCVTPH2PS    X10, X10
	SCALE(0, Y20)
	SCALE(1, Y21)
	SCALE(2, Y22)
	SCALE(3, Y23)

	VPMOVSXBW 192(BX), Y6
	OFFSET(0, Y24)
	OFFSET(1, Y25)
	OFFSET(2, Y26)
	OFFSET(3, Y27)

	HALF4(0)
	HALF4(1)

	FINISH(Y24, Y20, Y16)
	FINISH(Y25, Y21, Y17)
	FINISH(Y26, Y22, Y18)
	FINISH(Y27, Y23, Y19)

	ADDQ $210, BX
	ADDQ $1168, CX
	DECQ R13
	JNZ  block

	STORE(Y16, (DI))
	STORE(Y17, (DI)(R10*1))
	STORE(Y18, (DI)(R10*2))
	STORE(Y19, (DI)(R11*1))
	ADDQ   $4, DI
	ADDQ   R8, SI
	DECQ   R9
	JNZ    row
	VZEROUPPER
	RET
