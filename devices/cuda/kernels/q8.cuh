// q8.cuh: the decode mat-vec of the block types on 8-bit activations, as the
// CPU device (devices/cpu/kernels) and llama.cpp compute it: the activation
// row is quantized in shared memory to 8-bit blocks (of 32 for the 32-element
// block types, ggml's Q8_0 / Q8_1; of 256 for the K-quants, ggml's Q8_K),
// each weight block's dot product is an exact integer sum made with dp4a
// (four 8-bit products per instruction), and only the per-block scaling is
// floating point, with the CPU's roundings in the CPU's order. The result
// differs from the CPU device's only in the order the per-block terms of a
// row are added. Against decoding weights to f32 this reads 4× fewer
// activation bytes and spends about a fifth of the instructions per weight,
// which is what keeps a batch-1 mat-vec bound by memory rather than by the
// arithmetic of decoding.
#pragma once
#include "quant.cuh"

#define FULL 0xffffffffu
#define NIB 0x0f0f0f0fu

// XQ is an activation row quantized in shared memory: q (cols bytes), then
// per block d (the scale the dot products use), and for blocks of 32 s (the
// Q8_1 sum, for Q4_1 and Q5_1) and sum (Σq, for the offsets of Q4_0 and
// Q5_0); for blocks of 256 bs (Σq of each 16) in place of s and sum.
struct XQ {
	int8_t *q;
	float *d, *s;
	int *sum;
	short *bs;
};

// q holds element e at byte xo(e): 16 bytes of padding after every 256, so
// that the lanes of a warp reading 16-byte pieces 32 or 64 bytes apart (one
// block or sub-block pair each) hit different banks.
__device__ __forceinline__ int xo(int e) { return e + 16 * (e >> 8); }

// xqBytes is the shared memory an XQ of cols takes (stageBytes in
// fuse_cuda.go).
__host__ __device__ constexpr int xqBytes(int cols) { return cols + 16 * ((cols + 255) / 256) + 12 * (cols / 32); }

__device__ __forceinline__ XQ xq_at(uint8_t *p, int cols) {
	XQ x;
	int nb = cols / 32;
	x.q = (int8_t *)p;
	x.d = (float *)(p + cols + 16 * ((cols + 255) / 256));
	x.s = x.d + nb;
	x.sum = (int *)(x.s + nb);
	x.bs = (short *)x.s;
	return x;
}

__device__ __forceinline__ float f16r(float v) { return __half2float(__float2half_rn(v)); }

// quant32_piece quantizes piece c (elements 8c..8c+7, values v) of a row
// into x in blocks of 32 as the CPU's quantize32 does: d = max|v|/127 kept
// as binary16, q = v·(127/max|v|) rounded to nearest even; s is d·Σq
// rounded to binary16 (Q8_1, with q81) or the kept d times Σq. The four
// pieces of a block are four adjacent lanes' (they exchange by shuffles).
__device__ __forceinline__ void quant32_piece(int c, const float *v, XQ x, bool q81) {
	int e = 8 * c;
	float amax = 0;
#pragma unroll
	for (int k = 0; k < 8; k++) amax = fmaxf(amax, fabsf(v[k]));
	amax = fmaxf(amax, __shfl_xor_sync(__activemask(), amax, 1));
	amax = fmaxf(amax, __shfl_xor_sync(__activemask(), amax, 2));
	float id = amax != 0 ? 127.0f / amax : 0.0f;
	uint32_t w[2] = {0, 0};
	int sum = 0;
#pragma unroll
	for (int k = 0; k < 8; k++) {
		int q = __float2int_rn(__fmul_rn(v[k], id));
		w[k >> 2] |= (uint32_t)(q & 0xff) << (8 * (k & 3));
		sum += q;
	}
	*(uint2 *)(x.q + xo(e)) = make_uint2(w[0], w[1]);
	sum += __shfl_xor_sync(__activemask(), sum, 1);
	sum += __shfl_xor_sync(__activemask(), sum, 2);
	if ((c & 3) == 0) {
		int b = c >> 2;
		float d = amax / 127.0f, dr = f16r(d);
		x.d[b] = dr;
		x.s[b] = q81 ? f16r(__fmul_rn(d, (float)sum)) : __fmul_rn(dr, (float)sum);
		x.sum[b] = sum;
	}
}

// q8_group quantizes block k of a row of cols into the XQ at p (xq_at's
// layout, in global memory), one element a lane of a warp (lane l holds
// element 32k + l): the bytes quant32_piece makes for a block of Q4_0 or
// Q8_0 (q81 false), bit for bit, since the largest magnitude (fmaxf from 0)
// and the integer sum do not depend on the order they are taken in. The
// MV_SILU launch of mvwq_q4_0 and mvwq_q8_0 (fused.cu) makes the down
// projection's input so, once for all its blocks.
__device__ __forceinline__ void q8_group(float v, uint8_t *p, int cols, int k) {
	XQ x = xq_at(p, cols);
	int lane = threadIdx.x & 31;
	float amax = fmaxf(0.0f, fabsf(v));
	for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(FULL, amax, o));
	float id = amax != 0 ? 127.0f / amax : 0.0f;
	int q = __float2int_rn(__fmul_rn(v, id));
	x.q[xo(32 * k + lane)] = (int8_t)q;
	int sum = __reduce_add_sync(FULL, q);
	if (lane == 0) {
		float d = amax / 127.0f, dr = f16r(d);
		x.d[k] = dr, x.s[k] = __fmul_rn(dr, (float)sum), x.sum[k] = sum;
	}
}

// quant32 quantizes val(0..cols) into x in blocks of 32: thread t takes
// pieces t, t+256, …, so that a row of 2048 is one pass of a block of 256.
template <class V>
__device__ __forceinline__ void quant32(const V &val, int cols, XQ x, bool q81) {
	for (int c = threadIdx.x; c < cols / 8; c += blockDim.x) { // cols/8 is a multiple of 4: whole warps' groups stay together
		float v[8];
#pragma unroll
		for (int k = 0; k < 8; k++) v[k] = val(8 * c + k);
		quant32_piece(c, v, x, q81);
	}
}

// quant256_piece quantizes piece c (elements 8c..8c+7, values v) of a row
// into x in blocks of 256 as the CPU's quantize256 (ggml's
// quantize_row_q8_K) does: the value of largest magnitude (the first, on a
// tie) sets iscale = -127/max, q = min(127, iscale·v rounded to nearest
// even), d = 1/iscale, and bs holds the sum of every 16 q. A block's 32
// pieces are one warp's lanes, lane l holding piece 32b + l.
__device__ __forceinline__ void quant256_piece(int c, const float *v, XQ x) {
	int lane = threadIdx.x & 31, b = c >> 5, e = 8 * c;
	float amax = 0, mx = 0;
#pragma unroll
	for (int k = 0; k < 8; k++) {
		float a = fabsf(v[k]);
		if (a > amax) amax = a, mx = v[k];
	}
	// The warp's largest magnitude by one integer max (a non-negative
	// float's bits order as it does), its first lane (the first on a tie)
	// by a ballot, and that lane's signed value by one shuffle. Measured on
	// an H200 against a five-step butterfly of three shuffles
	// (TestDecodeMatVec, µs): Q4_K 12288×4096 norm 12.99 → 12.77, Q6_K
	// 4096×11008 19.40 → 18.87, the other shapes within 1%.
	unsigned bits = __float_as_uint(amax), top = __reduce_max_sync(FULL, bits);
	mx = __shfl_sync(FULL, mx, __ffs(__ballot_sync(FULL, bits == top)) - 1);
	amax = __uint_as_float(top);
	float iscale = amax != 0 ? -127.0f / mx : 0.0f;
	uint32_t w[2] = {0, 0};
	int s = 0;
#pragma unroll
	for (int k = 0; k < 8; k++) {
		int q = amax != 0 ? min(127, __float2int_rn(__fmul_rn(iscale, v[k]))) : 0;
		w[k >> 2] |= (uint32_t)(q & 0xff) << (8 * (k & 3));
		s += q;
	}
	*(uint2 *)(x.q + xo(e)) = make_uint2(w[0], w[1]);
	s += __shfl_xor_sync(FULL, s, 1);
	if ((lane & 1) == 0) x.bs[16 * b + (lane >> 1)] = (short)s;
	if (lane == 0) x.d[b] = amax != 0 ? 1.0f / iscale : 0.0f;
}

// quant256 quantizes val(0..cols) into x in blocks of 256, one warp a
// block: thread t takes pieces t, t+256, … as quant32 does.
template <class V>
__device__ __forceinline__ void quant256(const V &val, int cols, XQ x) {
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
	for (int b = warp; b < cols / 256; b += nw) {
		int c = 32 * b + lane;
		float v[8];
#pragma unroll
		for (int k = 0; k < 8; k++) v[k] = val(8 * c + k);
		quant256_piece(c, v, x);
	}
}

__device__ __forceinline__ uint32_t w16x2(const uint8_t *p) { return u16(p) | u16(p + 2) << 16; }

// words16 reads the N 32-bit words at p, which is only 2-byte aligned (Q3_K's
// 110-byte blocks), with N+1 aligned 4-byte loads and funnel shifts instead
// of 2N 2-byte loads (measured on Q6_K's file blocks: mat-vec 760 -> 836
// GB/s; the device now regroups Q4_0's, Q8_0's and Q6_K's rows, grp_q and
// q6_grp). It may read up to 2 bytes past p+4N, within the 16 bytes of
// slack every weight is allocated with (device_cuda.go).
template <int N>
__device__ __forceinline__ void words16(const uint8_t *p, uint32_t *w) {
	const uint32_t *a = (const uint32_t *)((uintptr_t)p & ~(uintptr_t)3);
	int sh = ((int)(uintptr_t)p & 2) * 8;
	uint32_t r[N + 1];
#pragma unroll
	for (int i = 0; i <= N; i++) r[i] = a[i];
#pragma unroll
	for (int i = 0; i < N; i++) w[i] = __funnelshift_r(r[i], r[i + 1], sh);
}
__device__ __forceinline__ int xint(const XQ &x, int e) { return *(const int *)(x.q + xo(e)); }
__device__ __forceinline__ int4 xint4(const XQ &x, int e) { return *(const int4 *)(x.q + xo(e)); }
// MV_XBASE takes a lane's activations of one 256-group from one pointer
// (xo once, then constant offsets) instead of xo for every load: the
// compiler cannot see that the offsets stay in the group: about 3
// instructions a load fewer (sm_90 SASS of the Q4_K trip, 4 loads).
#ifndef MV_XBASE
#define MV_XBASE 1
#endif
__device__ __forceinline__ int4 xat4(const int8_t *p, int o) { return *(const int4 *)(p + o); }
// dp4a_us is dp4a with a's bytes unsigned and b's signed (PTX
// dp4a.u32.s32): Q4_K's high nibbles in place (16 times their value,
// Q4K_U8HI), so that they need no shift.
__device__ __forceinline__ int dp4a_us(uint32_t a, int b, int c) {
	int d;
	asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
	return d;
}
// Q4K_U8HI sums Q4_K's high nibbles as bytes n·16 (w & 0xf0f0f0f0, no
// shift), then divides the exact sum by 16. Measured on an H200
// (TestDecodeMatVec, µs, Q4_K 4096×4096 / 12288×4096 / 11008×4096 gate+up,
// both with Q4K_WIDE 0): neither 6.76 / 13.35 / 18.36, with MV_XBASE and
// Q4K_U8HI 6.67 / 12.97 / 18.06.
#ifndef Q4K_U8HI
#define Q4K_U8HI 1
#endif
// bit4 spreads bits 0..3 of n to bit 4 of bytes 0..3.
__device__ __forceinline__ uint32_t bit4(uint32_t n) { return ((n & 15) * 0x00204081u & 0x01010101u) << 4; }
__device__ __forceinline__ float fmd(float a, float b, float c) { return __fmul_rn(__fmul_rn(a, b), c); }

// MV_EVICT: the weight loads of the decode and batched mat-vecs (D8's part
// and fin) are evict-first in L2 (an L2::evict_first access policy,
// createpolicy, on ld.global.L2::cache_hint; L1 as for a plain load). A
// decode step reads its weights once, ten times L2 (TinyLlama Q4_0: 606 MiB
// through 60 MiB), and with plain loads they pushed out what every step
// reads again: the norm weights (read after the input's sum), the KV cache,
// the residual row. So each launch began with a trip to DRAM where L2 now
// serves it. Measured on an H200, tg128 tok/s, two rounds alternated: plain
// → streaming loads (ld.global.cs, evict-first in L1 and L2; thirtieth
// session) TinyLlama Q4_0 1590 → 1664, Q4_K_M 1477 → 1541, Q8_0 1214 → 1329,
// Llama-7B Q4_K_M 528.8 → 536.2; streaming → this policy (thirty-first)
// 1660 → 1662, 1536 → 1541, 1325 → 1326, 534.6 → 540.0, where asking L2 for
// 256-byte runs (ld.global.cs.L2::256B) gave 1655, 1531, 1318, 521.6 and
// 128-byte runs 1658, 1541, 1326, 535.2.
#ifndef MV_EVICT
#define MV_EVICT 1
#endif
// streams(T): the types whose loads stream, those measured. Not Q5_K (its
// MV_ROPE kernels went from 62 to 102 registers with ld.global.cs) nor the
// smaller types.
__host__ __device__ constexpr bool streams(int T) { return MV_EVICT && (T == T_Q4_0 || T == T_Q8_0 || T == T_Q4_K || T == T_Q6_K); }
// l2ef is the L2::evict_first policy for the whole of an access.
__device__ __forceinline__ uint64_t l2ef() {
	uint64_t p;
	asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
	return p;
}
__device__ __forceinline__ uint4 sld4(const void *a) {
	uint4 v;
	asm("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(a), "l"(l2ef()));
	return v;
}
__device__ __forceinline__ uint2 sld2(const void *a) {
	uint2 v;
	asm("ld.global.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;" : "=r"(v.x), "=r"(v.y) : "l"(a), "l"(l2ef()));
	return v;
}
__device__ __forceinline__ uint32_t sld32(const void *a) {
	uint32_t v;
	asm("ld.global.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(v) : "l"(a), "l"(l2ef()));
	return v;
}
__device__ __forceinline__ uint32_t sld16(const void *a) {
	unsigned short v;
	asm("ld.global.L2::cache_hint.u16 %0, [%1], %2;" : "=h"(v) : "l"(a), "l"(l2ef()));
	return v;
}
template <int T> __device__ __forceinline__ uint4 wld4(const void *a) { return streams(T) ? sld4(a) : *(const uint4 *)a; }
template <int T> __device__ __forceinline__ uint2 wld2(const void *a) { return streams(T) ? sld2(a) : *(const uint2 *)a; }
template <int T> __device__ __forceinline__ uint32_t wu32(const uint8_t *a) { return streams(T) ? sld32(a) : u32(a); }
template <int T> __device__ __forceinline__ uint32_t wu16(const uint8_t *a) { return streams(T) ? sld16(a) : u16(a); }
// h1 and h2 are the f16 in the low 16 bits of v, and the two in v, as floats.
__device__ __forceinline__ float h1(uint32_t v) { return __half2float(__ushort_as_half((uint16_t)v)); }
__device__ __forceinline__ float2 h2(uint32_t v) { return make_float2(h1(v & 0xffff), h1(v >> 16)); }
template <int T> __device__ __forceinline__ float wf16(const uint8_t *a) { return h1(wu16<T>(a)); }
// wf16x2 is the two f16 at a (4-byte aligned) from one load: a cache-hinted
// load is not merged with its neighbour as a plain one is.
template <int T> __device__ __forceinline__ float2 wf16x2(const uint8_t *a) { return h2(wu32<T>(a)); }

// D8<T> is weight type T on 8-bit activations: block elements, lanes per
// block (TPB), part (lane k's integer dot and offset terms of block b), and
// fin (the block's float term from the block's whole integer sums, as the CPU
// computes it).
template <int T> struct D8 { // not a block type: the f32 path, never called
	static const int block = 0, TPB = 1, bytes = 0;
	static const bool q81 = false, hasOff = false;
	static __device__ __forceinline__ void part(const uint8_t *, int, const XQ &, int, int &dot, int &off, uint32_t &) { dot = 0, off = 0; }
	static __device__ __forceinline__ float fin(const uint8_t *, const XQ &, int, int, int, uint32_t) { return 0; }
};

// Q4_0: each lane takes whole blocks (Q40_TPB 1), or lane k of two takes
// bytes 8k..8k+7: elements 8k.. (low nibbles) and 16+8k.. (high).
// Σ(q-8)x is Σqx - 8Σx, the offset added once per block.
#ifndef Q40_TPB
#define Q40_TPB 1
#endif
// In the file's 18- and 34-byte blocks a lane's 16 quant bytes were read as
// five aligned words shifted into place (words16) or eight 2-byte loads:
// on an H200 (TestDecodeMatVec, µs, 2-byte → words) Q4_0 2560×2048 4.55 →
// 4.20 and 5632×2048 gate+up 8.57 → 8.11; Q8_0 5.56 → 5.19 but 12.04 →
// 13.20. The device's regrouped rows make them one 16-byte load.
// The device's Q4_0 rows are regrouped (quant.cuh's grp_d, grp_q): blk
// (blkAt) is block b's scale and its quants are 16 + 14·(b%8) bytes on,
// 16-byte aligned.
template <> struct D8<T_Q4_0> {
	static const int block = 32, TPB = Q40_TPB, bytes = 18;
	static const bool q81 = false, hasOff = false;
	// Raw: a lane's block loaded ahead (Pre, one lane a block): its quants
	// and scale; part and fin take them from r where it is set.
	struct Raw {
		uint4 q;
		uint32_t d;
	};
	static __device__ __forceinline__ Raw load(const uint8_t *blk, int, int b) {
		static_assert(Q40_TPB == 1, "a Q4_0 block loaded ahead is one lane's");
		return Raw{wld4<T_Q4_0>(blk + 16 + 14 * (b & 7)), wu16<T_Q4_0>(blk)};
	}
	static __device__ __forceinline__ void part(const uint8_t *blk, int k, const XQ &x, int b, int &dot, int &off, uint32_t &hw, const Raw *r = nullptr) {
		const uint8_t *qs = blk + 16 + 14 * (b & 7);
		const int n = 4 / TPB; // words of 4 nibble bytes per lane
		int e = 32 * b + 4 * n * k;
		int xl[4], xh[4];
		if (n == 4) { // a whole block: its activations as two 16-byte loads
#if MV_XBASE
			const int8_t *xp = x.q + xo(e); // a block of 32 never straddles a 256-group
			int4 a = xat4(xp, 0), c = xat4(xp, 16);
#else
			int4 a = xint4(x, e), c = xint4(x, e + 16);
#endif
			xl[0] = a.x, xl[1] = a.y, xl[2] = a.z, xl[3] = a.w, xh[0] = c.x, xh[1] = c.y, xh[2] = c.z, xh[3] = c.w;
		} else {
#pragma unroll
			for (int i = 0; i < n; i++) xl[i] = xint(x, e + 4 * i), xh[i] = xint(x, e + 16 + 4 * i);
		}
		uint32_t qv[4];
		if (n == 4) {
			uint4 v = r ? r->q : wld4<T_Q4_0>(qs);
			qv[0] = v.x, qv[1] = v.y, qv[2] = v.z, qv[3] = v.w;
		} else {
#pragma unroll
			for (int i = 0; i < n; i++) qv[i] = wu32<T_Q4_0>(qs + 4 * (n * k + i));
		}
		dot = 0;
#pragma unroll
		for (int i = 0; i < n; i++) {
			dot = __dp4a((int)(qv[i] & NIB), xl[i], dot);
			dot = __dp4a((int)(qv[i] >> 4 & NIB), xh[i], dot);
		}
		if (k == 0) dot -= 8 * x.sum[b];
		off = 0;
	}
	static __device__ __forceinline__ float fin(const uint8_t *blk, const XQ &x, int b, int dot, int, uint32_t, const Raw *r = nullptr) {
		return fmd(r ? h1(r->d) : wf16<T_Q4_0>(blk), x.d[b], (float)dot);
	}
};

// Q4_1: as Q4_0 without the offset; the minimum m meets the Q8_1 sum.
template <> struct D8<T_Q4_1> {
	static const int block = 32, TPB = 2, bytes = 20;
	static const bool q81 = true, hasOff = false;
	static __device__ __forceinline__ void part(const uint8_t *blk, int k, const XQ &x, int b, int &dot, int &off, uint32_t &hw) {
		uint32_t v0 = wu32<T_Q4_1>(blk + 4 + 8 * k), v1 = wu32<T_Q4_1>(blk + 8 + 8 * k);
		int e = 32 * b + 8 * k;
		dot = __dp4a((int)(v0 & NIB), xint(x, e), 0);
		dot = __dp4a((int)(v1 & NIB), xint(x, e + 4), dot);
		dot = __dp4a((int)(v0 >> 4 & NIB), xint(x, e + 16), dot);
		dot = __dp4a((int)(v1 >> 4 & NIB), xint(x, e + 20), dot);
		off = 0;
	}
	static __device__ __forceinline__ float fin(const uint8_t *blk, const XQ &x, int b, int dot, int, uint32_t) {
		float2 dm = wf16x2<T_Q4_1>(blk);
		return __fadd_rn(fmd(dm.x, x.d[b], (float)dot), __fmul_rn(dm.y, x.s[b]));
	}
};

// Q5_0: nibbles as Q4_0, fifth bits from qh (bit j: element j); Σ(q-16)x.
template <> struct D8<T_Q5_0> {
	static const int block = 32, TPB = 2, bytes = 22;
	static const bool q81 = false, hasOff = false;
	static __device__ __forceinline__ void part(const uint8_t *blk, int k, const XQ &x, int b, int &dot, int &off, uint32_t &hw) {
		uint32_t qh = w16x2(blk + 2) >> 8 * k, v0 = w16x2(blk + 6 + 8 * k), v1 = w16x2(blk + 10 + 8 * k);
		int e = 32 * b + 8 * k;
		dot = __dp4a((int)((v0 & NIB) | bit4(qh)), xint(x, e), 0);
		dot = __dp4a((int)((v1 & NIB) | bit4(qh >> 4)), xint(x, e + 4), dot);
		dot = __dp4a((int)((v0 >> 4 & NIB) | bit4(qh >> 16)), xint(x, e + 16), dot);
		dot = __dp4a((int)((v1 >> 4 & NIB) | bit4(qh >> 20)), xint(x, e + 20), dot);
		if (k == 0) dot -= 16 * x.sum[b];
		off = 0;
	}
	static __device__ __forceinline__ float fin(const uint8_t *blk, const XQ &x, int b, int dot, int, uint32_t) { return fmd(wf16<T_Q5_0>(blk), x.d[b], (float)dot); }
};

// Q5_1: as Q5_0 without the offset, with Q4_1's minimum.
template <> struct D8<T_Q5_1> {
	static const int block = 32, TPB = 2, bytes = 24;
	static const bool q81 = true, hasOff = false;
	static __device__ __forceinline__ void part(const uint8_t *blk, int k, const XQ &x, int b, int &dot, int &off, uint32_t &hw) {
		uint32_t qh = wu32<T_Q5_1>(blk + 4) >> 8 * k, v0 = wu32<T_Q5_1>(blk + 8 + 8 * k), v1 = wu32<T_Q5_1>(blk + 12 + 8 * k);
		int e = 32 * b + 8 * k;
		dot = __dp4a((int)((v0 & NIB) | bit4(qh)), xint(x, e), 0);
		dot = __dp4a((int)((v1 & NIB) | bit4(qh >> 4)), xint(x, e + 4), dot);
		dot = __dp4a((int)((v0 >> 4 & NIB) | bit4(qh >> 16)), xint(x, e + 16), dot);
		dot = __dp4a((int)((v1 >> 4 & NIB) | bit4(qh >> 20)), xint(x, e + 20), dot);
		off = 0;
	}
	static __device__ __forceinline__ float fin(const uint8_t *blk, const XQ &x, int b, int dot, int, uint32_t) {
		float2 dm = wf16x2<T_Q5_1>(blk);
		return __fadd_rn(fmd(dm.x, x.d[b], (float)dot), __fmul_rn(dm.y, x.s[b]));
	}
};

// Q8_0: lane k of TPB takes quants 32k/TPB.. (Q80_TPB: 1, 2 or 4).
#ifndef Q80_TPB
#define Q80_TPB 2
#endif
// The device's Q8_0 rows are regrouped (grp_d, grp_q): blk (blkAt) is
// block b's scale and its quants are 16 + 30·(b%8) bytes on, 16-byte
// aligned, so a lane's 32/TPB quants are whole 16-byte loads (TPB 1, 2)
// or an 8-byte one (4).
template <> struct D8<T_Q8_0> {
	static const int block = 32, TPB = Q80_TPB, bytes = 34;
	static const bool q81 = false, hasOff = false;
	// Raw: as Q4_0's, a lane's 16 quants (two lanes a block) and the scale.
	struct Raw {
		uint4 q;
		uint32_t d;
	};
	static __device__ __forceinline__ Raw load(const uint8_t *blk, int k, int b) {
		static_assert(Q80_TPB == 2, "a Q8_0 block loaded ahead is two lanes' 16-byte pieces");
		return Raw{wld4<T_Q8_0>(blk + 16 + 30 * (b & 7) + 16 * k), wu16<T_Q8_0>(blk)};
	}
	static __device__ __forceinline__ void part(const uint8_t *blk, int k, const XQ &x, int b, int &dot, int &off, uint32_t &hw, const Raw *r = nullptr) {
		const int n = 8 / TPB; // words of 4 quants per lane
		const uint8_t *q = blk + 16 + 30 * (b & 7) + 4 * n * k;
		int e = 32 * b + 4 * n * k;
		int xv[8];
		if (n % 4 == 0) { // 16-byte aligned: e is a multiple of 16
#pragma unroll
			for (int i = 0; i < n; i += 4) {
				int4 a = xint4(x, e + 4 * i);
				xv[i] = a.x, xv[i + 1] = a.y, xv[i + 2] = a.z, xv[i + 3] = a.w;
			}
		} else {
#pragma unroll
			for (int i = 0; i < n; i++) xv[i] = xint(x, e + 4 * i);
		}
		uint32_t qv[8];
		if (n % 4 == 0) {
#pragma unroll
			for (int i = 0; i < n; i += 4) {
				uint4 v = r ? r->q : wld4<T_Q8_0>(q + 4 * i);
				qv[i] = v.x, qv[i + 1] = v.y, qv[i + 2] = v.z, qv[i + 3] = v.w;
			}
		} else {
			uint2 v = wld2<T_Q8_0>(q);
			qv[0] = v.x, qv[1] = v.y;
		}
		dot = 0;
#pragma unroll
		for (int i = 0; i < n; i++) dot = __dp4a((int)qv[i], xv[i], dot);
		off = 0;
	}
	static __device__ __forceinline__ float fin(const uint8_t *blk, const XQ &x, int b, int dot, int, uint32_t, const Raw *r = nullptr) {
		return fmd(r ? h1(r->d) : wf16<T_Q8_0>(blk), x.d[b], (float)dot);
	}
};

// scales4 returns byte n (0..11) of a K-quant's packed scales s0, s1, s2.
__device__ __forceinline__ int scaleByte(uint32_t s0, uint32_t s1, uint32_t s2, int n) {
	uint32_t w = n < 4 ? s0 : n < 8 ? s1 : s2;
	return (w >> 8 * (n & 3)) & 0xff;
}

// scaleMinK4w is scaleMinK4 on the scales held as three words.
__device__ __forceinline__ void scaleMinK4w(int j, uint32_t s0, uint32_t s1, uint32_t s2, int &sc, int &m) {
	if (j < 4) {
		sc = scaleByte(s0, s1, s2, j) & 63, m = scaleByte(s0, s1, s2, j + 4) & 63;
	} else {
		sc = (scaleByte(s0, s1, s2, j + 4) & 15) | (scaleByte(s0, s1, s2, j - 4) >> 6) << 4;
		m = (scaleByte(s0, s1, s2, j + 4) >> 4) | (scaleByte(s0, s1, s2, j) >> 6) << 4;
	}
}

// Q4K_WIDE reads a Q4_K or Q5_K block's header (d, dmin, scales) in one
// 16-byte load and the activations' four sums of 16 in one 8-byte load;
// 0 reads them as 4- and 2-byte words. Measured on an H200
// (TestDecodeMatVec, µs, 1 → 0, one call): 4096×4096 7.36 → 6.76,
// 12288×4096 14.97 → 13.35, 11008×4096 gate+up 20.11 → 18.36.
#ifndef Q4K_WIDE
#define Q4K_WIDE 0
#endif

// Q4_K and Q5_K: lane k takes the NC chunks j = NC·k.. of 32 quant bytes
// (NC = 1 with four lanes a block, 2 with two), each sub-blocks 2j (low
// nibbles of qs[32j..]) and 2j+1 (high nibbles); dot is Σ sc·Σqx and off
// Σ m·Σx (the activations' sums of 16) over them, exact integers whatever
// the lanes' split.
//
// KRaw is a Q4_K lane's chunk and its block's scales loaded ahead (Pre; four
// lanes a block, Q4K_WIDE 0): partK and finK take them from r where it is set.
struct KRaw {
	uint4 a, c;
	uint32_t s0, s1, s2, dm;
};
template <int T, int NC = 1>
__device__ __forceinline__ void partK(const uint8_t *blk, int k, const XQ &x, int b, int &dot, int &off, uint32_t &hw, const KRaw *r = nullptr) {
	const bool five = T == T_Q5_K;
	int p0[NC], p1[NC];
#pragma unroll
	for (int ci = 0; ci < NC; ci++) {
		const int j = NC * k + ci;
		const uint4 *qp = (const uint4 *)(blk + (five ? 48 : 16) + 32 * j);
		uint4 a = r ? r->a : wld4<T>(qp), c = r ? r->c : wld4<T>(qp + 1);
		uint32_t w[8] = {a.x, a.y, a.z, a.w, c.x, c.y, c.z, c.w}, h[8];
		if (five) {
			const uint4 *hp = (const uint4 *)(blk + 16);
			uint4 ha = wld4<T>(hp), hc = wld4<T>(hp + 1);
			h[0] = ha.x, h[1] = ha.y, h[2] = ha.z, h[3] = ha.w, h[4] = hc.x, h[5] = hc.y, h[6] = hc.z, h[7] = hc.w;
		}
		int xs[16];
#if MV_XBASE
		const int8_t *xp = x.q + xo(256 * b) + 64 * j; // the lane's 64 activations, in one 256-group
#else
		const int e = 256 * b + 64 * j;
#endif
#pragma unroll
		for (int i = 0; i < 4; i++) {
#if MV_XBASE
			int4 v = xat4(xp, 16 * i);
#else
			int4 v = xint4(x, e + 16 * i);
#endif
			xs[4 * i] = v.x, xs[4 * i + 1] = v.y, xs[4 * i + 2] = v.z, xs[4 * i + 3] = v.w;
		}
		p0[ci] = 0, p1[ci] = 0;
#pragma unroll
		for (int i = 0; i < 8; i++) {
#if Q4K_U8HI
			if (!five) {
				p0[ci] = __dp4a((int)(w[i] & NIB), xs[i], p0[ci]);
				p1[ci] = dp4a_us(w[i] & ~NIB, xs[8 + i], p1[ci]);
				continue;
			}
#endif
			uint32_t lo = w[i] & NIB, hi = w[i] >> 4 & NIB;
			if (five) {
				lo |= (h[i] >> (2 * j) & 0x01010101u) << 4;
				hi |= (h[i] >> (2 * j + 1) & 0x01010101u) << 4;
			}
			p0[ci] = __dp4a((int)lo, xs[i], p0[ci]);
			p1[ci] = __dp4a((int)hi, xs[8 + i], p1[ci]);
		}
#if Q4K_U8HI
		if (!five) p1[ci] >>= 4; // an exact multiple of 16
#endif
	}
#if Q4K_WIDE
	// d, dmin and the packed scales: one 16-byte load (blocks of 144 and
	// 176 bytes stay 16-byte aligned); d and dmin go on to finK in hw.
	uint4 hd = wld4<T>(blk);
	uint32_t s0 = hd.y, s1 = hd.z, s2 = hd.w;
	hw = hd.x;
#else
	uint32_t s0 = r ? r->s0 : wu32<T>(blk + 4), s1 = r ? r->s1 : wu32<T>(blk + 8), s2 = r ? r->s2 : wu32<T>(blk + 12);
#endif
#pragma unroll
	for (int ci = 0; ci < NC; ci++) {
		const int j = NC * k + ci;
		int sc0, m0, sc1, m1;
		{
			// Sub-blocks 2j and 2j+1's 6-bit scales and minimums as two
			// bytes of one word each (ggml's get_scale_min_k4 for 2j and
			// 2j+1), with no test of the sub-block: on an H200
			// (TestDecodeMatVec) Q4_K 11008×4096 gate+up 21.00 → 18.68
			// µs, 4096×4096 7.26 → 6.79 against scaleMinK4w's byte
			// selection.
			int sh = 16 * (j & 1);
			uint32_t sc, m;
			if (j < 2) {
				sc = s0 >> sh & 0x3f3fu, m = s1 >> sh & 0x3f3fu;
			} else {
				uint32_t t = s2 >> sh;
				sc = (t & 0x0f0fu) | (s0 >> sh >> 2 & 0x3030u), m = (t >> 4 & 0x0f0fu) | (s1 >> sh >> 2 & 0x3030u);
			}
			sc0 = sc & 0xff, sc1 = sc >> 8, m0 = m & 0xff, m1 = m >> 8;
		}
#if Q4K_WIDE
		// The activations' sums of 16 over the two sub-blocks: four
		// shorts in one 8-byte load (x.bs is 16-byte aligned for rows of
		// whole 256-blocks).
		int2 bs = *(const int2 *)(x.bs + 16 * b + 4 * j);
		int dj = sc0 * p0[ci] + sc1 * p1[ci];
		int oj = m0 * ((int)(short)bs.x + (bs.x >> 16)) + m1 * ((int)(short)bs.y + (bs.y >> 16));
#else
		const short *bs = x.bs + 16 * b + 4 * j;
		int dj = sc0 * p0[ci] + sc1 * p1[ci];
		int oj = m0 * (bs[0] + bs[1]) + m1 * (bs[2] + bs[3]);
#endif
		if (ci == 0)
			dot = dj, off = oj;
		else
			dot += dj, off += oj;
	}
}

template <int T> __device__ __forceinline__ float finK(const uint8_t *blk, const XQ &x, int b, int dot, int off, uint32_t hw, const KRaw *r = nullptr) {
#if Q4K_WIDE
	float d = __half2float(__ushort_as_half((unsigned short)(hw & 0xffff))), dmin = __half2float(__ushort_as_half((unsigned short)(hw >> 16)));
#else
	float2 dm = r ? h2(r->dm) : wf16x2<T>(blk);
	float d = dm.x, dmin = dm.y;
#endif
	return __fmul_rn(x.d[b], __fsub_rn(__fmul_rn(d, (float)dot), __fmul_rn(dmin, (float)off)));
}

// Q4K_TPB is the lanes a Q4_K block takes: 4, or 2 (each lane two chunks).
// The nineteenth session measured 2 faster on the 7B's long rows (4096×11008
// 15.30 → 13.48 µs) and slower on TinyLlama's 2048 columns (4.51 → 4.97),
// before the scales were unpacked as byte pairs. With them (and MV_XBASE,
// Q4K_U8HI, Q4K_WIDE 1; µs, 4 → 2 lanes): 4096×4096 6.90 → 6.37,
// 12288×4096 13.60 → 13.24, 11008×4096 gate+up 20.21 → 18.88, but the
// four-lane build with Q4K_WIDE 0 was faster on the two larger shapes
// (12.97, 18.06), which are most of a 7B step; it stays 4. The batched
// kernels follow either order (mvt: the decode's lane groups).
#ifndef Q4K_TPB
#define Q4K_TPB 4
#endif
template <> struct D8<T_Q4_K> {
	static const int block = 256, TPB = Q4K_TPB, bytes = 144;
	static const bool q81 = false, hasOff = true;
	typedef KRaw Raw;
	static __device__ __forceinline__ Raw load(const uint8_t *blk, int k, int) {
		static_assert(Q4K_TPB == 4 && !Q4K_WIDE, "a Q4_K block loaded ahead is four lanes' chunks, its scales as three words");
		const uint4 *qp = (const uint4 *)(blk + 16 + 32 * k);
		return Raw{wld4<T_Q4_K>(qp), wld4<T_Q4_K>(qp + 1), wu32<T_Q4_K>(blk + 4), wu32<T_Q4_K>(blk + 8), wu32<T_Q4_K>(blk + 12), wu32<T_Q4_K>(blk)};
	}
	static __device__ __forceinline__ void part(const uint8_t *blk, int k, const XQ &x, int b, int &dot, int &off, uint32_t &hw, const Raw *r = nullptr) {
		partK<T_Q4_K, 4 / TPB>(blk, k, x, b, dot, off, hw, r);
	}
	static __device__ __forceinline__ float fin(const uint8_t *blk, const XQ &x, int b, int dot, int off, uint32_t hw, const Raw *r = nullptr) {
		return finK<T_Q4_K>(blk, x, b, dot, off, hw, r);
	}
};

template <> struct D8<T_Q5_K> {
	static const int block = 256, TPB = 4, bytes = 176;
	static const bool q81 = false, hasOff = true;
	static __device__ __forceinline__ void part(const uint8_t *blk, int k, const XQ &x, int b, int &dot, int &off, uint32_t &hw) {
		partK<T_Q5_K>(blk, k, x, b, dot, off, hw);
	}
	static __device__ __forceinline__ float fin(const uint8_t *blk, const XQ &x, int b, int dot, int off, uint32_t hw) { return finK<T_Q5_K>(blk, x, b, dot, off, hw); }
};

// Q6_K: lane k takes half hf = k/2 and the 32 ql bytes of quarter κ = k%2,
// whose low nibbles are chunk κ and high nibbles chunk κ+2 of the half, with
// the qh bits 2κ and 2κ+4 of the half's 32 qh bytes. dot is
// Σ scale·(Σqx - 32·Σx) over the lane's four groups of 16.
template <> struct D8<T_Q6_K> {
	static const int block = 256, TPB = 4, bytes = 210;
	static const bool q81 = false, hasOff = false;
	// Raw: a lane's ql and qh runs, its two scale pairs and the block's d,
	// loaded ahead (Pre); part and fin take them from r where it is set.
	struct Raw {
		uint4 l[2], g[2];
		uint32_t sa, sb, d;
	};
	static __device__ __forceinline__ Raw load(const uint8_t *blk, int k, int b) {
		int hf = k >> 1, kk = k & 1;
		const uint8_t *ql = q6_ql(blk, b) + 64 * hf + 32 * kk, *qh = q6_qh(blk, b) + 32 * hf, *sc = q6_sc(blk, b);
		return Raw{{wld4<T_Q6_K>(ql), wld4<T_Q6_K>(ql + 16)}, {wld4<T_Q6_K>(qh), wld4<T_Q6_K>(qh + 16)},
		           wu16<T_Q6_K>(sc + 8 * hf + 2 * kk), wu16<T_Q6_K>(sc + 8 * hf + 2 * kk + 4), wu16<T_Q6_K>(q6_d(blk, b))};
	}
	static __device__ __forceinline__ void part(const uint8_t *blk, int k, const XQ &x, int b, int &dot, int &off, uint32_t &hw, const Raw *r = nullptr) {
		// blk is the block's group (regrouped, q6_grp): its ql and qh
		// runs are 32-byte aligned, two 16-byte loads each (in the file's
		// blocks, nine aligned words and eight funnel shifts each).
		int hf = k >> 1, kk = k & 1;
		const uint8_t *ql = q6_ql(blk, b) + 64 * hf + 32 * kk, *qh = q6_qh(blk, b) + 32 * hf, *sc = q6_sc(blk, b);
#if !MV_XBASE
		const int e = 256 * b + 128 * hf;
#endif
		int p[4] = {0, 0, 0, 0}; // chunk κ groups 0, 1; chunk κ+2 groups 0, 1
		uint32_t L[8], G[8];
#pragma unroll
		for (int i = 0; i < 2; i++) {
			uint4 l = r ? r->l[i] : wld4<T_Q6_K>(ql + 16 * i), g = r ? r->g[i] : wld4<T_Q6_K>(qh + 16 * i);
			L[4 * i] = l.x, L[4 * i + 1] = l.y, L[4 * i + 2] = l.z, L[4 * i + 3] = l.w;
			G[4 * i] = g.x, G[4 * i + 1] = g.y, G[4 * i + 2] = g.z, G[4 * i + 3] = g.w;
		}
		// The activations of chunks κ and κ+2: 32 bytes each, 16-byte aligned.
		int X1[8], X2[8];
#if MV_XBASE
		const int8_t *xp = x.q + xo(256 * b) + 128 * hf; // the half's 128 activations, in one 256-group
#endif
#pragma unroll
		for (int i = 0; i < 2; i++) {
#if MV_XBASE
			int4 a = xat4(xp, 32 * kk + 16 * i), c = xat4(xp, 32 * (kk + 2) + 16 * i);
#else
			int4 a = xint4(x, e + 32 * kk + 16 * i), c = xint4(x, e + 32 * (kk + 2) + 16 * i);
#endif
			X1[4 * i] = a.x, X1[4 * i + 1] = a.y, X1[4 * i + 2] = a.z, X1[4 * i + 3] = a.w;
			X2[4 * i] = c.x, X2[4 * i + 1] = c.y, X2[4 * i + 2] = c.z, X2[4 * i + 3] = c.w;
		}
#pragma unroll
		for (int i = 0; i < 8; i++) {
			uint32_t l = L[i], g = G[i];
			uint32_t q1 = (l & NIB) | (g >> (2 * kk) & 0x03030303u) << 4;
			uint32_t q2 = (l >> 4 & NIB) | (g >> (2 * kk + 4) & 0x03030303u) << 4;
			p[i >> 2] = __dp4a((int)q1, X1[i], p[i >> 2]);
			p[2 + (i >> 2)] = __dp4a((int)q2, X2[i], p[2 + (i >> 2)]);
		}
		uint32_t sa = r ? r->sa : wu16<T_Q6_K>(sc + 8 * hf + 2 * kk), sb = r ? r->sb : wu16<T_Q6_K>(sc + 8 * hf + 2 * kk + 4);
		const short *bs = x.bs + 16 * b + 8 * hf + 2 * kk;
		dot = (int)(int8_t)(sa & 0xff) * (p[0] - 32 * bs[0]) + (int)(int8_t)(sa >> 8) * (p[1] - 32 * bs[1]) +
		      (int)(int8_t)(sb & 0xff) * (p[2] - 32 * bs[4]) + (int)(int8_t)(sb >> 8) * (p[3] - 32 * bs[5]);
		off = 0;
	}
	static __device__ __forceinline__ float fin(const uint8_t *blk, const XQ &x, int b, int dot, int, uint32_t, const Raw *r = nullptr) {
		return fmd(x.d[b], r ? h1(r->d) : wf16<T_Q6_K>(q6_d(blk, b)), (float)dot);
	}
};

// Q2_K: lane k takes half h = k/2 and the 16 quant bytes 16(k%2).. of it,
// whose bit pairs 2m.. (m = 0..3) are sub-block 8h + 2m + k%2; dot is
// Σ sc·Σqx and off Σ m·Σx (the activations' sums of 16) over its four
// sub-blocks, and the block's term d·dot - dmin·off, each times the
// activations' scale, as the CPU device (devices/cpu/kernels, dotQ2_KGo).
template <> struct D8<T_Q2_K> {
	static const int block = 256, TPB = 4, bytes = 84;
	static const bool q81 = false, hasOff = true;
	static __device__ __forceinline__ void part(const uint8_t *blk, int k, const XQ &x, int b, int &dot, int &off, uint32_t &hw) {
		int h = k >> 1, g = k & 1;
		const uint8_t *qs = blk + 16 + 32 * h + 16 * g;
		uint32_t w[4] = {wu32<T_Q2_K>(qs), wu32<T_Q2_K>(qs + 4), wu32<T_Q2_K>(qs + 8), wu32<T_Q2_K>(qs + 12)};
		uint32_t sc[2] = {wu32<T_Q2_K>(blk + 8 * h), wu32<T_Q2_K>(blk + 8 * h + 4)}; // scale bytes 8h..8h+7
		const int e = 256 * b + 128 * h + 16 * g;
		dot = 0, off = 0;
#pragma unroll
		for (int m = 0; m < 4; m++) {
			int p = 0;
#pragma unroll
			for (int i = 0; i < 4; i++) p = __dp4a((int)(w[i] >> (2 * m) & 0x03030303u), xint(x, e + 32 * m + 4 * i), p);
			int s = (sc[m >> 1] >> (8 * (2 * (m & 1) + g))) & 0xff; // byte 2m + g
			dot += (s & 15) * p;
			off += (s >> 4) * x.bs[16 * b + 8 * h + 2 * m + g];
		}
	}
	static __device__ __forceinline__ float fin(const uint8_t *blk, const XQ &x, int b, int dot, int off, uint32_t hw) {
		float2 dm = wf16x2<T_Q2_K>(blk + 80);
		return __fsub_rn(__fmul_rn((float)dot, __fmul_rn(dm.x, x.d[b])), __fmul_rn((float)off, __fmul_rn(dm.y, x.d[b])));
	}
};

// Q3_K: lanes as Q2_K's, each quant completed with its hmask bit (bit 4h+m
// of hmask[16(k%2)..]) and offset by -4 bytewise, so that the integer sums
// are exact; dot is Σ scale·Σqx over the lane's four sub-blocks.
template <> struct D8<T_Q3_K> {
	static const int block = 256, TPB = 4, bytes = 110;
	static const bool q81 = false, hasOff = false;
	static __device__ __forceinline__ void part(const uint8_t *blk, int k, const XQ &x, int b, int &dot, int &off, uint32_t &hw) {
		int h = k >> 1, g = k & 1;
		uint32_t L[4], H[4];
		words16<4>(blk + 32 + 32 * h + 16 * g, L);
		words16<4>(blk + 16 * g, H);
		const int e = 256 * b + 128 * h + 16 * g;
		dot = 0, off = 0;
#pragma unroll
		for (int m = 0; m < 4; m++) {
			int p = 0;
#pragma unroll
			for (int i = 0; i < 4; i++) {
				uint32_t q = (L[i] >> (2 * m) & 0x03030303u) | (H[i] >> (4 * h + m) & 0x01010101u) << 2;
				p = __dp4a((int)__vsub4(q, 0x04040404u), xint(x, e + 32 * m + 4 * i), p);
			}
			dot += scaleK3(8 * h + 2 * m + g, blk + 96) * p;
		}
	}
	static __device__ __forceinline__ float fin(const uint8_t *blk, const XQ &x, int b, int dot, int, uint32_t) {
		return fmd(x.d[b], wf16<T_Q3_K>(blk + 108), (float)dot);
	}
};

// IQ4_NL: as Q4_0 with two lanes a block (lane k: bytes 8k..8k+7), each
// nibble mapped to its level (iq4Levels), so no offset; 8-bit activations
// in blocks of 32 (ggml's Q8_0), as the CPU device's.
template <> struct D8<T_IQ4_NL> {
	static const int block = 32, TPB = 2, bytes = 18;
	static const bool q81 = false, hasOff = false;
	static __device__ __forceinline__ void part(const uint8_t *blk, int k, const XQ &x, int b, int &dot, int &off, uint32_t &hw) {
		int e = 32 * b + 8 * k;
		dot = 0;
#pragma unroll
		for (int i = 0; i < 2; i++) {
			uint32_t v = w16x2(blk + 2 + 8 * k + 4 * i);
			dot = __dp4a((int)iq4Levels(v & NIB), xint(x, e + 4 * i), dot);
			dot = __dp4a((int)iq4Levels(v >> 4 & NIB), xint(x, e + 16 + 4 * i), dot);
		}
		off = 0;
	}
	static __device__ __forceinline__ float fin(const uint8_t *blk, const XQ &x, int b, int dot, int, uint32_t) { return fmd(wf16<T_IQ4_NL>(blk), x.d[b], (float)dot); }
};

// IQ4_XS: lane k takes sub-blocks 2k and 2k+1 (32 nibble bytes from
// 8+32k); dot is Σ scale·Σ level·x over them.
template <> struct D8<T_IQ4_XS> {
	static const int block = 256, TPB = 4, bytes = 136;
	static const bool q81 = false, hasOff = false;
	static __device__ __forceinline__ void part(const uint8_t *blk, int k, const XQ &x, int b, int &dot, int &off, uint32_t &hw) {
		const uint2 *qp = (const uint2 *)(blk + 8 + 32 * k); // 8-byte aligned: 136-byte blocks
		dot = 0, off = 0;
#pragma unroll
		for (int j = 0; j < 2; j++) {
			uint2 a = wld2<T_IQ4_XS>(qp + 2 * j), c = wld2<T_IQ4_XS>(qp + 2 * j + 1);
			uint32_t v[4] = {a.x, a.y, c.x, c.y};
			int e = 256 * b + 32 * (2 * k + j), p = 0;
#pragma unroll
			for (int i = 0; i < 4; i++) {
				p = __dp4a((int)iq4Levels(v[i] & NIB), xint(x, e + 4 * i), p);
				p = __dp4a((int)iq4Levels(v[i] >> 4 & NIB), xint(x, e + 16 + 4 * i), p);
			}
			dot += scaleIQ4XS(2 * k + j, blk) * p;
		}
	}
	static __device__ __forceinline__ float fin(const uint8_t *blk, const XQ &x, int b, int dot, int, uint32_t) { return fmd(wf16<T_IQ4_XS>(blk), x.d[b], (float)dot); }
};

// blkAt is where block b of a row of type T starts as the device holds it:
// b·bytes, or for the regrouped Q4_0 and Q8_0 its scale (grp_d), from which
// its part finds the quants, and for the regrouped Q6_K its group (q6_grp).
template <int T> __device__ __forceinline__ long long blkAt(int b) {
	return T == T_Q4_0 ? grp_at<16>(b) : T == T_Q8_0 ? grp_at<32>(b) : T == T_Q6_K ? q6_grp(b) : (long long)b * D8<T>::bytes;
}

// Pre<T> is a trip's weight loads of type T apart from its sums, so that a
// mat-vec can load a warp's first trips into registers before it waits for
// the launch before it (mvp_ in kernels/fused.cu): Raw holds what load
// reads of block b for lane k, part and fin are D8<T>'s from it, the same
// operations in the same order. The default keeps only the block's address
// (nothing loaded ahead); Q4_0 (one lane a block), Q8_0 (16-byte pieces),
// Q4_K and Q6_K (four lanes a block) hold their quants and scales (PreOf).
template <int T> struct Pre {
	struct Raw {
		const uint8_t *blk;
	};
	static __device__ __forceinline__ Raw load(const uint8_t *blk, int, int) { return Raw{blk}; }
	static __device__ __forceinline__ void part(const Raw &r, int k, const XQ &x, int b, int &dot, int &off, uint32_t &hw) { D8<T>::part(r.blk, k, x, b, dot, off, hw); }
	static __device__ __forceinline__ float fin(const Raw &r, const XQ &x, int b, int dot, int off, uint32_t hw) { return D8<T>::fin(r.blk, x, b, dot, off, hw); }
};

// PreOf<T> is Pre<T> for a type whose D8<T> has Raw, load, and part and fin
// that take what load read (Q4_0, Q8_0, Q4_K).
template <int T> struct PreOf {
	typedef typename D8<T>::Raw Raw;
	static __device__ __forceinline__ Raw load(const uint8_t *blk, int k, int b) { return D8<T>::load(blk, k, b); }
	static __device__ __forceinline__ void part(const Raw &r, int k, const XQ &x, int b, int &dot, int &off, uint32_t &hw) { D8<T>::part(nullptr, k, x, b, dot, off, hw, &r); }
	static __device__ __forceinline__ float fin(const Raw &r, const XQ &x, int b, int dot, int off, uint32_t hw) { return D8<T>::fin(nullptr, x, b, dot, off, hw, &r); }
};
template <> struct Pre<T_Q4_0> : PreOf<T_Q4_0> {};
template <> struct Pre<T_Q8_0> : PreOf<T_Q8_0> {};
template <> struct Pre<T_Q4_K> : PreOf<T_Q4_K> {};
template <> struct Pre<T_Q6_K> : PreOf<T_Q6_K> {};

// The trips of row_dotq unrolled: MV_UNROLL for most types, Q80_UNROLL for
// Q8_0, Q6K_UNROLL for Q6_K (bench/cuda/mv-ab.sh times builds with other
// values). Fewer unrolled trips measured faster once the activations were
// read in 16-byte pieces and Q4_K's scales in byte pairs: on an H200
// (TestDecodeMatVec, µs, unrolled 4 / 2 for all types, Q6_K then at 2 / 1)
// Q4_0 5632×2048 gate+up 9.03 / 8.51, Q4_K 11008×4096 gate+up 20.85 /
// 20.28 / 19.99, Q6_K 4096×11008 19.12 / 19.43 (Q6_K alone a little slower
// at 1, but the 7B's decode faster: 439.3 → 443.9 tok/s); tg128 TinyLlama
// Q4_0 1345 / 1390, Llama-7B Q4_K_M 437 / 444, but TinyLlama Q8_0 1115 /
// 1054, so Q8_0 keeps 4.
#ifndef MV_UNROLL
#define MV_UNROLL 2
#endif
#ifndef Q80_UNROLL
#define Q80_UNROLL 4
#endif
#ifndef Q6K_UNROLL
#define Q6K_UNROLL 1
#endif

// row_dotq is R rows' dot products with x over nb blocks for one warp: the
// lanes take blocks in groups of TPB, sum each block's integer terms across
// its group (exact), and the group's first lane adds the block's float term;
// then the lanes reduce by butterfly. Every lane runs every iteration, so the
// shuffles see the whole warp.
//
// With P > 0, pre holds each row's first trips' loads (Pre<T>::load, up to
// P of its full trips, every lane's block in the row; trip it of row r at
// pre[R·it + r]), which it takes in place of loading them: the same sums in
// the same order.
template <int T, int R, int P = 0>
__device__ __forceinline__ void row_dotq(const uint8_t *const *rows, const XQ &x, int nb, int lane, float *y,
                                         const typename Pre<T>::Raw *pre = nullptr) {
	typedef D8<T> D;
	const int per = 32 / D::TPB;
	int k = lane % D::TPB, first = lane / D::TPB;
	float acc[R];
#pragma unroll
	for (int r = 0; r < R; r++) acc[r] = 0;
	// The trips where every group has a block carry no test, so that the
	// unrolled trips' loads can go out together; then the one trip where
	// only some do. The sums are added in the same order either way.
	// Measured on an H200 (TestDecodeMatVec, eight warps, µs): Q4_K
	// 4096×11008 19.25 → 17.69, 4096×4096 8.55 → 8.11; Q4_0 5632×2048
	// gate+up 9.93 → 8.98, but 2560×2048 4.73 → 5.60 (4.97 on the sixteen
	// warps the decode uses, mvWarps).
	int full = nb / per, iters = (nb + per - 1) / per;
	auto trip = [&](int it, bool ok) {
		int b = it * per + first;
		int dot[R], off[R];
		uint32_t hw[R];
#pragma unroll
		for (int r = 0; r < R; r++) {
			dot[r] = 0, off[r] = 0, hw[r] = 0;
			if (ok) D::part(rows[r] + blkAt<T>(b), k, x, b, dot[r], off[r], hw[r]);
		}
#pragma unroll
		for (int o = 1; o < D::TPB; o <<= 1)
#pragma unroll
			for (int r = 0; r < R; r++) {
				dot[r] += __shfl_xor_sync(FULL, dot[r], o);
				if (D::hasOff) off[r] += __shfl_xor_sync(FULL, off[r], o);
			}
		if (ok && k == 0)
#pragma unroll
			for (int r = 0; r < R; r++) acc[r] = __fadd_rn(acc[r], D::fin(rows[r] + blkAt<T>(b), x, b, dot[r], off[r], hw[r]));
	};
	constexpr int UN = T == T_Q6_K ? Q6K_UNROLL : T == T_Q8_0 ? Q80_UNROLL : MV_UNROLL;
	int held = P > 0 && pre ? min(P, full) : 0;
	// The held trips: trip's steps on the loads made ahead. Kept apart from
	// trip, so that every row_dotq without them compiles as it did.
#pragma unroll
	for (int it = 0; it < P; it++) {
		if (it >= held) break;
		int b = it * per + first, dot[R], off[R];
		uint32_t hw[R];
#pragma unroll
		for (int r = 0; r < R; r++) {
			dot[r] = 0, off[r] = 0, hw[r] = 0;
			Pre<T>::part(pre[R * it + r], k, x, b, dot[r], off[r], hw[r]);
		}
#pragma unroll
		for (int o = 1; o < D::TPB; o <<= 1)
#pragma unroll
			for (int r = 0; r < R; r++) {
				dot[r] += __shfl_xor_sync(FULL, dot[r], o);
				if (D::hasOff) off[r] += __shfl_xor_sync(FULL, off[r], o);
			}
		if (k == 0)
#pragma unroll
			for (int r = 0; r < R; r++) acc[r] = __fadd_rn(acc[r], Pre<T>::fin(pre[R * it + r], x, b, dot[r], off[r], hw[r]));
	}
#pragma unroll UN
	for (int it = held; it < full; it++) trip(it, true);
	if (full < iters) trip(full, full * per + first < nb);
#pragma unroll
	for (int r = 0; r < R; r++) {
		float s = acc[r];
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
		y[r] = s;
	}
}

// mma_s8k32 and mma_s8k16 are one warp's 8-bit tensor-core products c = A·B
// (m16n8k32 and m16n8k16, s8 inputs, s32 sums from zero), in PTX's fragment
// layouts: lane l holds A's rows l/4 and l/4+8, B's column l/4, and C's
// rows l/4 and l/4+8 at columns 2(l%4) and 2(l%4)+1.
__device__ __forceinline__ void mma_s8k32(int *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
	asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
	             : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0), "r"(0), "r"(0), "r"(0));
}

__device__ __forceinline__ void mma_s8k16(int *c, uint32_t a0, uint32_t a1, uint32_t b0) {
	asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};\n"
	             : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
	             : "r"(a0), "r"(a1), "r"(b0), "r"(0), "r"(0), "r"(0), "r"(0));
}
