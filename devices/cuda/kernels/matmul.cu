// matmul.cu: y[t, r] = Σ_k W[r, k]·x[t, k] for a weight W of rows×cols in its
// GGUF type and f32 activations x of n rows, f32 accumulation throughout (no
// activation quantization).
//
// Layout: one warp per weight row, four warps per block; lane l decodes
// pieces l, l+32, … (8 weights each) of the row in registers (quant.cuh), so
// a warp reads consecutive bytes of its row, and dots each piece with NT activation rows
// at once (NT = 1: mat-vec for decode of the float types, and of block types
// whose row is too long to stage, the others decoding on 8-bit activations in
// fused.cu; NT = 8: a simple batched version that
// reads the weights once per 8 tokens). Bound: memory for NT = 1 (weights
// read once); the batched version re-reads weights from L2 per 8 tokens and
// is far from the FLOP rate of tensor cores.
#include "common.cuh"

template <int T, int NT>
__device__ __forceinline__ void matmul(const uint8_t *W, long long rowBytes, const float *X, float *Y, int rows, int cols, int n) {
	int lane = threadIdx.x & 31, row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	int t0 = blockIdx.y * NT;
	if (row >= rows) return;
	const uint8_t *r = W + row * rowBytes;
	float acc[NT];
#pragma unroll
	for (int t = 0; t < NT; t++) acc[t] = 0;
	int nc = cols / 8;
#pragma unroll 4
	for (int c = lane; c < nc; c += 32) {
		float w[8];
		int e0, e1;
		Q<T>::deq(r, c, w, e0, e1);
#pragma unroll
		for (int t = 0; t < NT; t++) {
			if (t0 + t < n) {
				const float *x = X + (long long)(t0 + t) * cols;
				float4 a = *(const float4 *)(x + e0), b = *(const float4 *)(x + e1);
				float s = acc[t];
				s = fmaf(w[0], a.x, s), s = fmaf(w[1], a.y, s), s = fmaf(w[2], a.z, s), s = fmaf(w[3], a.w, s);
				s = fmaf(w[4], b.x, s), s = fmaf(w[5], b.y, s), s = fmaf(w[6], b.z, s), s = fmaf(w[7], b.w, s);
				acc[t] = s;
			}
		}
	}
	if (Tail<T>::any)
		for (int e = 8 * nc + lane; e < cols; e += 32) {
			float w = Tail<T>::one(r, e);
#pragma unroll
			for (int t = 0; t < NT; t++)
				if (t0 + t < n) acc[t] = fmaf(w, X[(long long)(t0 + t) * cols + e], acc[t]);
		}
#pragma unroll
	for (int t = 0; t < NT; t++) {
		float s = acc[t];
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
		if (lane == 0 && t0 + t < n) Y[(long long)(t0 + t) * rows + row] = s;
	}
}

#define MATMUL(id, name)                                                                                           \
	extern "C" __global__ void matvec_##name(const uint8_t *W, long long rb, const float *X, float *Y, int rows, int cols, int n) { \
		int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);                                             \
		if (row >= rows) return;                                                                                   \
		float s = row_dot<id>(W + row * rb, X, cols, threadIdx.x & 31);                                       \
		if ((threadIdx.x & 31) == 0) Y[row] = s;                                                                   \
	}                                                                                                              \
	extern "C" __global__ void matmul8_##name(const uint8_t *W, long long rb, const float *X, float *Y, int rows, int cols, int n) { \
		matmul<id, 8>(W, rb, X, Y, rows, cols, n);                                                                 \
	}
FOR_TYPES(MATMUL)
