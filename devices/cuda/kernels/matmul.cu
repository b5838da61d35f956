// matmul.cu: y[t, r] = Σ_k W[r, k]·x[t, k] for a weight W of rows×cols in its
// GGUF type and f32 activations x of n rows, f32 accumulation throughout: in
// f32 (matvec, matmul8), or with weights and activations rounded to f16 on
// tensor cores (mmt, batches of 32 or more). The decode mat-vec of the block
// types, on 8-bit activations, is in fused.cu and q8.cuh.
//
// Layout: one warp per weight row, four warps per block; lane l decodes
// pieces l, l+32, … (8 weights each) of the row in registers (quant.cuh), so
// a warp reads consecutive bytes of its row, and dots each piece with NT activation rows
// at once (NT = 1: mat-vec for decode of the float types, and of block types
// whose row is too long to stage, the others decoding on 8-bit activations in
// fused.cu; NT = 8: batches under 32 tokens of the float types and of such
// long rows, and F32 weights, reading the weights once per 8 tokens; the
// other block types' small batches run mvb in fused.cu). Bound: memory for NT = 1 (weights read once);
// the batched version re-reads weights from L2 per 8 tokens and is far from
// the FLOP rate of tensor cores, which mmt below uses.
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

// mmt_<type> and mmt32_<type>: the same product for a batch (prefill) on
// tensor cores, through the WMMA API: weights decoded as above and rounded to
// f16, activations rounded to f16, f32 accumulation. A block of four warps
// computes a tile of 64 weight rows × NK tokens (64, or 32 where 64 would
// leave most of the GPU without a tile), stepping k by 32 (one block of the
// 32-element types; an eighth of a K-quant super-block): it decodes the 64×32
// weight tile and converts the NK×32 activation tile into shared memory, and
// each warp multiplies its 32×NK/2 corner as fragments of 16×16. cols must be
// a multiple of 32; partial tiles of rows or tokens are padded with zeros and
// not written. Rounding the inputs to f16 costs at most ~1e-3 of Σ|w·x| per
// output (checked by TestMatMul), less than the CPU device's 8-bit
// activations; F32 weights keep the f32 kernels.
//
// Split-K: blockIdx.y counts tt token tiles for each of the slices of ks
// columns (a multiple of KT); slice z sums columns [z·ks, z·ks+ks) only and
// writes its partial product to Y + z·n·rows, which mmt_sum then adds up in
// the order of z. A tile's speed grows with the tiles each multiprocessor
// holds (ncu on the H100: 64 tiles of TinyLlama's K projection ran at 4
// TFLOPS, 256 of its Q projection at 23, 704 of its FFN's at 59), so a
// mat-mul of few tiles is split until it has about mmtBlocks (run_cuda.go).
#include <mma.h>

#define MT 64  // rows per tile
#define KT 32  // k per step
#define KP 40  // padded row of a shared tile, in halves (multiple of 8)
#define CP 68  // padded column of the output tile, in floats (multiple of 4)

template <int T, int NK>
__device__ __forceinline__ void mmt(const uint8_t *W, long long rb, const float *X, float *Y, int rows, int cols, int n, int ks, int tt) {
	using namespace nvcuda;
	const int FT = NK / 32; // fragments of tokens per warp
	__shared__ __align__(32) half A[MT * KP], B[NK * KP];
	__shared__ __align__(32) float C[NK * CP];
	int z = blockIdx.y / tt, kbeg = z * ks, kend = min(cols, kbeg + ks);
	Y += (long long)z * n * rows;
	int r0 = blockIdx.x * MT, t0 = (blockIdx.y % tt) * NK, warp = threadIdx.x >> 5;
	int wr = (warp >> 1) * 32, wt = (warp & 1) * (NK / 2);
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][FT];
#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < FT; j++) wmma::fill_fragment(acc[i][j], 0.0f);
	for (int k0 = kbeg; k0 < kend; k0 += KT) {
		// Weights: 64 rows × 4 pieces of 8, two pieces per thread.
		for (int p = threadIdx.x; p < MT * 4; p += blockDim.x) {
			int r = p >> 2, c = (k0 >> 3) + (p & 3);
			half *a = A + r * KP;
			if (r0 + r < rows) {
				float w[8];
				int e0, e1;
				Q<T>::deq(W + (long long)(r0 + r) * rb, c, w, e0, e1);
#pragma unroll
				for (int i = 0; i < 4; i++) a[e0 - k0 + i] = __float2half_rn(w[i]), a[e1 - k0 + i] = __float2half_rn(w[4 + i]);
			} else {
#pragma unroll
				for (int i = 0; i < 8; i++) a[8 * (p & 3) + i] = __float2half_rn(0.0f);
			}
		}
		// Activations: NK tokens × 32, four at a time.
		for (int q = threadIdx.x; q < NK * KT / 4; q += blockDim.x) {
			int t = q >> 3, e = 4 * (q & 7);
			float4 v = make_float4(0, 0, 0, 0);
			if (t0 + t < n) v = *(const float4 *)(X + (long long)(t0 + t) * cols + k0 + e);
			half *b = B + t * KP + e;
			b[0] = __float2half_rn(v.x), b[1] = __float2half_rn(v.y), b[2] = __float2half_rn(v.z), b[3] = __float2half_rn(v.w);
		}
		__syncthreads();
#pragma unroll
		for (int kk = 0; kk < KT; kk += 16) {
			wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa[2];
			wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb[FT];
#pragma unroll
			for (int i = 0; i < 2; i++) wmma::load_matrix_sync(fa[i], A + (wr + 16 * i) * KP + kk, KP);
#pragma unroll
			for (int j = 0; j < FT; j++) wmma::load_matrix_sync(fb[j], B + (wt + 16 * j) * KP + kk, KP);
#pragma unroll
			for (int i = 0; i < 2; i++)
#pragma unroll
				for (int j = 0; j < FT; j++) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
		}
		__syncthreads();
	}
	// C[r][t] in column-major tiles (token t's 64 rows contiguous), then
	// written where inside the matrix, token by token (coalesced over rows).
#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < FT; j++) wmma::store_matrix_sync(C + (wt + 16 * j) * CP + wr + 16 * i, acc[i][j], CP, wmma::mem_col_major);
	__syncthreads();
	for (int q = threadIdx.x; q < MT * NK; q += blockDim.x) {
		int t = q / MT, r = q % MT;
		if (r0 + r < rows && t0 + t < n) Y[(long long)(t0 + t) * rows + r0 + r] = C[t * CP + r];
	}
}

#define MMT(id, name)                                                                                                       \
	extern "C" __global__ void __launch_bounds__(128) mmt_##name(const uint8_t *W, long long rb, const float *X, float *Y, int rows, \
	                                                             int cols, int n, int ks, int tt) {                           \
		mmt<id, 64>(W, rb, X, Y, rows, cols, n, ks, tt);                                                                        \
	}                                                                                                                           \
	extern "C" __global__ void __launch_bounds__(128) mmt32_##name(const uint8_t *W, long long rb, const float *X, float *Y,      \
	                                                               int rows, int cols, int n, int ks, int tt) {                 \
		mmt<id, 32>(W, rb, X, Y, rows, cols, n, ks, tt);                                                                        \
	}
FOR_TYPES(MMT)

// mmt_sum adds a split-K mat-mul's S partial products of N floats, P[z·N+i],
// in the order of z, into Y[i].
extern "C" __global__ void mmt_sum(const float *P, float *Y, long long N, int S) {
	long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (i >= N) return;
	float s = P[i];
	for (int z = 1; z < S; z++) s += P[z * N + i];
	Y[i] = s;
}
