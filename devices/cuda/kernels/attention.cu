// attention.cu: causal grouped-query softmax attention of n query rows over
// the layer's f16 KV cache (ctx × kvHeads·headDim binary16, keys and values
// already appended at pos..pos+n-1, rounded to nearest as the CPU device's
// cache is), computed in f32. Query row i sees cache positions 0..pos+i.
//
// In a batched step of several sequences (rowp not null), query row i is
// its own sequence's: at position rowp[2i] of the sequence whose cells start
// at cell rowp[2i+1], it sees that sequence's cells 0..rowp[2i].
//
// Layout: one block per (query head, query row), ATT_WARPS warps; warp w
// takes keys w, w+ATT_WARPS, … with an online softmax (running max, sum and
// value accumulator per warp; lane l holds features l, l+32, …), then the
// warps' partial results are merged through shared memory. Bound: reading the
// cache; a decode step has only `heads` blocks, so long contexts would want
// the span split over more blocks (flash-decoding), not done yet.
#include <math.h>
#include <cuda_fp16.h>

#define ATT_WARPS 16 // attWarps in run_cuda.go

// MAX_T is the features a lane holds, headDim/32 rounded up: attention (8,
// head dims up to 256) loops over all of them, predicated, for any head
// size; attention_t2 and attention_t4 (head dims up to 64 and 128) are the
// same code with the loops cut to what those heads use. TinyLlama's (64)
// prompt attention took 626 µs a layer at pp512 on the H100 in the general
// one, 44% of the prefill (ncu).
template <int MAX_T>
__device__ __forceinline__ void attn(const float *q, const __half *kc, const __half *vc, float *out, int heads, int kvHeads,
                                     int headDim, const int *posp, float scale, const int *rowp) {
	int pos = *posp; // the step's position, read from the device
	__shared__ float sm[ATT_WARPS][2 + 32 * MAX_T];
	int h = blockIdx.x, i = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	int dim = kvHeads * headDim, kh = (h / (heads / kvHeads)) * headDim, span = pos + i + 1;
	if (rowp) {
		span = rowp[2 * i] + 1;
		long long cell = rowp[2 * i + 1];
		kc += cell * dim, vc += cell * dim;
	}
	const float *qi = q + ((long long)i * heads + h) * headDim;
	float qr[MAX_T], acc[MAX_T];
#pragma unroll
	for (int t = 0; t < MAX_T; t++) {
		int f = lane + 32 * t;
		qr[t] = f < headDim ? qi[f] : 0;
		acc[t] = 0;
	}
	float m = -INFINITY, s = 0;
	for (int j = warp; j < span; j += ATT_WARPS) {
		const __half *kr = kc + (long long)j * dim + kh, *vr = vc + (long long)j * dim + kh;
		float dot = 0;
#pragma unroll
		for (int t = 0; t < MAX_T; t++) {
			int f = lane + 32 * t;
			if (f < headDim) dot = fmaf(qr[t], __half2float(kr[f]), dot);
		}
		for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffff, dot, o);
		float x = dot * scale, p = 1, corr = 1;
		if (x > m) {
			corr = expf(m - x);
			m = x;
		} else {
			p = expf(x - m);
		}
		s = s * corr + p;
#pragma unroll
		for (int t = 0; t < MAX_T; t++) {
			int f = lane + 32 * t;
			if (f < headDim) acc[t] = acc[t] * corr + p * __half2float(vr[f]);
		}
	}
	if (lane == 0) sm[warp][0] = m, sm[warp][1] = s;
#pragma unroll
	for (int t = 0; t < MAX_T; t++) sm[warp][2 + lane + 32 * t] = acc[t];
	__syncthreads();
	float M = -INFINITY;
	for (int w = 0; w < ATT_WARPS; w++) M = fmaxf(M, sm[w][0]);
	float S = 0, f[ATT_WARPS];
	for (int w = 0; w < ATT_WARPS; w++) {
		f[w] = sm[w][1] > 0 ? expf(sm[w][0] - M) : 0;
		S += sm[w][1] * f[w];
	}
	float *o = out + ((long long)i * heads + h) * headDim;
	for (int d = threadIdx.x; d < headDim; d += blockDim.x) {
		float v = 0;
		for (int w = 0; w < ATT_WARPS; w++) v += sm[w][2 + d] * f[w];
		o[d] = v / S;
	}
}

#define ATTENTION(name, t)                                                                                                   \
	extern "C" __global__ void name(const float *q, const __half *kc, const __half *vc, float *out, int heads, int kvHeads, \
	                                int headDim, const int *posp, float scale, const int *rowp) {                           \
		attn<t>(q, kc, vc, out, heads, kvHeads, headDim, posp, scale, rowp);                                                \
	}
ATTENTION(attention, 8)
ATTENTION(attention_t2, 2)
ATTENTION(attention_t4, 4)
