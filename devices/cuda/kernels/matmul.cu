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
#include "tc.cuh"

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

// mmt_<type>, mmt64_<type> and mmt32_<type>: the same product for a batch
// (prefill) on tensor cores (mma.sync m16n8k16): weights decoded as above
// and rounded to f16, activations already rounded to f16 by to_f16, f32
// sums. A block computes a tile of MT = 64 weight rows × NK tokens (128,
// 64, or 32 where more would leave most of the GPU without a tile), each
// warp a corner of 32 rows × WT = 32 tokens (eight warps in a 128-token
// tile), stepping k by KT = 32 (one block of the 32-element types; an
// eighth of a K-quant super-block). The kernel is bound by the latency of
// its steps, not by the tensor cores (ncu, Q4_K 4096×4096 at 512 tokens:
// 18% of the tensor pipe busy, two blocks a multiprocessor): eight warps of
// 32 × 32 in place of four of 32 × 64 in the 128-token tiles measured 157
// -> 131 µs there and Llama-7B Q4_K_M's pp512 7.9k -> 8.9k tok/s.
//
// Everything a step reads from device memory arrives by cp.async, ahead of
// use: the tile's weight bytes a chunk of CH = 256 columns at a time (one
// super-block of the K-quants, eight blocks of the others; each row's bytes
// copied in 16-byte pieces where they are aligned, else in 4-byte words from
// its start rounded down to 4), a chunk ahead; the activations' f16 tile
// AHEAD steps ahead, in AHEAD+1 stages. Each step's copies are one group, and
// a step waits only for the group of the step after it. The weights are decoded from shared
// memory into an f16 stage while the other stage is being multiplied
// (fragments by ldmatrix), so a step waits on neither. The L1/shared pipe
// was what limited the kernel when each step loaded weights and f32
// activations itself (ncu: 83% of its throughput, the SM issuing 44%).
// cols must be a multiple of 32; partial tiles of rows or tokens are padded
// with zeros and not written. Rounding the inputs to f16 costs at most ~1e-3
// of Σ|w·x| per output (checked by TestMatMul), less than the CPU device's
// 8-bit activations; F32 weights keep the f32 kernels.
//
// Split-K: blockIdx.y counts tt token tiles for each of the slices of ks
// columns (a multiple of CH); slice z sums columns [z·ks, z·ks+ks) only and
// writes its partial product to Y + z·n·rows, which mmt_sum then adds up in
// the order of z. A tile's speed grows with the tiles each multiprocessor
// holds, so a mat-mul of few tiles is split until it has about mmtBlocks
// (run_cuda.go).
#define MT 64  // rows per tile
#define KT 32  // k per step
#define CH 256 // k per chunk of weight bytes
#define KP 40  // padded row of a shared tile, in halves: ldmatrix's eight rows of 80 bytes hit 32 distinct banks
#define AHEAD 2 // steps the activations are copied ahead (at most 7: a chunk's bytes are waited for with the step 7 after their copy's)

// mmt's dynamic shared memory: two stages of decoded weights (MT·KP halves
// each), AHEAD+1 of activations (NK·KP halves), and two chunks of weight
// bytes (MT rows of rs bytes each), mmtShared in run_cuda.go.
template <int NK, int WT, int T>
__device__ __forceinline__ void mmt(const uint8_t *W, long long rb, int cb, int rs, const half *X, float *Y, int rows, int r0, int cols, int n,
                                    int ks, int tt) {
	constexpr int WN = NK / WT, THREADS = 2 * WN * 32, NF = WT / 8, WARPS = THREADS / 32;
	constexpr int NB = AHEAD + 1;                             // activation stages
	constexpr int PX = NK * 4 / THREADS, PW = MT * 4 / THREADS; // a thread's activation pieces and weight pieces a step
	extern __shared__ __align__(16) uint8_t smem[];
	half *A = (half *)smem;                    // [2][MT·KP]: decoded weights
	half *B = A + 2 * MT * KP;                 // [NB][NK·KP]: activations
	uint8_t *R = (uint8_t *)(B + NB * NK * KP); // [2][MT·rs]: the weights' bytes of a chunk
	int z = blockIdx.y / tt, kbeg = z * ks, kend = min(cols, kbeg + ks);
	Y += (long long)z * n * rows;
	int t0 = (blockIdx.y % tt) * NK;
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int wr = (warp / WN) * 32, wt = (warp % WN) * WT;
	float acc[2][NF][4];
#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < NF; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0;
	// Everything a step recomputes is an offset from what is set here: the
	// activation pieces' sources (from column kbeg) and places in a stage,
	// the weight pieces' rows, and the lanes' ldmatrix offsets.
	const half *xs[PX];
	uint32_t xd[PX], xn[PX];
#pragma unroll
	for (int i = 0; i < PX; i++) {
		int q = threadIdx.x + i * THREADS, t = q >> 2, e = 8 * (q & 3);
		bool in = t0 + t < n;
		xs[i] = in ? X + (long long)(t0 + t) * cols + kbeg + e : X;
		xd[i] = 2 * (t * KP + e), xn[i] = in ? 16 : 0;
	}
	uint32_t a0 = smem_addr(A), b0 = smem_addr(B);
	uint32_t aoff[2], boff[NF / 2];
#pragma unroll
	for (int i = 0; i < 2; i++) aoff[i] = 2 * ((wr + 16 * i + (lane & 15)) * KP + 8 * (lane >> 4));
#pragma unroll
	for (int j = 0; j < NF; j += 2) boff[j / 2] = 2 * ((wt + 8 * j + (lane & 7) + 8 * (lane >> 4)) * KP + 8 * ((lane >> 3) & 1));
	auto issueB = [&](int stage, int k) { // k: columns past kbeg
#pragma unroll
		for (int i = 0; i < PX; i++) cp_async16(smem + (B - A) * 2 + stage * NK * KP * 2 + xd[i], xs[i] + k, xn[i]);
	};
	// A chunk's bytes: [off, off+bytes) of each row, from off rounded down
	// to 4 (rows start at multiples of 16: row strides are padded to 16).
	auto issueR = [&](int buf, int c0) {
		if (T == T_Q6_K) {
			// A regrouped Q6_K block (q6_grp; a chunk is one block): its
			// ql, qh and scales to the file's places, 16 bytes a copy, and
			// the aligned word that holds its d at 208 (d at 208 + 2·(b%2));
			// fourteen copies a row, a half-warp's lanes p = 0..13 a row.
			int b = c0 / CH, p = lane & 15;
			for (int r = 2 * warp + (lane >> 4); r < MT; r += 2 * WARPS) {
				if (r0 + r >= rows || p >= 14) continue;
				const uint8_t *g = W + (long long)(r0 + r) * rb + q6_grp(b);
				uint8_t *dst = R + buf * MT * rs + r * rs;
				if (p < 8)
					cp_async16(dst + 16 * p, q6_ql(g, b) + 16 * p, 16);
				else if (p < 12)
					cp_async16(dst + 16 * p, q6_qh(g, b) + 16 * (p - 8), 16);
				else if (p == 12)
					cp_async16(dst + 192, q6_sc(g, b), 16);
				else
					cp_async4(dst + 208, q6_d(g, b) - 2 * (b & 1));
			}
			return;
		}
		long long off = (long long)(c0 / CH) * cb;
		// (Q4_0's and Q8_0's regrouped rows: a whole group, padded.)
		int bytes = T == T_Q4_0 || T == T_Q8_0 ? cb : (int)((long long)min(CH, kend - c0) * cb / CH);
		bool whole = ((off | bytes) & 15) == 0;
		int words = whole ? bytes / 16 : (int)((off + bytes + 3) / 4 - off / 4);
		for (int r = warp; r < MT; r += WARPS) {
			if (r0 + r >= rows) continue;
			const uint8_t *src = W + (long long)(r0 + r) * rb + (off & ~3LL);
			uint8_t *dst = R + buf * MT * rs + r * rs;
			if (whole)
				for (int w = lane; w < words; w += 32) cp_async16(dst + 16 * w, src + 16 * w, 16);
			else
				for (int w = lane; w < words; w += 32) cp_async4(dst + 4 * w, src + 4 * w);
		}
	};
	// Step k (columns past kbeg) decoded into stage buf, from the chunk's
	// bytes at raw (its buffer, past the row start's rounding).
	auto decodeA = [&](int buf, int k, const uint8_t *raw) {
		int b = k % CH;
#pragma unroll
		for (int i = 0; i < PW; i++) {
			int p = threadIdx.x + i * THREADS, r = p >> 2;
			half *a = A + buf * MT * KP + r * KP;
			if (r0 + r < rows) {
				float w[8];
				int e0, e1;
				if (T == T_Q6_K) {
					const uint8_t *q = raw + r * rs; // issueR's block
					q6_deq(q, q + 128, q + 192, f16(q + 208 + 2 * (((kbeg + k) / CH) & 1)), (b >> 3) + (p & 3), w, e0, e1);
				} else {
					Q<T>::deq(raw + r * rs, (b >> 3) + (p & 3), w, e0, e1);
				}
				*(uint2 *)(a + e0 - b) = make_uint2(half2_bits(w[0], w[1]), half2_bits(w[2], w[3]));
				*(uint2 *)(a + e1 - b) = make_uint2(half2_bits(w[4], w[5]), half2_bits(w[6], w[7]));
			} else {
				*(uint4 *)(a + 8 * (p & 3)) = make_uint4(0, 0, 0, 0);
			}
		}
	};
	// raw returns chunk c's bytes in its buffer, past the row start's rounding.
	auto raw = [&](int c) { return R + (c & 1) * MT * rs + (T == T_Q6_K ? 0 : (int)(((long long)(kbeg / CH + c) * cb) & 3)); };
	int steps = (kend - kbeg) / KT;
	// Group j holds step j's activations (and, from the loop, a chunk's
	// bytes); the prologue's first also chunk 0's.
	issueR(0, kbeg);
#pragma unroll
	for (int j = 0; j < AHEAD; j++) {
		if (j < steps) issueB(j, j * KT);
		cp_async_commit();
	}
	cp_async_wait<AHEAD - 1>();
	__syncthreads();
	decodeA(0, 0, raw(0));
	__syncthreads();
	int sb = 0, sn = AHEAD; // the stages step s reads and step s+AHEAD fills
	for (int s = 0; s < steps; s++) {
		int k = s * KT;
		// Stage sn was read in step s-1, before its barrier.
		if (s + AHEAD < steps) issueB(sn, k + AHEAD * KT);
		// The next chunk's bytes, a chunk ahead: its buffer was last read
		// by the decode of this chunk's first step, two barriers ago; they
		// are waited for with step s+AHEAD's activations, before the decode
		// of the next chunk's first step (AHEAD ≤ 7).
		if (k % CH == 0 && kbeg + k + CH < kend) issueR((k / CH + 1) & 1, kbeg + k + CH);
		cp_async_commit();
		uint32_t abase = a0 + (s & 1) * MT * KP * 2, bbase = b0 + sb * NK * KP * 2;
#pragma unroll
		for (int kk = 0; kk < KT; kk += 16) {
			uint32_t af[2][4], bf[NF][2];
#pragma unroll
			for (int i = 0; i < 2; i++) ldmatrix_x4(af[i], abase + aoff[i] + 2 * kk);
#pragma unroll
			for (int j = 0; j < NF; j += 2) {
				uint32_t q[4];
				ldmatrix_x4(q, bbase + boff[j / 2] + 2 * kk);
				bf[j][0] = q[0], bf[j][1] = q[1], bf[j + 1][0] = q[2], bf[j + 1][1] = q[3];
			}
#pragma unroll
			for (int i = 0; i < 2; i++)
#pragma unroll
				for (int j = 0; j < NF; j++) mma_f16(acc[i][j], af[i], bf[j][0], bf[j][1]);
		}
		if (s + 1 < steps) decodeA((s + 1) & 1, k + KT, raw((k + KT) / CH));
		sb = sb + 1 == NB ? 0 : sb + 1, sn = sn + 1 == NB ? 0 : sn + 1;
		// Step s+1's activations (group s+1) must have landed; the AHEAD-1
		// newer groups may still be in flight.
		cp_async_wait<AHEAD - 1>();
		__syncthreads();
	}
	// Fragment c0, c1 are row g, tokens 2·tig and 2·tig+1; c2, c3 row g+8.
	int g = lane >> 2, tig = lane & 3;
#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < NF; j++) {
			int r = r0 + wr + 16 * i + g, t = t0 + wt + 8 * j + 2 * tig;
			if (r < rows) {
				if (t < n) Y[(long long)t * rows + r] = acc[i][j][0];
				if (t + 1 < n) Y[(long long)(t + 1) * rows + r] = acc[i][j][1];
			}
			if (r + 8 < rows) {
				if (t < n) Y[(long long)t * rows + r + 8] = acc[i][j][2];
				if (t + 1 < n) Y[(long long)(t + 1) * rows + r + 8] = acc[i][j][3];
			}
		}
}

#define MMT_PARAMS                                                                                                              \
	const uint8_t *W0, const uint8_t *W1, const uint8_t *W2, long long rb, int cb, int rs, const half *X, float *Y0, float *Y1, float *Y2, \
	    int rows0, int rows1, int rows2, int cols, int n, int ks, int tt
#define MMT_PICK                                                                        \
	const uint8_t *W;                                                                   \
	float *Y;                                                                           \
	int rows, r0;                                                                       \
	pick3(W0, W1, W2, Y0, Y1, Y2, rows0, rows1, rows2, W, Y, rows, r0);
#define MMT(id, name)                                                                                         \
	extern "C" __global__ void __launch_bounds__(256) mmt_##name(MMT_PARAMS) {                                \
		MMT_PICK mmt<128, 32, id>(W, rb, cb, rs, X, Y, rows, r0, cols, n, ks, tt);                            \
	}                                                                                                         \
	extern "C" __global__ void __launch_bounds__(128) mmt64_##name(MMT_PARAMS) {                              \
		MMT_PICK mmt<64, 32, id>(W, rb, cb, rs, X, Y, rows, r0, cols, n, ks, tt);                             \
	}                                                                                                         \
	extern "C" __global__ void __launch_bounds__(64) mmt32_##name(MMT_PARAMS) {                               \
		MMT_PICK mmt<32, 32, id>(W, rb, cb, rs, X, Y, rows, r0, cols, n, ks, tt);                             \
	}
FOR_TYPES(MMT)

// mmt4w_q4_0: Q4_0's 128-token tiles with four warps of 32 rows × 64 tokens,
// as all types ran them before: Q4_0's cheap decode leaves its steps less to
// hide, and measured 5-7% slower with eight warps (TestPrefillMatMul: 5632 ×
// 2048 86.8-87.6 against 92.8 µs, 11008 × 4096 324.8-328.1 against 341.2).
extern "C" __global__ void __launch_bounds__(128) mmt4w_q4_0(MMT_PARAMS) {
	MMT_PICK mmt<128, 64, T_Q4_0>(W, rb, cb, rs, X, Y, rows, r0, cols, n, ks, tt);
}

// to_f16 rounds n floats (a multiple of 4) to f16, a prefill mat-mul's
// activations before the mmt kernels read them.
extern "C" __global__ void to_f16(const float *x, half *y, long long n) {
	long long i = 4 * (blockIdx.x * (long long)blockDim.x + threadIdx.x);
	if (i >= n) return;
	float4 v = *(const float4 *)(x + i);
	*(uint2 *)(y + i) = make_uint2(half2_bits(v.x, v.y), half2_bits(v.z, v.w));
}

// deq16_<type> decodes rows [r0, r0+rows) of W (cols a multiple of 8) to a
// row-major f16 matrix Y of rows × cols, each weight rounded to f16 as mmt
// rounds it (the same Q<T>::deq and half2_bits), for a prefill mat-mul on
// cuBLAS (blas_cuda.go). Thread p takes piece p % (cols/8) of row p / (cols/8):
// a warp reads consecutive bytes of a row.
template <int T>
__device__ __forceinline__ void deq16(const uint8_t *W, long long rb, half *Y, int r0, int rows, int cols) {
	int per = cols >> 3;
	long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (p >= (long long)rows * per) return;
	int r = (int)(p / per), c = (int)(p % per);
	float w[8];
	int e0, e1;
	Q<T>::deq(W + (long long)(r0 + r) * rb, c, w, e0, e1);
	half *y = Y + (long long)r * cols;
	*(uint2 *)(y + e0) = make_uint2(half2_bits(w[0], w[1]), half2_bits(w[2], w[3]));
	*(uint2 *)(y + e1) = make_uint2(half2_bits(w[4], w[5]), half2_bits(w[6], w[7]));
}
#define DEQ16(id, name)                                                                                                   \
	extern "C" __global__ void deq16_##name(const uint8_t *W, long long rb, half *Y, int r0, int rows, int cols) { \
		deq16<id>(W, rb, Y, r0, rows, cols);                                                                           \
	}
FOR_TYPES(DEQ16)

// mmt_sum adds a split-K mat-mul's S partial products of N floats, P[z·N+i],
// in the order of z, into Y[i].
extern "C" __global__ void mmt_sum(const float *P, float *Y, long long N, int S) {
	long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (i >= N) return;
	float s = P[i];
	for (int z = 1; z < S; z++) s += P[z * N + i];
	Y[i] = s;
}
