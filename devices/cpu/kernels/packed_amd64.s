//go:build amd64 && !purego

#include "textflag.h"

// Kernels on Q4_0 weights repacked 16 rows at a time (packed.go): per block
// of 32 columns, the 16 rows' f16 scales (32 bytes), then 4 chunks of 64
// bytes, chunk c holding in lane r the bytes 4c..4c+3 of row r's 16 nibble
// bytes: its low nibbles are columns 4c..4c+3, its high ones 16+4c..19+4c.

DATA packedNib<>+0(SB)/4, $0x0f0f0f0f
GLOBL packedNib<>(SB), RODATA|NOPTR, $4

// CHUNK multiplies chunk c of the block at SI by the activations at DI:
// low nibbles into Z8 against columns 4c.., high ones into Z9 against 16+4c..
#define CHUNK(c) \
	VMOVDQU32     (32+64*c)(SI), Z16 \
	VPANDD        Z30, Z16, Z17 \
	VPSRLD        $4, Z16, Z16 \
	VPANDD        Z30, Z16, Z16 \
	VPDPBUSD.BCST (4*c)(DI), Z17, Z8 \
	VPDPBUSD.BCST (16+4*c)(DI), Z16, Z9

// func gemvQ4_0Packed(w *byte, nb int, xq *int8, xoff *int32, xd *float32, y *float32)
//
// y[r] = Σ_b float(Σ_i u_i·q_i − 8·Σq)·(scale_r·d_b), r < 16: the GEMM's
// arithmetic (gemm.go) for one input, in its order.
TEXT ·gemvQ4_0Packed(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ xq+16(FP), DI
	MOVQ xoff+24(FP), R8
	MOVQ xd+32(FP), R9
	MOVQ y+40(FP), R10
	VPBROADCASTD packedNib<>(SB), Z30
	VPXORD Z0, Z0, Z0
block:
	PREFETCHT0 1152(SI)
	PREFETCHT0 1216(SI)
	PREFETCHT0 1280(SI)
	PREFETCHT0 1344(SI)
	PREFETCHT0 1408(SI)
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	CHUNK(0)
	CHUNK(1)
	CHUNK(2)
	CHUNK(3)
	VPADDD        Z9, Z8, Z8
	VPSUBD.BCST   (R8), Z8, Z8
	VCVTDQ2PS     Z8, Z8
	VCVTPH2PS     (SI), Z20
	VMULPS.BCST   (R9), Z20, Z20
	VFMADD231PS   Z20, Z8, Z0
	ADDQ $288, SI
	ADDQ $32, DI
	ADDQ $4, R8
	ADDQ $4, R9
	DECQ CX
	JNZ  block
	VMOVUPS Z0, (R10)
	VZEROUPPER
	RET

// UNPACK writes chunk c's low nibbles to group c of the panel at DI and its
// high ones to group c+4.
#define UNPACK(c) \
	VMOVDQU32 (32+64*c)(SI), Z16 \
	VPANDD    Z30, Z16, Z17 \
	VMOVDQU32 Z17, (64*c)(DI) \
	VPSRLD    $4, Z16, Z16 \
	VPANDD    Z30, Z16, Z16 \
	VMOVDQU32 Z16, (256+64*c)(DI)

// func unpackQ4_0Packed(w *byte, nb int, q *byte, sc *float32)
// Unpacks a packed panel into the GEMM's panel (gemm.go).
TEXT ·unpackQ4_0Packed(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ sc+24(FP), R9
	VPBROADCASTD packedNib<>(SB), Z30
unp:
	VCVTPH2PS (SI), Z20
	VMOVUPS   Z20, (R9)
	UNPACK(0)
	UNPACK(1)
	UNPACK(2)
	UNPACK(3)
	ADDQ $288, SI
	ADDQ $512, DI
	ADDQ $64, R9
	DECQ CX
	JNZ  unp
	VZEROUPPER
	RET

// Q4_K, packed (packed.go): per super-block the 16 rows' f16 d (0) and
// dmin (32), a byte per row and sub-block of scales (64) and mins (192),
// then 32 chunks of nibbles (320), chunk 8p+c holding in lane r row r's
// bytes 32p+4c..32p+4c+3: low nibbles sub-block 2p's columns 4c.., high
// ones sub-block 2p+1's.

// KCHUNK multiplies chunk 8p+c: low nibbles into Z10 against the
// activations of sub-block 2p, high ones into Z11 against 2p+1's.
#define KCHUNK(p, c) \
	VMOVDQU32     (320+64*(8*(p)+(c)))(SI), Z16 \
	VPANDD        Z30, Z16, Z17 \
	VPSRLD        $4, Z16, Z16 \
	VPANDD        Z30, Z16, Z16 \
	VPDPBUSD.BCST (64*(p)+4*(c))(DI), Z17, Z10 \
	VPDPBUSD.BCST (64*(p)+32+4*(c))(DI), Z16, Z11

// KPAIR runs sub-blocks 2p and 2p+1 and adds sc·Σ into Z8 and m·Σx into
// Z9, in integers.
#define KPAIR(p) \
	VPXORD        Z10, Z10, Z10 \
	VPXORD        Z11, Z11, Z11 \
	KCHUNK(p, 0) \
	KCHUNK(p, 1) \
	KCHUNK(p, 2) \
	KCHUNK(p, 3) \
	KCHUNK(p, 4) \
	KCHUNK(p, 5) \
	KCHUNK(p, 6) \
	KCHUNK(p, 7) \
	VPMOVZXBD     (64+32*(p))(SI), Z12 \
	VPMULLD       Z12, Z10, Z10 \
	VPADDD        Z10, Z8, Z8 \
	VPMOVZXBD     (80+32*(p))(SI), Z13 \
	VPMULLD       Z13, Z11, Z11 \
	VPADDD        Z11, Z8, Z8 \
	VPMOVZXBD     (192+32*(p))(SI), Z12 \
	VPMULLD.BCST  (8*(p))(R8), Z12, Z12 \
	VPADDD        Z12, Z9, Z9 \
	VPMOVZXBD     (208+32*(p))(SI), Z13 \
	VPMULLD.BCST  (8*(p)+4)(R8), Z13, Z13 \
	VPADDD        Z13, Z9, Z9

// func gemvQ4_KPacked(w *byte, nb int, xq *int8, bsum *int32, xd *float32, y *float32)
//
// y[r] = Σ_b d_r·xd_b·Σ_s sc·(Σ q·x) − Σ_b dmin_r·xd_b·Σ_s m·(Σ x), r < 16:
// the integer parts exact, the two float sums kept apart and subtracted at
// the end, as llama.cpp's ggml_gemv_q4_K_8x8_q8_K does (gemvPackedKGo).
TEXT ·gemvQ4_KPacked(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ xq+16(FP), DI
	MOVQ bsum+24(FP), R8
	MOVQ xd+32(FP), R9
	MOVQ y+40(FP), R10
	VPBROADCASTD packedNib<>(SB), Z30
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
kblock:
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	KPAIR(0)
	KPAIR(1)
	KPAIR(2)
	KPAIR(3)
	VCVTDQ2PS     Z8, Z8
	VCVTDQ2PS     Z9, Z9
	VCVTPH2PS     (SI), Z14
	VMULPS.BCST   (R9), Z14, Z14
	VCVTPH2PS     32(SI), Z15
	VMULPS.BCST   (R9), Z15, Z15
	VFMADD231PS   Z14, Z8, Z0
	VFMADD231PS   Z15, Z9, Z1
	ADDQ $2368, SI
	ADDQ $256, DI
	ADDQ $32, R8
	ADDQ $4, R9
	DECQ CX
	JNZ  kblock
	VSUBPS  Z1, Z0, Z0
	VMOVUPS Z0, (R10)
	VZEROUPPER
	RET

// KPAIRF is KPAIR for gemvQ4_KPackedPairs: the pair's integer sums go
// straight into the float sums, Z0 += float(sc·Σ)·Z14 and Z1 +=
// float(m·Σx)·Z15.
#define KPAIRF(p) \
	VPXORD        Z10, Z10, Z10 \
	VPXORD        Z11, Z11, Z11 \
	KCHUNK(p, 0) \
	KCHUNK(p, 1) \
	KCHUNK(p, 2) \
	KCHUNK(p, 3) \
	KCHUNK(p, 4) \
	KCHUNK(p, 5) \
	KCHUNK(p, 6) \
	KCHUNK(p, 7) \
	VPMOVZXBD     (64+32*(p))(SI), Z12 \
	VPMULLD       Z12, Z10, Z10 \
	VPMOVZXBD     (80+32*(p))(SI), Z13 \
	VPMULLD       Z13, Z11, Z11 \
	VPADDD        Z11, Z10, Z8 \
	VPMOVZXBD     (192+32*(p))(SI), Z12 \
	VPMULLD.BCST  (8*(p))(R8), Z12, Z12 \
	VPMOVZXBD     (208+32*(p))(SI), Z13 \
	VPMULLD.BCST  (8*(p)+4)(R8), Z13, Z13 \
	VPADDD        Z13, Z12, Z9 \
	VCVTDQ2PS     Z8, Z8 \
	VCVTDQ2PS     Z9, Z9 \
	VFMADD231PS   Z14, Z8, Z0 \
	VFMADD231PS   Z15, Z9, Z1

// func gemvQ4_KPackedPairs(w *byte, nb int, xq *int8, bsum *int32, xd *float32, y *float32)
//
// gemvQ4_KPacked with the float sums taken every 64 columns (a pair of
// sub-blocks) instead of every super-block: llama.cpp's repacked Q4_K GEMM
// (ggml_gemm_q4_K_8x8_q8_K), which it runs on each group of four inputs of
// a batch, leaving the rest to the gemv.
TEXT ·gemvQ4_KPackedPairs(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ xq+16(FP), DI
	MOVQ bsum+24(FP), R8
	MOVQ xd+32(FP), R9
	MOVQ y+40(FP), R10
	VPBROADCASTD packedNib<>(SB), Z30
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
pblock:
	VCVTPH2PS     (SI), Z14
	VMULPS.BCST   (R9), Z14, Z14
	VCVTPH2PS     32(SI), Z15
	VMULPS.BCST   (R9), Z15, Z15
	KPAIRF(0)
	KPAIRF(1)
	KPAIRF(2)
	KPAIRF(3)
	ADDQ $2368, SI
	ADDQ $256, DI
	ADDQ $32, R8
	ADDQ $4, R9
	DECQ CX
	JNZ  pblock
	VSUBPS  Z1, Z0, Z0
	VMOVUPS Z0, (R10)
	VZEROUPPER
	RET
