// common.cuh: device functions shared by the single-op kernels (ops.cu,
// matmul.cu) and the fused decode kernels (fused.cu), so that a fused launch
// computes exactly what the ops it replaces compute, bit for bit.
#pragma once
#include "quant.cuh"

// block_sum returns s summed over a block of 256 threads to every thread:
// warps by butterfly, then warp 0 over the warps, in a fixed order; part is
// 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float s, float *part) {
	for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
	if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
	__syncthreads();
	if (threadIdx.x < 32) {
		s = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0;
		for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
		if (threadIdx.x == 0) part[0] = s;
	}
	__syncthreads();
	return part[0];
}

// block_sum_all is block_sum with one barrier: every warp, not warp 0 alone,
// sums the warps' partial sums by the same butterfly over the same lanes, so
// every thread gets block_sum's value bit for bit (an xor butterfly leaves
// every lane the same sum) without the second barrier and shared-memory
// trip. part is read after the barrier by every warp: the caller must not
// write it again before another barrier. Measured on an H200 in chains of
// 64 launches of the decode's staging (devices/cuda/measure/stamps.cu, a
// block of 512 a multiprocessor, µs a launch): 4096 columns 3.87 → 3.30,
// 2048 columns 2.52 → 2.45; in the decode's normalised mat-vecs (tg128,
// bench/cuda/sum-ab.sh, thirty-eighth session) TinyLlama Q4_0 +1.1%,
// Q4_K_M +0.8%, Llama-7B Q4_K_M +0.2%.
__device__ __forceinline__ float block_sum_all(float s, float *part) {
	for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
	if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
	__syncthreads();
	int lane = threadIdx.x & 31;
	s = lane < (int)(blockDim.x >> 5) ? part[lane] : 0;
	for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
	return s;
}

// block_rms_scale returns 1/sqrt(mean(x²)+eps) over x[0..cols) to every
// thread of a block of 256 (block_sum). Thread t sums the squares of its
// pieces of eight, x[8c..8c+7] for c = t, t+256, …, in that order with fused
// multiply-adds: the pieces the decode mat-vec holds in registers
// (fused.cu), which sums them in the same order.
__device__ __forceinline__ float block_rms_scale(const float *x, int cols, float eps, float *part) {
	float s = 0;
	for (int c = threadIdx.x; threadIdx.x < 256 && 8 * c < cols; c += 256) // a block of 512 sums as one of 256 (mvw)
#pragma unroll
		for (int k = 0; k < 8; k++)
			if (8 * c + k < cols) s = fmaf(x[8 * c + k], x[8 * c + k], s);
	return 1.0f / sqrtf(block_sum(s, part) / cols + eps);
}

// rms_apply is one normalised element: x·scale, rounded, times the norm weight.
__device__ __forceinline__ float rms_apply(float x, float scale, float w) { return __fmul_rn(x, scale) * w; }

// rope_pair rotates features x0, x1 (pair j of a head) of a token at
// position p by θ = p·scale^j, with scale = base^(-2/dims) from the host; θ
// is stepped by repeated f32 multiplication as the CPU device does, then
// divided by the pair's frequency factor where the rope has them (freqs not
// null: Llama 3.1+), as ggml divides the stepped θ. Pairs at or past dims/2
// are copied.
// rope_sc is rope_pair's sine and cosine of θ for pair j (2j < dims), and
// rope_rot its turn of x0, x1 by them (MV_ROPE keeps a table of the first).
__device__ __forceinline__ void rope_sc(int p, int j, float scale, const float *freqs, float &s, float &c) {
	float theta = (float)p;
	for (int i = 0; i < j; i++) theta = __fmul_rn(theta, scale);
	if (freqs) theta = __fdiv_rn(theta, freqs[j]);
	sincosf(theta, &s, &c);
}

__device__ __forceinline__ void rope_rot(float x0, float x1, float s, float c, float &y0, float &y1) {
	y0 = fmaf(x0, c, -__fmul_rn(x1, s));
	y1 = fmaf(x0, s, __fmul_rn(x1, c));
}

__device__ __forceinline__ void rope_pair(float x0, float x1, int p, int j, int dims, float scale, const float *freqs, float &y0, float &y1) {
	if (2 * j >= dims) {
		y0 = x0, y1 = x1;
		return;
	}
	float s, c;
	rope_sc(p, j, scale, freqs, s, c);
	rope_rot(x0, x1, s, c, y0, y1);
}

// rope_feats returns the features f0, f1 of a head that its pair j turns
// together: 2j and 2j+1 in llama.cpp's normal mode; j and j+dims/2 in its
// NEOX mode (Qwen2, Qwen3), whose pairs past dims/2 (features dims and up,
// which no pair turns) are copied two by two as the normal mode's.
__device__ __forceinline__ void rope_feats(int j, int dims, bool neox, int &f0, int &f1) {
	if (neox && 2 * j < dims) {
		f0 = j, f1 = j + dims / 2;
	} else {
		f0 = 2 * j, f1 = 2 * j + 1;
	}
}

// silu_of is silu(g)·u = g/(1+e^-g)·u.
__device__ __forceinline__ float silu_of(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// row_dot is Σ W[row]·x over cols for one warp: lane l takes pieces l, l+32,
// … of the row (quant.cuh), one fused multiply-add chain per lane in element
// order within a piece, then any elements past the last whole piece (float
// types), then the lanes reduce by butterfly. The loop
// is unrolled so that a lane's loads are issued together.
template <int T>
__device__ __forceinline__ float row_dot(const uint8_t *r, const float *x, int cols, int lane) {
	float s = 0;
	int nc = cols / 8;
#pragma unroll 8
	for (int c = lane; c < nc; c += 32) {
		float w[8];
		int e0, e1;
		Q<T>::deq(r, c, w, e0, e1);
		float4 a = *(const float4 *)(x + e0), b = *(const float4 *)(x + e1);
		s = fmaf(w[0], a.x, s), s = fmaf(w[1], a.y, s), s = fmaf(w[2], a.z, s), s = fmaf(w[3], a.w, s);
		s = fmaf(w[4], b.x, s), s = fmaf(w[5], b.y, s), s = fmaf(w[6], b.z, s), s = fmaf(w[7], b.w, s);
	}
	if (Tail<T>::any)
		for (int e = 8 * nc + lane; e < cols; e += 32) s = fmaf(Tail<T>::one(r, e), x[e], s);
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
	return s;
}

// row_dot2 is row_dot of two rows r0, r1 against the same x in one loop, so
// that both rows' loads are in flight together; each sum is computed exactly
// as row_dot computes it.
template <int T>
__device__ __forceinline__ void row_dot2(const uint8_t *r0, const uint8_t *r1, const float *x, int nc, int lane, float &y0, float &y1) {
	float s = 0, t = 0;
#pragma unroll 4
	for (int c = lane; c < nc; c += 32) {
		float w[8], v[8];
		int e0, e1;
		Q<T>::deq(r0, c, w, e0, e1);
		Q<T>::deq(r1, c, v, e0, e1);
		float4 a = *(const float4 *)(x + e0), b = *(const float4 *)(x + e1);
		s = fmaf(w[0], a.x, s), s = fmaf(w[1], a.y, s), s = fmaf(w[2], a.z, s), s = fmaf(w[3], a.w, s);
		s = fmaf(w[4], b.x, s), s = fmaf(w[5], b.y, s), s = fmaf(w[6], b.z, s), s = fmaf(w[7], b.w, s);
		t = fmaf(v[0], a.x, t), t = fmaf(v[1], a.y, t), t = fmaf(v[2], a.z, t), t = fmaf(v[3], a.w, t);
		t = fmaf(v[4], b.x, t), t = fmaf(v[5], b.y, t), t = fmaf(v[6], b.z, t), t = fmaf(v[7], b.w, t);
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) {
		s += __shfl_xor_sync(0xffffffff, s, o);
		t += __shfl_xor_sync(0xffffffff, t, o);
	}
	y0 = s, y1 = t;
}
