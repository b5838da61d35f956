// quant.cuh decodes GGUF weight rows in registers, eight weights at a time,
// for the mat-mul and embedding kernels. Piece c of a row is 8 weights: w[0..3]
// are elements e0..e0+3 and w[4..7] elements e1..e1+3 (e1 = e0+4 where the
// eight are consecutive; Q4_0-style blocks put an element's partner nibble 16
// further on). Four consecutive pieces make one 32-element block or
// sub-block, so the lanes of a warp read consecutive bytes of weights and
// nearby 16-byte pieces of the activations.
//
// Each decoder computes exactly what models/quant's Dequantize does
// (products rounded before they are added: __fmul_rn keeps nvcc from fusing
// them), so embeddings agree with the CPU bit for bit.
//
// Alignment: a row starts at a multiple of its row bytes from a cuMemAlloc'd
// base. The device holds Q4_0 and Q8_0 rows regrouped (grp_d, grp_q below),
// their quants 16-byte aligned, and Q6_K rows regrouped too (q6_grp below).
// Q5_0 (22) blocks are only 2-byte aligned in general, so those read 16-bit
// words; Q4_1 (20), Q5_1 (24), Q4_K
// (144) and Q5_K (176) read 32-bit words; float rows 16-byte vectors. Of the
// low-bit types, Q2_K (84), IQ4_XS (136) read 32-bit words, IQ4_NL (18) and
// Q3_K (110) 16-bit ones.
#pragma once
#include <cuda_fp16.h>
#include <stdint.h>

// GGML type ids (models/quant/types.go).
enum {
	T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q4_1 = 3, T_Q5_0 = 6, T_Q5_1 = 7,
	T_Q8_0 = 8, T_Q2_K = 10, T_Q3_K = 11, T_Q4_K = 12, T_Q5_K = 13, T_Q6_K = 14,
	T_IQ4_NL = 20, T_IQ4_XS = 23, T_BF16 = 30,
};

__device__ __forceinline__ float f16(const uint8_t *p) { return __half2float(__ushort_as_half(*(const uint16_t *)p)); }
__device__ __forceinline__ uint32_t u16(const uint8_t *p) { return *(const uint16_t *)p; }
__device__ __forceinline__ uint32_t u32(const uint8_t *p) { return *(const uint32_t *)p; }
__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }

template <int T> struct Q;

// Q4_0 and Q8_0 as the device holds them (regroup in layout.go): a row's
// blocks in groups of eight, each group the eight blocks' f16 scales (16
// bytes) and then their QB quant bytes each (QB 16 for Q4_0, 32 for Q8_0),
// the last group padded with zeros, so that a block's quants are aligned
// 16-byte loads (a file's 18- and 34-byte blocks are 2-byte aligned: words
// and funnel shifts, or two-byte loads). grp_d is block b's scale (at
// grp_at in the row), grp_q its quants, 16 + (QB-2)·(b%8) bytes past the
// scale.
template <int QB> __device__ __forceinline__ long long grp_at(int b) { return (16LL + 8 * QB) * (b >> 3) + 2 * (b & 7); }
template <int QB> __device__ __forceinline__ const uint8_t *grp_d(const uint8_t *row, int b) { return row + grp_at<QB>(b); }
template <int QB> __device__ __forceinline__ const uint8_t *grp_q(const uint8_t *row, int b) { return row + (16LL + 8 * QB) * (b >> 3) + 16 + QB * (b & 7); }

// Q6_K as the device holds it (regroup in layout.go): a row's 210-byte
// blocks in groups of eight, each group the eight blocks' ql (128 bytes
// each), then their qh (64), their scales (16) and their f16 d (2), 1680
// bytes, the last group padded with zeros, so that a block's ql, qh and
// scales start 16-byte aligned (a file's blocks are 2-byte aligned: words
// and funnel shifts). q6_grp is block b's group in the row; q6_ql, q6_qh,
// q6_sc and q6_d its fields from the group g.
__device__ __forceinline__ long long q6_grp(int b) { return 1680LL * (b >> 3); }
__device__ __forceinline__ const uint8_t *q6_ql(const uint8_t *g, int b) { return g + 128 * (b & 7); }
__device__ __forceinline__ const uint8_t *q6_qh(const uint8_t *g, int b) { return g + 1024 + 64 * (b & 7); }
__device__ __forceinline__ const uint8_t *q6_sc(const uint8_t *g, int b) { return g + 1536 + 16 * (b & 7); }
__device__ __forceinline__ const uint8_t *q6_d(const uint8_t *g, int b) { return g + 1664 + 2 * (b & 7); }

template <> struct Q<T_F32> {
	static __device__ __forceinline__ void deq(const uint8_t *row, int c, float *w, int &e0, int &e1) {
		const float4 *p = (const float4 *)(row + 32 * c);
		float4 a = p[0], b = p[1];
		w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
		e0 = 8 * c, e1 = e0 + 4;
	}
};

template <> struct Q<T_F16> {
	static __device__ __forceinline__ void deq(const uint8_t *row, int c, float *w, int &e0, int &e1) {
		uint4 v = *(const uint4 *)(row + 16 * c);
		uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
		for (int i = 0; i < 4; i++) {
			w[2 * i] = __half2float(__ushort_as_half((uint16_t)(u[i] & 0xffff)));
			w[2 * i + 1] = __half2float(__ushort_as_half((uint16_t)(u[i] >> 16)));
		}
		e0 = 8 * c, e1 = e0 + 4;
	}
};

template <> struct Q<T_BF16> {
	static __device__ __forceinline__ void deq(const uint8_t *row, int c, float *w, int &e0, int &e1) {
		uint4 v = *(const uint4 *)(row + 16 * c);
		uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
		for (int i = 0; i < 4; i++) {
			w[2 * i] = __uint_as_float(u[i] << 16);
			w[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
		}
		e0 = 8 * c, e1 = e0 + 4;
	}
};

// Q4_0: f16 d, 16 bytes: low nibbles elements 0..15, high 16..31; (q-8)*d
// (regrouped: grp_d, grp_q). Piece s of a block takes bytes 4s..4s+3:
// elements 4s.. and 16+4s...
template <> struct Q<T_Q4_0> {
	static __device__ __forceinline__ void deq(const uint8_t *row, int c, float *w, int &e0, int &e1) {
		int s = c & 3;
		float d = f16(grp_d<16>(row, c >> 2));
		uint32_t v = u32(grp_q<16>(row, c >> 2) + 4 * s);
#pragma unroll
		for (int k = 0; k < 4; k++) {
			w[k] = mul((float)((int)((v >> (8 * k)) & 15) - 8), d);
			w[k + 4] = mul((float)((int)((v >> (8 * k + 4)) & 15) - 8), d);
		}
		e0 = 32 * (c >> 2) + 4 * s, e1 = e0 + 16;
	}
};

// Q4_1: f16 d, f16 m, nibbles as Q4_0; q*d + m.
template <> struct Q<T_Q4_1> {
	static __device__ __forceinline__ void deq(const uint8_t *row, int c, float *w, int &e0, int &e1) {
		const uint8_t *b = row + 20 * (c >> 2);
		int s = c & 3;
		float d = f16(b), m = f16(b + 2);
		uint32_t v = u32(b + 4 + 4 * s);
#pragma unroll
		for (int k = 0; k < 4; k++) {
			w[k] = mul((float)((v >> (8 * k)) & 15), d) + m;
			w[k + 4] = mul((float)((v >> (8 * k + 4)) & 15), d) + m;
		}
		e0 = 32 * (c >> 2) + 4 * s, e1 = e0 + 16;
	}
};

// Q5_0: f16 d, u32 qh (bit j: fifth bit of element j), nibbles; (q-16)*d.
template <> struct Q<T_Q5_0> {
	static __device__ __forceinline__ void deq(const uint8_t *row, int c, float *w, int &e0, int &e1) {
		const uint8_t *b = row + 22 * (c >> 2);
		int s = c & 3;
		float d = f16(b);
		uint32_t qh = u16(b + 2) | u16(b + 4) << 16;
		uint32_t v = u16(b + 6 + 4 * s) | u16(b + 8 + 4 * s) << 16;
#pragma unroll
		for (int k = 0; k < 4; k++) {
			int j = 4 * s + k;
			int lo = ((v >> (8 * k)) & 15) | ((qh >> j) & 1) << 4, hi = ((v >> (8 * k + 4)) & 15) | ((qh >> (j + 16)) & 1) << 4;
			w[k] = mul((float)(lo - 16), d);
			w[k + 4] = mul((float)(hi - 16), d);
		}
		e0 = 32 * (c >> 2) + 4 * s, e1 = e0 + 16;
	}
};

// Q5_1: f16 d, f16 m, u32 qh, nibbles; q*d + m.
template <> struct Q<T_Q5_1> {
	static __device__ __forceinline__ void deq(const uint8_t *row, int c, float *w, int &e0, int &e1) {
		const uint8_t *b = row + 24 * (c >> 2);
		int s = c & 3;
		float d = f16(b), m = f16(b + 2);
		uint32_t qh = u32(b + 4), v = u32(b + 8 + 4 * s);
#pragma unroll
		for (int k = 0; k < 4; k++) {
			int j = 4 * s + k;
			int lo = ((v >> (8 * k)) & 15) | ((qh >> j) & 1) << 4, hi = ((v >> (8 * k + 4)) & 15) | ((qh >> (j + 16)) & 1) << 4;
			w[k] = mul((float)lo, d) + m;
			w[k + 4] = mul((float)hi, d) + m;
		}
		e0 = 32 * (c >> 2) + 4 * s, e1 = e0 + 16;
	}
};

// Q8_0: f16 d, 32 int8; q*d (regrouped: grp_d, grp_q). Piece s: quants 8s..8s+7.
template <> struct Q<T_Q8_0> {
	static __device__ __forceinline__ void deq(const uint8_t *row, int c, float *w, int &e0, int &e1) {
		int s = c & 3;
		float d = f16(grp_d<32>(row, c >> 2));
		uint2 q = *(const uint2 *)(grp_q<32>(row, c >> 2) + 8 * s); // regrouped: 8-byte aligned
#pragma unroll
		for (int i = 0; i < 4; i++) {
			uint32_t v = (i < 2 ? q.x : q.y) >> (16 * (i & 1));
			w[2 * i] = mul((float)(int8_t)(v & 0xff), d);
			w[2 * i + 1] = mul((float)(int8_t)(v >> 8 & 0xff), d);
		}
		e0 = 8 * c, e1 = e0 + 4;
	}
};

// scaleMinK4 unpacks sub-block j's 6-bit scale and min (quant.ScaleMinK4).
__device__ __forceinline__ void scaleMinK4(int j, const uint8_t *s, int &sc, int &m) {
	if (j < 4) {
		sc = s[j] & 63, m = s[j + 4] & 63;
	} else {
		sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
		m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
	}
}

// Q4_K: super-blocks of 256 (144 bytes): f16 d, f16 dmin, 12 bytes of scales,
// 128 bytes of nibbles. Sub-block j (32 elements, pieces 4j..4j+3 of the
// super-block) is the low (even j) or high (odd j) nibbles of bytes
// 32(j/2)..+31. d*sc*q - dmin*m.
template <> struct Q<T_Q4_K> {
	static __device__ __forceinline__ void deq(const uint8_t *row, int c, float *w, int &e0, int &e1) {
		const uint8_t *b = row + 144 * (c >> 5);
		int j = (c >> 2) & 7, s = c & 3, sc, m;
		scaleMinK4(j, b + 4, sc, m);
		float d1 = mul(f16(b), (float)sc), m1 = mul(f16(b + 2), (float)m);
		const uint8_t *qs = b + 16 + 32 * (j >> 1) + 8 * s;
		int sh = 4 * (j & 1);
#pragma unroll
		for (int i = 0; i < 2; i++) {
			uint32_t v = u32(qs + 4 * i) >> sh;
#pragma unroll
			for (int k = 0; k < 4; k++) w[4 * i + k] = mul(d1, (float)((v >> (8 * k)) & 15)) - m1;
		}
		e0 = 8 * c, e1 = e0 + 4;
	}
};

// Q5_K: 176 bytes: f16 d, f16 dmin, 12 bytes of scales, 32 bytes qh (bit j of
// byte l: fifth bit of element l of sub-block j), 128 bytes of nibbles as Q4_K.
template <> struct Q<T_Q5_K> {
	static __device__ __forceinline__ void deq(const uint8_t *row, int c, float *w, int &e0, int &e1) {
		const uint8_t *b = row + 176 * (c >> 5);
		int j = (c >> 2) & 7, s = c & 3, sc, m;
		scaleMinK4(j, b + 4, sc, m);
		float d1 = mul(f16(b), (float)sc), m1 = mul(f16(b + 2), (float)m);
		const uint8_t *qh = b + 16 + 8 * s, *qs = b + 48 + 32 * (j >> 1) + 8 * s;
		int sh = 4 * (j & 1);
#pragma unroll
		for (int i = 0; i < 2; i++) {
			uint32_t v = u32(qs + 4 * i) >> sh, h = u32(qh + 4 * i) >> j;
#pragma unroll
			for (int k = 0; k < 4; k++) {
				uint32_t q = ((v >> (8 * k)) & 15) | ((h >> (8 * k)) & 1) << 4;
				w[4 * i + k] = mul(d1, (float)q) - m1;
			}
		}
		e0 = 8 * c, e1 = e0 + 4;
	}
};

// Q6_K: 210 bytes: 128 bytes ql, 64 bytes qh, 16 int8 scales, f16 d
// (regrouped: q6_grp). The 32-element chunk r = (c/4)%8 of a super-block is
// half h = r/4, quarter k = r%4: its element l takes nibble k/2 of
// ql[64h + 32(k%2) + l], bits 2k.. of qh[32h + l], and scale 8h + 2k + l/16;
// d*scale*(q-32). q6_deq decodes piece c from the block's fields (ql, qh,
// sc, d), 8-byte aligned pieces of ql and qh.
__device__ __forceinline__ void q6_deq(const uint8_t *ql, const uint8_t *qh, const uint8_t *sc, float d, int c, float *w, int &e0, int &e1) {
	int r = (c >> 2) & 7, h = r >> 2, k = r & 3, s = c & 3;
	uint2 l = *(const uint2 *)(ql + 64 * h + 32 * (k & 1) + 8 * s), g = *(const uint2 *)(qh + 32 * h + 8 * s);
	float sd = mul(d, (float)(int8_t)sc[8 * h + 2 * k + (s >> 1)]);
	int shl = 4 * (k >> 1), shh = 2 * k;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		uint32_t v = ((i < 2 ? l.x : l.y) >> (16 * (i & 1)) & 0xffff) >> shl, gh = ((i < 2 ? g.x : g.y) >> (16 * (i & 1)) & 0xffff) >> shh;
#pragma unroll
		for (int t = 0; t < 2; t++) {
			int q = (int)(((v >> (8 * t)) & 15) | ((gh >> (8 * t)) & 3) << 4) - 32;
			w[2 * i + t] = mul(sd, (float)q);
		}
	}
	e0 = 8 * c, e1 = e0 + 4;
}

template <> struct Q<T_Q6_K> {
	static __device__ __forceinline__ void deq(const uint8_t *row, int c, float *w, int &e0, int &e1) {
		int b = c >> 5;
		const uint8_t *g = row + q6_grp(b);
		q6_deq(q6_ql(g, b), q6_qh(g, b), q6_sc(g, b), f16(q6_d(g, b)), c, w, e0, e1);
	}
};

// Q2_K: super-blocks of 256 (84 bytes): 16 scale bytes (low nibble scale,
// high nibble min, one per 16 elements), 64 bytes of 2-bit quants, f16 d,
// f16 dmin. Sub-block s (16 elements, pieces 2s and 2s+1 of the super-block)
// takes bits 2((s%8)/2).. of bytes 32(s/8) + 16(s%2) onward (quant.q2Quant);
// d*sc*q - dmin*m, with d*sc and dmin*m rounded first.
template <> struct Q<T_Q2_K> {
	static __device__ __forceinline__ void deq(const uint8_t *row, int c, float *w, int &e0, int &e1) {
		const uint8_t *b = row + 84 * (c >> 5);
		int p = c & 31, s = p >> 1;
		int sc = b[s];
		float dl = mul(f16(b + 80), (float)(sc & 15)), ml = mul(f16(b + 82), (float)(sc >> 4));
		const uint8_t *qs = b + 16 + 32 * (s >> 3) + 16 * (s & 1) + 8 * (p & 1);
		int sh = 2 * ((s & 7) >> 1);
#pragma unroll
		for (int i = 0; i < 2; i++) {
			uint32_t v = u32(qs + 4 * i) >> sh;
#pragma unroll
			for (int k = 0; k < 4; k++) w[4 * i + k] = mul(dl, (float)((v >> (8 * k)) & 3)) - ml;
		}
		e0 = 8 * c, e1 = e0 + 4;
	}
};

// scaleK3 is quant.ScaleK3: sub-block s's signed 6-bit scale from a Q3_K
// block's 12 scale bytes.
__device__ __forceinline__ int scaleK3(int s, const uint8_t *sc) {
	int lo = sc[s & 7] >> (4 * (s >> 3)) & 15, hi = sc[8 + (s & 3)] >> (2 * (s >> 2)) & 3;
	return (lo | hi << 4) - 32;
}

// Q3_K: 110 bytes: 32 bytes hmask, 64 bytes of low 2-bit quants laid out as
// Q2_K's, 12 bytes of packed 6-bit scales, f16 d. Element e's third bit is
// bit e/32 of hmask[e%32]; q = low bits, minus 4 where that bit is clear;
// (d*scale)*q.
template <> struct Q<T_Q3_K> {
	static __device__ __forceinline__ void deq(const uint8_t *row, int c, float *w, int &e0, int &e1) {
		const uint8_t *b = row + 110 * (c >> 5);
		int p = c & 31, s = p >> 1;
		float dl = mul(f16(b + 108), (float)scaleK3(s, b + 96));
		const uint8_t *qs = b + 32 + 32 * (s >> 3) + 16 * (s & 1) + 8 * (p & 1), *hm = b + 8 * (p & 3);
		int sh = 2 * ((s & 7) >> 1), hb = p >> 2;
#pragma unroll
		for (int i = 0; i < 4; i++) {
			uint32_t v = u16(qs + 2 * i) >> sh, h = u16(hm + 2 * i) >> hb;
#pragma unroll
			for (int t = 0; t < 2; t++) {
				int q = (int)((v >> (8 * t)) & 3) - (((h >> (8 * t)) & 1) ? 0 : 4);
				w[2 * i + t] = mul(dl, (float)q);
			}
		}
		e0 = 8 * c, e1 = e0 + 4;
	}
};

// iq4Levels maps four nibbles (the low nibble of each byte of n, high
// nibbles clear) to their four quant.IQ4Levels as signed bytes, with two
// byte permutes of the 16-entry table held in four immediate words: the
// lanes of a warp look up different entries, which a table in memory would
// serialise.
__device__ __forceinline__ uint32_t iq4Levels(uint32_t n) {
	const uint32_t t0 = 0xBFAD9881u, t1 = 0xF6EADDCFu, t2 = 0x26190D01u, t3 = 0x71594535u; // -127 -104 -83 -65 | -49 -35 -22 -10 | 1 13 25 38 | 53 69 89 113
	uint32_t v = n & 0x07070707u;
	uint32_t sel = (v & 7) | (v >> 4 & 0x70) | (v >> 8 & 0x700) | (v >> 12 & 0x7000);
	uint32_t lo = __byte_perm(t0, t1, sel), hi = __byte_perm(t2, t3, sel);
	uint32_t m = (n >> 3 & 0x01010101u) * 0xff;
	return (hi & m) | (lo & ~m);
}

// iq4Piece decodes bytes v (4 bytes of IQ4 nibbles) scaled by d: w[0..3]
// from the low nibbles, w[4..7] from the high ones.
__device__ __forceinline__ void iq4Piece(uint32_t v, float d, float *w) {
	uint32_t lo = iq4Levels(v & 0x0f0f0f0fu), hi = iq4Levels(v >> 4 & 0x0f0f0f0fu);
#pragma unroll
	for (int k = 0; k < 4; k++) {
		w[k] = mul(d, (float)(int8_t)(lo >> (8 * k)));
		w[k + 4] = mul(d, (float)(int8_t)(hi >> (8 * k)));
	}
}

// IQ4_NL: f16 d, 16 bytes of nibbles laid out as Q4_0's; d*IQ4Levels[q].
template <> struct Q<T_IQ4_NL> {
	static __device__ __forceinline__ void deq(const uint8_t *row, int c, float *w, int &e0, int &e1) {
		const uint8_t *b = row + 18 * (c >> 2);
		int s = c & 3;
		iq4Piece(u16(b + 2 + 4 * s) | u16(b + 4 + 4 * s) << 16, f16(b), w);
		e0 = 32 * (c >> 2) + 4 * s, e1 = e0 + 16;
	}
};

// scaleIQ4XS is quant.ScaleIQ4XS: sub-block j's signed 6-bit scale.
__device__ __forceinline__ int scaleIQ4XS(int j, const uint8_t *b) {
	int lo = b[4 + (j >> 1)] >> (4 * (j & 1)) & 15, hi = u16(b + 2) >> (2 * j) & 3;
	return (lo | hi << 4) - 32;
}

// IQ4_XS: 136 bytes: f16 d, u16 scales_h, 4 bytes scales_l, 128 bytes of
// nibbles, sub-block j (32 elements) in bytes 16j.. as an IQ4_NL block;
// (d*scale)*IQ4Levels[q].
template <> struct Q<T_IQ4_XS> {
	static __device__ __forceinline__ void deq(const uint8_t *row, int c, float *w, int &e0, int &e1) {
		const uint8_t *b = row + 136 * (c >> 5);
		int j = (c >> 2) & 7, s = c & 3;
		iq4Piece(u32(b + 8 + 16 * j + 4 * s), mul(f16(b), (float)scaleIQ4XS(j, b)), w);
		e0 = 256 * (c >> 5) + 32 * j + 4 * s, e1 = e0 + 16;
	}
};

// Tail<T>::one reads element e of a float row: rows of F32, F16 and BF16 may
// end in fewer than 8 elements past their last whole piece (any is false for
// the block types, whose rows are whole blocks).
template <int T> struct Tail {
	static const bool any = false;
	static __device__ __forceinline__ float one(const uint8_t *, int) { return 0; }
};
template <> struct Tail<T_F32> {
	static const bool any = true;
	static __device__ __forceinline__ float one(const uint8_t *row, int e) { return *(const float *)(row + 4 * e); }
};
template <> struct Tail<T_F16> {
	static const bool any = true;
	static __device__ __forceinline__ float one(const uint8_t *row, int e) { return f16(row + 2 * e); }
};
template <> struct Tail<T_BF16> {
	static const bool any = true;
	static __device__ __forceinline__ float one(const uint8_t *row, int e) { return __uint_as_float(u16(row + 2 * e) << 16); }
};

// The weight types every kernel is instantiated for, as X(id, name).
#define FOR_TYPES(X)                                                                           \
	X(T_F32, f32) X(T_F16, f16) X(T_BF16, bf16) X(T_Q4_0, q4_0) X(T_Q4_1, q4_1) X(T_Q5_0, q5_0) \
	X(T_Q5_1, q5_1) X(T_Q8_0, q8_0) X(T_Q4_K, q4_k) X(T_Q5_K, q5_k) X(T_Q6_K, q6_k) X(T_Q2_K, q2_k)  \
	X(T_Q3_K, q3_k) X(T_IQ4_NL, iq4_nl) X(T_IQ4_XS, iq4_xs)
