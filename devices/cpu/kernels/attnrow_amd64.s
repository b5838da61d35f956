//go:build amd64 && !purego

#include "textflag.h"
#include "common_amd64.h"

// One query row of llama.cpp's one-chunk flash attention over an f16 KV
// cache (attnrow.go), head sizes 64 and 128, in AVX-512: the f16 value
// accumulator lives in registers as f32 values rounded to binary16 after
// every step (VCVTPS2PH and back), the scores are ggml_vec_dot_f16's order
// (four accumulators of 16 lanes, added as it reduces them), and expf is
// glibc's algorithm in scalar double arithmetic (expf.go in package cpu).

DATA attnAbs<>+0(SB)/4, $0x7fffffff
GLOBL attnAbs<>(SB), RODATA|NOPTR, $4
DATA attnC<>+0(SB)/4, $0x42b00000    // 88
DATA attnC<>+4(SB)/4, $0xc2cff1b4    // -0x1.9fe368p6
DATA attnC<>+8(SB)/4, $0x42b17217    // 0x1.62e42ep6
DATA attnC<>+12(SB)/4, $0x7f800000   // +Inf
DATA attnC<>+16(SB)/8, $0x40471547652b82fe // 32/ln 2
DATA attnC<>+24(SB)/8, $0x4338000000000000 // 0x1.8p52
DATA attnC<>+32(SB)/8, $0x3ebc6af84b912394 // expC0 = 0x1.c6af84b912394p-5 / 32^3
DATA attnC<>+40(SB)/8, $0x3f2ebfce50fac4f3 // expC1 = 0x1.ebfce50fac4f3p-3 / 32^2
DATA attnC<>+48(SB)/8, $0x3f962e42ff0c52d6 // expC2 = 0x1.62e42ff0c52d6p-1 / 32
DATA attnC<>+56(SB)/8, $0x3ff0000000000000 // 1
GLOBL attnC<>(SB), RODATA|NOPTR, $64

// EXPF sets X0 = expf(X0) (f32), glibc's result, using X1-X7, AX, BX and
// R12 (the 2^(i/32) table). x ≤ 0 here always (a score minus the running
// maximum), so only the underflow and NaN cases leave the main path.
#define EXPF(lmain, ldone) \
	VANDPS       attnAbs<>(SB), X0, X1 \
	VUCOMISS     attnC<>+0(SB), X1 \
	JCS          lmain \
	JPS          ldone \
	VUCOMISS     attnC<>+4(SB), X0 \
	JCC          lmain \
	VXORPS       X0, X0, X0 \
	JMP          ldone \
lmain: \
	VCVTSS2SD    X0, X0, X1 \
	VMULSD       attnC<>+16(SB), X1, X2 \
	VADDSD       attnC<>+24(SB), X2, X3 \
	VMOVQ        X3, AX \
	VSUBSD       attnC<>+24(SB), X3, X3 \
	VSUBSD       X3, X2, X2 \
	MOVQ         AX, BX \
	ANDQ         $31, BX \
	SHLQ         $47, AX \
	ADDQ         (R12)(BX*8), AX \
	VMOVQ        AX, X4 \
	VMOVSD       attnC<>+32(SB), X5 \
	VFMADD213SD  attnC<>+40(SB), X2, X5 \
	VMOVSD       attnC<>+48(SB), X6 \
	VFMADD213SD  attnC<>+56(SB), X2, X6 \
	VMULSD       X2, X2, X7 \
	VFMADD231SD  X7, X5, X6 \
	VMULSD       X4, X6, X6 \
	VCVTSD2SS    X6, X6, X0 \
ldone:

// ROUND16(r) rounds the f32 lanes of r to binary16 and back.
#define ROUND16(r, t) \
	VCVTPS2PH $0, r, t \
	VCVTPH2PS t, r

// DOT64(k) adds the products of the 64 f16 keys at k with q's 64 values at
// DI (offset o) into Z8-Z11.
#define DOT64(k, o) \
	VCVTPH2PS   (k), Z12 \
	VCVTPH2PS   32(k), Z13 \
	VCVTPH2PS   64(k), Z14 \
	VCVTPH2PS   96(k), Z15 \
	VFMADD231PS (o)(DI), Z12, Z8 \
	VFMADD231PS (o+64)(DI), Z13, Z9 \
	VFMADD231PS (o+128)(DI), Z14, Z10 \
	VFMADD231PS (o+192)(DI), Z15, Z11

// REDUCE leaves the sum of Z8-Z11 in X0 as ggml_vec_dot_f16 reduces its
// four accumulators: (a0+a2) + (a1+a3), then 16 lanes to one.
#define REDUCE \
	VADDPS        Z10, Z8, Z8 \
	VADDPS        Z11, Z9, Z9 \
	VADDPS        Z9, Z8, Z0 \
	VEXTRACTF32X8 $1, Z0, Y1 \
	VADDPS        Y1, Y0, Y0 \
	HSUM

// MAD64(v, a0..a3) sets a = f16(a + v·Z30) for the 64 f16 values at v.
#define MAD64(v, o, a0, a1, a2, a3) \
	VCVTPH2PS   (o)(v), Z12 \
	VCVTPH2PS   (o+32)(v), Z13 \
	VCVTPH2PS   (o+64)(v), Z14 \
	VCVTPH2PS   (o+96)(v), Z15 \
	VFMADD231PS Z30, Z12, a0 \
	VFMADD231PS Z30, Z13, a1 \
	VFMADD231PS Z30, Z14, a2 \
	VFMADD231PS Z30, Z15, a3 \
	ROUND16(a0, Y12) \
	ROUND16(a1, Y13) \
	ROUND16(a2, Y14) \
	ROUND16(a3, Y15)

// SCALE64(a0..a3) sets a = f16(a·Z30).
#define SCALE64(a0, a1, a2, a3) \
	VMULPS   Z30, a0, a0 \
	VMULPS   Z30, a1, a1 \
	VMULPS   Z30, a2, a2 \
	VMULPS   Z30, a3, a3 \
	ROUND16(a0, Y12) \
	ROUND16(a1, Y13) \
	ROUND16(a2, Y14) \
	ROUND16(a3, Y15)

// The state at R9: M, S (f32), then the accumulator's hd f32 values.
// Registers: SI keys, DX values (both advanced by R8 bytes per key), CX
// keys left, DI q, X28 M, X29 S, X31 scale, R12 the exp table.

// STEP(hd, label) runs one key: its score s, then the online softmax.
#define STEP(DOTS, SCALES, MADS, lless, lnext, e1m, e1d, e2m, e2d) \
	VXORPS  Z8, Z8, Z8 \
	VXORPS  Z9, Z9, Z9 \
	VXORPS  Z10, Z10, Z10 \
	VXORPS  Z11, Z11, Z11 \
	DOTS \
	REDUCE \
	VMULSS  X31, X0, X0 \
	VUCOMISS X28, X0 \
	JLS     lless \
	VSUBSS  X0, X28, X1 \
	VMOVAPS X0, X28 \
	VMOVAPS X1, X0 \
	EXPF(e1m, e1d) \
	VBROADCASTSS X0, Z30 \
	SCALES \
	VFMADD213SS attnOne<>(SB), X0, X29 \
	VBROADCASTSS attnOne<>(SB), Z30 \
	MADS \
	JMP     lnext \
lless: \
	VSUBSS  X28, X0, X0 \
	EXPF(e2m, e2d) \
	VADDSS  X0, X29, X29 \
	VBROADCASTSS X0, Z30 \
	MADS \
lnext:

DATA attnOne<>+0(SB)/4, $0x3f800000
GLOBL attnOne<>(SB), RODATA|NOPTR, $4

// ARGS loads the kernels' common arguments: q into DI, the keys into SI,
// the values into DX, the row stride in bytes into R8, the key count into
// CX, the scale into X31, the state into R9 and the exp table into R12.
#define ARGS \
	MOVQ q+0(FP), DI \
	MOVQ k+8(FP), SI \
	MOVQ v+16(FP), DX \
	MOVQ stride+24(FP), R8 \
	SHLQ $1, R8 \
	MOVQ n+32(FP), CX \
	VMOVSS scale+40(FP), X31 \
	MOVQ st+48(FP), R9 \
	MOVQ tab+56(FP), R12

// LOADACC and STOREACC move 64 accumulator values at off+0..255(R9).
#define LOADACC(off, a0, a1, a2, a3) \
	VMOVUPS off(R9), a0 \
	VMOVUPS (off+64)(R9), a1 \
	VMOVUPS (off+128)(R9), a2 \
	VMOVUPS (off+192)(R9), a3

#define STOREACC(off, a0, a1, a2, a3) \
	VMOVUPS a0, off(R9) \
	VMOVUPS a1, (off+64)(R9) \
	VMOVUPS a2, (off+128)(R9) \
	VMOVUPS a3, (off+192)(R9)

// LOADSTATE and STORESTATE move one head's state at off(R9): M, S and the
// first 64 accumulator values.
#define LOADSTATE(off, M, S, a0, a1, a2, a3) \
	VMOVSS off(R9), M \
	VMOVSS (off+4)(R9), S \
	LOADACC(off+8, a0, a1, a2, a3)

#define STORESTATE(off, M, S, a0, a1, a2, a3) \
	VMOVSS M, off(R9) \
	VMOVSS S, (off+4)(R9) \
	STOREACC(off+8, a0, a1, a2, a3)

// func attnRow64(q *float32, k, v *uint16, stride, n int, scale float32, st *float32, tab *uint64)
TEXT ·attnRow64(SB), NOSPLIT, $0-64
	ARGS
	LOADSTATE(0, X28, X29, Z16, Z17, Z18, Z19)
	TESTQ CX, CX
	JZ    r64end
r64key:
	STEP(DOT64(SI, 0), SCALE64(Z16, Z17, Z18, Z19), MAD64(DX, 0, Z16, Z17, Z18, Z19), r64less, r64next, r64e1m, r64e1d, r64e2m, r64e2d)
	ADDQ R8, SI
	ADDQ R8, DX
	DECQ CX
	JNZ  r64key
r64end:
	STORESTATE(0, X28, X29, Z16, Z17, Z18, Z19)
	VZEROUPPER
	RET

// func attnRow128(q *float32, k, v *uint16, stride, n int, scale float32, st *float32, tab *uint64)
TEXT ·attnRow128(SB), NOSPLIT, $0-64
	ARGS
	LOADSTATE(0, X28, X29, Z16, Z17, Z18, Z19)
	LOADACC(264, Z20, Z21, Z22, Z23)
	TESTQ CX, CX
	JZ    r128end
	LEAQ  128(SI), R10
	LEAQ  128(DX), R11
r128key:
	STEP(DOT64(SI, 0) DOT64(R10, 256), SCALE64(Z16, Z17, Z18, Z19) SCALE64(Z20, Z21, Z22, Z23), MAD64(DX, 0, Z16, Z17, Z18, Z19) MAD64(R11, 0, Z20, Z21, Z22, Z23), r128less, r128next, r128e1m, r128e1d, r128e2m, r128e2d)
	ADDQ R8, SI
	ADDQ R8, DX
	ADDQ R8, R10
	ADDQ R8, R11
	DECQ CX
	JNZ  r128key
r128end:
	STORESTATE(0, X28, X29, Z16, Z17, Z18, Z19)
	STOREACC(264, Z20, Z21, Z22, Z23)
	VZEROUPPER
	RET

// The two-head kernel: two query heads of one KV head (grouped-query
// attention) over the same keys and values, each head's arithmetic
// attnRow64's to the bit. The keys and values are widened
// once for both, and the two heads' dependency chains (the accumulator's
// rounding after every step) interleave.
//
// Registers: Z8-Z11 dot sums, then the key's values widened; Z12-Z15 the
// key widened, then rounding temporaries; Z16-Z19 head A's accumulator,
// Z20-Z23 head B's; X24/X25 the two scores; X28/X29 head A's M and S,
// X26/X27 head B's; Z30 the broadcast weight; X31 the scale.

// DOTK sums the products of the widened key in Z12-Z15 with the 64 q
// values at o(DI) into Z8-Z11 (from zero) and reduces them into X0.
#define DOTK(o) \
	VMULPS   (o)(DI), Z12, Z8 \
	VMULPS   (o+64)(DI), Z13, Z9 \
	VMULPS   (o+128)(DI), Z14, Z10 \
	VMULPS   (o+192)(DI), Z15, Z11 \
	REDUCE

// MADV(a0..a3) sets a = f16(a + V·Z30), V widened in Z8-Z11.
#define MADV(a0, a1, a2, a3) \
	VFMADD231PS Z30, Z8, a0 \
	VFMADD231PS Z30, Z9, a1 \
	VFMADD231PS Z30, Z10, a2 \
	VFMADD231PS Z30, Z11, a3 \
	ROUND16(a0, Y12) \
	ROUND16(a1, Y13) \
	ROUND16(a2, Y14) \
	ROUND16(a3, Y15)

// SOFT(score, M, S, a0..a3, labels) runs one head's online softmax step
// for its score, with the widened values in Z8-Z11.
#define SOFT(score, M, S, a0, a1, a2, a3, lless, lnext, e1m, e1d, e2m, e2d) \
	VMOVAPS  score, X0 \
	VUCOMISS M, X0 \
	JLS      lless \
	VSUBSS   X0, M, X1 \
	VMOVAPS  X0, M \
	VMOVAPS  X1, X0 \
	EXPF(e1m, e1d) \
	VBROADCASTSS X0, Z30 \
	SCALE64(a0, a1, a2, a3) \
	VFMADD213SS attnOne<>(SB), X0, S \
	VBROADCASTSS attnOne<>(SB), Z30 \
	MADV(a0, a1, a2, a3) \
	JMP      lnext \
lless: \
	VSUBSS   M, X0, X0 \
	EXPF(e2m, e2d) \
	VADDSS   X0, S, S \
	VBROADCASTSS X0, Z30 \
	MADV(a0, a1, a2, a3) \
lnext:

// func attnRow64x2(q *float32, k, v *uint16, stride, n int, scale float32, st *float32, tab *uint64)
// q holds head A's 64 values then head B's; st head A's state (M, S, 64
// values) then head B's.
TEXT ·attnRow64x2(SB), NOSPLIT, $0-64
	ARGS
	LOADSTATE(0, X28, X29, Z16, Z17, Z18, Z19)
	LOADSTATE(264, X26, X27, Z20, Z21, Z22, Z23)
	TESTQ CX, CX
	JZ    x2end
x2key:
	VCVTPH2PS (SI), Z12
	VCVTPH2PS 32(SI), Z13
	VCVTPH2PS 64(SI), Z14
	VCVTPH2PS 96(SI), Z15
	DOTK(0)
	VMULSS  X31, X0, X24
	DOTK(256)
	VMULSS  X31, X0, X25
	VCVTPH2PS (DX), Z8
	VCVTPH2PS 32(DX), Z9
	VCVTPH2PS 64(DX), Z10
	VCVTPH2PS 96(DX), Z11
	SOFT(X24, X28, X29, Z16, Z17, Z18, Z19, x2aless, x2anext, x2ae1m, x2ae1d, x2ae2m, x2ae2d)
	SOFT(X25, X26, X27, Z20, Z21, Z22, Z23, x2bless, x2bnext, x2be1m, x2be1d, x2be2m, x2be2d)
	ADDQ R8, SI
	ADDQ R8, DX
	DECQ CX
	JNZ  x2key
x2end:
	STORESTATE(0, X28, X29, Z16, Z17, Z18, Z19)
	STORESTATE(264, X26, X27, Z20, Z21, Z22, Z23)
	VZEROUPPER
	RET
