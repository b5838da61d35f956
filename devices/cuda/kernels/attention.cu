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
// cache; long spans are split over several blocks (below).
#include <math.h>
#include <cuda_fp16.h>
#include <stdint.h>

#define ATT_WARPS 16 // attWarps in run_cuda.go

// MAX_T is the features a lane holds, headDim/32 rounded up: attention (8,
// head dims up to 256) loops over all of them, predicated, for any head
// size; attention_t2 and attention_t4 (head dims up to 64 and 128) are the
// same code with the loops cut to what those heads use. TinyLlama's (64)
// prompt attention took 626 µs a layer at pp512 on the H100 in the general
// one, 44% of the prefill (ncu).
//
// Split spans (flash-decoding): blockIdx.y is row·S + z, and the span a row
// sees is cut into parts of at least ATT_SPLIT keys, at most S of them; block
// z takes part z (a block past the last part returns at once). With one
// part the block writes the row's output itself. With more, each block
// writes its part's maximum, sum and unnormalised output to part, and the
// last block of the row and head to finish (counted in count, which it
// resets) merges them in the order of z. A decode step at depth 4096 has 16
// blocks a head instead of one. The parts depend only on the row's span, so
// a row of a batched step computes what the same row's decode step does.
#define ATT_SPLIT 256 // the fewest keys of a part (attSplit in run_cuda.go)
#define ATT_PARTS 16  // the most parts (attParts in run_cuda.go)
template <int MAX_T>
__device__ __forceinline__ void attn(const float *q, const __half *kc, const __half *vc, float *out, int heads, int kvHeads,
                                     int headDim, const int *posp, float scale, const int *rowp, float *part, int *count, int S) {
	int pos = *posp; // the step's position, read from the device
	__shared__ float sm[ATT_WARPS][2 + 32 * MAX_T];
	__shared__ float fz[ATT_PARTS];
	__shared__ int last;
	int h = blockIdx.x, i = blockIdx.y / S, z = blockIdx.y % S, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	int dim = kvHeads * headDim, kh = (h / (heads / kvHeads)) * headDim, span = pos + i + 1;
	if (rowp) {
		span = rowp[2 * i] + 1;
		long long cell = rowp[2 * i + 1];
		kc += cell * dim, vc += cell * dim;
	}
	int chunk = max(ATT_SPLIT, (span + S - 1) / S), parts = (span + chunk - 1) / chunk;
	if (z >= parts) return;
	int lo = z * chunk, hi = min(span, lo + chunk);
	const float *qi = q + ((long long)i * heads + h) * headDim;
	float qr[MAX_T], acc[MAX_T];
#pragma unroll
	for (int t = 0; t < MAX_T; t++) {
		int f = lane + 32 * t;
		qr[t] = f < headDim ? qi[f] : 0;
		acc[t] = 0;
	}
	float m = -INFINITY, s = 0;
	for (int j = lo + warp; j < hi; j += ATT_WARPS) {
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
	float S1 = 0, f[ATT_WARPS];
	for (int w = 0; w < ATT_WARPS; w++) {
		f[w] = sm[w][1] > 0 ? expf(sm[w][0] - M) : 0;
		S1 += sm[w][1] * f[w];
	}
	float *o = out + ((long long)i * heads + h) * headDim;
	if (parts == 1) {
		for (int d = threadIdx.x; d < headDim; d += blockDim.x) {
			float v = 0;
			for (int w = 0; w < ATT_WARPS; w++) v += sm[w][2 + d] * f[w];
			o[d] = v / S1;
		}
		return;
	}
	long long row = (long long)i * heads + h;
	float *pp = part + (row * S + z) * (2 + headDim);
	for (int d = threadIdx.x; d < headDim; d += blockDim.x) {
		float v = 0;
		for (int w = 0; w < ATT_WARPS; w++) v += sm[w][2 + d] * f[w];
		pp[2 + d] = v;
	}
	if (threadIdx.x == 0) pp[0] = M, pp[1] = S1;
	__threadfence();
	__syncthreads();
	if (threadIdx.x == 0) last = atomicAdd(count + row, 1) == parts - 1;
	__syncthreads();
	if (!last) return;
	__threadfence();
	const float *pr = part + row * S * (2 + headDim);
	if (threadIdx.x == 0) {
		float Mx = -INFINITY;
		for (int y = 0; y < parts; y++) Mx = fmaxf(Mx, __ldcg(pr + y * (2 + headDim)));
		float tot = 0;
		for (int y = 0; y < parts; y++) {
			float sy = __ldcg(pr + y * (2 + headDim) + 1);
			fz[y] = sy > 0 ? expf(__ldcg(pr + y * (2 + headDim)) - Mx) : 0;
			tot += sy * fz[y];
		}
		sm[0][0] = tot;
		count[row] = 0;
	}
	__syncthreads();
	float tot = sm[0][0];
	for (int d = threadIdx.x; d < headDim; d += blockDim.x) {
		float v = 0;
		for (int y = 0; y < parts; y++) v += __ldcg(pr + y * (2 + headDim) + 2 + d) * fz[y];
		o[d] = v / tot;
	}
}

#define ATTENTION(name, t)                                                                                                   \
	extern "C" __global__ void name(const float *q, const __half *kc, const __half *vc, float *out, int heads, int kvHeads, \
	                                int headDim, const int *posp, float scale, const int *rowp, float *part, int *count, int S) { \
		attn<t>(q, kc, vc, out, heads, kvHeads, headDim, posp, scale, rowp, part, count, S);                                \
	}
ATTENTION(attention, 8)
ATTENTION(attention_t2, 2)
ATTENTION(attention_t4, 4)

// attention_g<D>_<GM>: the same attention as attention_t2/t4 for steps of
// a few rows (decode, batched decode), by key-value head instead of by query
// head, for head sizes 64 and 128. A block takes up to GM of the query heads
// that share one key-value head (grouped-query attention: TinyLlama's 8 a
// KV head), one row, and one part of the row's span; a warp takes 32 keys at
// a time, lane l key l: it loads the key's row once (16-byte loads) and
// scores it against each of the block's query heads (held in shared
// memory), f32 sums in feature order; per head, the warp takes the 32
// scores' maximum and updates its running maximum, sum and value
// accumulator once (an online softmax over rounds of 32); then each of the
// 32 value rows, loaded once (half2, lane l features 2l, 2l+1, +64), is
// added into every head's accumulator with that head's weight. So a key and
// a value are read once per KV head, not once per query head, and no lane
// waits on a reduction for every key. The warps' results are merged through
// shared memory, a split span's parts as attn's are (ATG_SPLIT keys at
// least, at most S parts). Bound: reading the cache at depth; the
// per-query-head kernel read TinyLlama's keys eight times and reduced
// across the warp for every key.
#define ATG_WARPS 4    // attgWarps in run_cuda.go
#define ATG_SPLIT 128  // the fewest keys of a part
#define ATG_PARTS 32   // the most parts (attgParts in run_cuda.go)
template <int D, int GM>
__device__ __forceinline__ void attng(const float *q, const __half *kc, const __half *vc, float *out, int heads, int kvHeads,
                                      const int *posp, float scale, const int *rowp, float *part, int *count, int S) {
	constexpr int J = D / 64;  // half2 features a lane holds of a value row: 2·lane + 64·j
	constexpr int KP = D / 8;  // 16-byte pieces of a key row
	__shared__ __align__(16) float qs[GM][D];
	__shared__ float ps[ATG_WARPS][GM][32];
	__shared__ float sm[ATG_WARPS][GM][2 + D];
	__shared__ float fz[GM][ATG_PARTS];
	__shared__ float tots[GM];
	__shared__ int last;
#if __CUDA_ARCH__ >= 900
	// Built for compute_90 (attention90.ptx): the launch after, the o
	// projection's mat-vec (a programmatic dependent launch, launchMV), may
	// start now and wait for this one (Llama-7B's tg128 on an H200 550.6
	// without this, 555.7 with it; TinyLlama Q4_0 1685 / 1679).
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
	int G = heads / kvHeads, groups = (G + GM - 1) / GM;
	int kvh = blockIdx.x / groups, h0 = kvh * G + (blockIdx.x % groups) * GM, gn = min(GM, kvh * G + G - h0);
	int i = blockIdx.y / S, z = blockIdx.y % S, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	int pos = *posp; // the step's position, read from the device
	// The queries, 16 bytes a thread at a time, every load issued before
	// any is stored (a loop of dependent trips doubled a shallow step).
	constexpr int QV = GM * D / 4, QR = (QV + 32 * ATG_WARPS - 1) / (32 * ATG_WARPS);
	float4 qv[QR];
#pragma unroll
	for (int r = 0; r < QR; r++) {
		int e = threadIdx.x + 32 * ATG_WARPS * r, g = e / (D / 4);
		qv[r] = e < QV && g < gn ? *(const float4 *)(q + ((long long)i * heads + h0) * D + 4 * e) : make_float4(0, 0, 0, 0);
	}
#pragma unroll
	for (int r = 0; r < QR; r++) {
		int e = threadIdx.x + 32 * ATG_WARPS * r;
		if (e < QV) *(float4 *)(&qs[0][0] + 4 * e) = qv[r];
	}
	// The span and its part as attn finds them, written out again: a
	// device function shared by the two made this kernel 7% slower on the
	// 7B's heads at depth 4096 (34.5 against 32.2 µs a layer, H100).
	int dim = kvHeads * D, kh = kvh * D, span = pos + i + 1;
	if (rowp) {
		span = rowp[2 * i] + 1;
		long long cell = rowp[2 * i + 1];
		kc += cell * dim, vc += cell * dim;
	}
	int chunk = max(ATG_SPLIT, (span + S - 1) / S), parts = (span + chunk - 1) / chunk;
	if (z >= parts) return;
	int lo = z * chunk, hi = min(span, lo + chunk);
	__syncthreads();
	float m[GM], s[GM];
	float2 acc[GM][J];
#pragma unroll
	for (int g = 0; g < GM; g++) {
		m[g] = -INFINITY, s[g] = 0;
#pragma unroll
		for (int j = 0; j < J; j++) acc[g][j] = make_float2(0, 0);
	}
	for (int base = lo + 32 * warp; base < hi; base += 32 * ATG_WARPS) {
		int key = base + lane;
		float x[GM];
#pragma unroll
		for (int g = 0; g < GM; g++) x[g] = 0;
		// The round's 32 value rows are asked for with its keys, before
		// any score: they do not depend on them (loaded four at a time
		// after the softmax, a round waited for memory nine times).
		// Measured on an H200 (TestDecodeAttention, µs a layer): Llama-7B's
		// heads 3.52 → 3.19 at 16 keys, 27.67 → 25.90 at 4096;
		// TinyLlama's unchanged (5.55 → 5.79 at 16, 12.14 → 12.28 at 4096).
		const __half *vb = vc + (long long)base * dim + kh + 2 * lane;
		__half2 vr[32][J];
#pragma unroll
		for (int k = 0; k < 32; k++)
#pragma unroll
			for (int j = 0; j < J; j++) vr[k][j] = base + k < hi ? *(const __half2 *)(vb + (long long)k * dim + 64 * j) : __half2();
		if (key < hi) {
			const uint4 *kr = (const uint4 *)(kc + (long long)key * dim + kh);
			uint4 w[KP];
#pragma unroll
			for (int c = 0; c < KP; c++) w[c] = kr[c];
#pragma unroll
			for (int c = 0; c < KP; c++) {
				float2 k0 = __half22float2(*(__half2 *)&w[c].x), k1 = __half22float2(*(__half2 *)&w[c].y);
				float2 k2 = __half22float2(*(__half2 *)&w[c].z), k3 = __half22float2(*(__half2 *)&w[c].w);
#pragma unroll
				for (int g = 0; g < GM; g++) {
					float4 qa = *(const float4 *)(&qs[g][8 * c]), qb = *(const float4 *)(&qs[g][8 * c + 4]);
					float d = x[g];
					d = fmaf(qa.x, k0.x, d), d = fmaf(qa.y, k0.y, d), d = fmaf(qa.z, k1.x, d), d = fmaf(qa.w, k1.y, d);
					d = fmaf(qb.x, k2.x, d), d = fmaf(qb.y, k2.y, d), d = fmaf(qb.z, k3.x, d), d = fmaf(qb.w, k3.y, d);
					x[g] = d;
				}
			}
		}
#pragma unroll
		for (int g = 0; g < GM; g++) {
			float xs = key < hi ? x[g] * scale : -INFINITY, mx = xs;
			for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, o));
			// Lane 0's key is in the part, so mx and mn are finite; m is
			// -inf at first, and corr 0.
			float mn = fmaxf(m[g], mx), corr = expf(m[g] - mn);
			float p = key < hi ? expf(xs - mn) : 0, sum = p;
			for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, o);
			s[g] = s[g] * corr + sum, m[g] = mn;
#pragma unroll
			for (int j = 0; j < J; j++) acc[g][j].x *= corr, acc[g][j].y *= corr;
			ps[warp][g][lane] = p;
		}
		__syncwarp();
		int nk = min(32, hi - base);
#pragma unroll
		for (int k = 0; k < 32; k++) {
			if (k >= nk) break;
			float2 v[J];
#pragma unroll
			for (int j = 0; j < J; j++) v[j] = __half22float2(vr[k][j]);
#pragma unroll
			for (int g = 0; g < GM; g++) {
				float pk = ps[warp][g][k];
#pragma unroll
				for (int j = 0; j < J; j++) acc[g][j].x = fmaf(pk, v[j].x, acc[g][j].x), acc[g][j].y = fmaf(pk, v[j].y, acc[g][j].y);
			}
		}
		__syncwarp();
	}
#pragma unroll
	for (int g = 0; g < GM; g++) {
		if (lane == 0) sm[warp][g][0] = m[g], sm[warp][g][1] = s[g];
#pragma unroll
		for (int j = 0; j < J; j++) sm[warp][g][2 + 2 * lane + 64 * j] = acc[g][j].x, sm[warp][g][3 + 2 * lane + 64 * j] = acc[g][j].y;
	}
	__syncthreads();
	// Per head: the warps' parts merged (a warp with no keys has sum 0).
	for (int e = threadIdx.x; e < gn * D; e += blockDim.x) {
		int g = e / D, d = e % D;
		float M = -INFINITY;
		for (int w = 0; w < ATG_WARPS; w++) M = fmaxf(M, sm[w][g][0]);
		float S1 = 0, v = 0;
		for (int w = 0; w < ATG_WARPS; w++) {
			float f = sm[w][g][1] > 0 ? expf(sm[w][g][0] - M) : 0;
			S1 += sm[w][g][1] * f, v += sm[w][g][2 + d] * f;
		}
		long long row = (long long)i * heads + h0 + g;
		if (parts == 1) {
			out[row * D + d] = v / S1;
		} else {
			float *pp = part + (row * S + z) * (2 + D);
			pp[2 + d] = v;
			if (d == 0) pp[0] = M, pp[1] = S1;
		}
	}
	if (parts == 1) return;
	__threadfence();
	__syncthreads();
	long long row0 = (long long)i * heads + h0;
	if (threadIdx.x == 0) last = atomicAdd(count + row0, 1) == parts - 1;
	__syncthreads();
	if (!last) return;
	__threadfence();
	// The parts' weights per head (thread g), then each output from them;
	// the loops over parts unrolled, so that their loads go out together.
	if (threadIdx.x < gn) {
		int g = threadIdx.x;
		const float *pr = part + (row0 + g) * S * (2 + D);
		float mv[ATG_PARTS], sv[ATG_PARTS];
#pragma unroll
		for (int y = 0; y < ATG_PARTS; y++) {
			bool in = y < parts;
			mv[y] = in ? __ldcg(pr + y * (2 + D)) : -INFINITY;
			sv[y] = in ? __ldcg(pr + y * (2 + D) + 1) : 0;
		}
		float Mx = -INFINITY;
#pragma unroll
		for (int y = 0; y < ATG_PARTS; y++) Mx = fmaxf(Mx, mv[y]);
		float tot = 0;
#pragma unroll
		for (int y = 0; y < ATG_PARTS; y++) {
			float f = sv[y] > 0 ? expf(mv[y] - Mx) : 0;
			fz[g][y] = f, tot += sv[y] * f;
		}
		tots[g] = tot;
	}
	if (threadIdx.x == 0) count[row0] = 0;
	__syncthreads();
	for (int e = threadIdx.x; e < gn * D; e += blockDim.x) {
		int g = e / D, d = e % D;
		const float *pr = part + (row0 + g) * S * (2 + D) + 2 + d;
		float vv[ATG_PARTS];
#pragma unroll
		for (int y = 0; y < ATG_PARTS; y++) vv[y] = y < parts ? __ldcg(pr + y * (2 + D)) : 0;
		float v = 0;
#pragma unroll
		for (int y = 0; y < ATG_PARTS; y++) v += vv[y] * fz[g][y];
		out[(row0 + g) * D + d] = v / tots[g];
	}
}

#define ATTENTION_G(name, d, gm)                                                                                               \
	extern "C" __global__ void __launch_bounds__(32 * ATG_WARPS) name(const float *q, const __half *kc, const __half *vc,       \
	                                                                 float *out, int heads, int kvHeads, const int *posp,     \
	                                                                 float scale, const int *rowp, float *part, int *count, int S) { \
		attng<d, gm>(q, kc, vc, out, heads, kvHeads, posp, scale, rowp, part, count, S);                                     \
	}
ATTENTION_G(attention_g64_1, 64, 1)
ATTENTION_G(attention_g64_2, 64, 2)
ATTENTION_G(attention_g64_4, 64, 4)
ATTENTION_G(attention_g64_8, 64, 8)
ATTENTION_G(attention_g128_1, 128, 1)
ATTENTION_G(attention_g128_2, 128, 2)
ATTENTION_G(attention_g128_4, 128, 4)
ATTENTION_G(attention_g128_8, 128, 8)

// fattn_d64 and fattn_d128: the same causal attention for a prompt of n
// query rows of one sequence (no rowp), on tensor cores, for head sizes 64
// and 128. A block of four warps takes 64 query rows of one head; each warp
// 16 of them. The block steps over the keys its rows see in tiles of 64:
// keys and values are copied into shared memory (rows padded by 8 halves, so
// that the fragment loads hit 32 distinct banks), scores S = Q·Kᵀ come from
// mma.sync m16n8k16 with the query rounded to f16 and f32 sums, an online
// softmax in f32 rescales the running sums, and the probabilities, rounded
// to f16, multiply the values (mma.sync again, values loaded transposed by
// ldmatrix). This is FlashAttention-2's scheme, and what llama.cpp's CUDA
// flash attention rounds: the query and the probabilities to f16. Bound:
// the tensor cores and the tile copies; the per-row kernel above read every
// key once per query row.
#define FA_ROWS 64 // query rows per block (4 warps × 16)
#define FA_KEYS 64 // keys per tile

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
	__half2 h = __floats2half2_rn(lo, hi);
	return *(uint32_t *)&h;
}

__device__ __forceinline__ void mma16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
	             : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <int D>
__device__ __forceinline__ void fattn(const float *q, const __half *kc, const __half *vc, float *out, int n, int heads, int kvHeads,
                                      const int *posp, float scale) {
	constexpr int DP = D + 8; // padded row of a shared tile, in halves
	__shared__ __align__(16) __half Ks[FA_KEYS * DP], Vs[FA_KEYS * DP];
	int pos = *posp;
	int h = blockIdx.y, q0 = blockIdx.x * FA_ROWS, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int g = lane >> 2, tig = lane & 3;
	int dim = kvHeads * D, kh = (h / (heads / kvHeads)) * D;
	// This thread's two query rows (padding rows past n repeat the last).
	int i0 = min(q0 + warp * 16 + g, n - 1), i1 = min(q0 + warp * 16 + g + 8, n - 1);
	const float *qa = q + ((long long)i0 * heads + h) * D, *qb = q + ((long long)i1 * heads + h) * D;
	uint32_t qf[D / 16][4];
#pragma unroll
	for (int s = 0; s < D / 16; s++) {
		int c = 16 * s + 2 * tig;
		float2 x0 = *(const float2 *)(qa + c), x1 = *(const float2 *)(qb + c);
		float2 x2 = *(const float2 *)(qa + c + 8), x3 = *(const float2 *)(qb + c + 8);
		qf[s][0] = pack_half2(x0.x, x0.y), qf[s][1] = pack_half2(x1.x, x1.y);
		qf[s][2] = pack_half2(x2.x, x2.y), qf[s][3] = pack_half2(x3.x, x3.y);
	}
	float o[D / 8][4];
#pragma unroll
	for (int t = 0; t < D / 8; t++) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0;
	float m0 = -INFINITY, m1 = -INFINITY, l0 = 0, l1 = 0;
	int last0 = pos + i0, last1 = pos + i1;               // the last key each row sees
	int kend = pos + min(n, q0 + FA_ROWS);                 // keys any row of the block sees
	uint32_t vbase = (uint32_t)__cvta_generic_to_shared(Vs);
	for (int k0 = 0; k0 < kend; k0 += FA_KEYS) {
		__syncthreads();
		// Copy the tile: FA_KEYS rows of D halves, 16 bytes a thread at a time.
		for (int p = threadIdx.x; p < FA_KEYS * D / 8; p += blockDim.x) {
			int r = p / (D / 8), c = 8 * (p % (D / 8));
			uint4 kv = make_uint4(0, 0, 0, 0), vv = kv;
			if (k0 + r < kend) {
				long long off = (long long)(k0 + r) * dim + kh + c;
				kv = *(const uint4 *)(kc + off), vv = *(const uint4 *)(vc + off);
			}
			*(uint4 *)(Ks + r * DP + c) = kv, *(uint4 *)(Vs + r * DP + c) = vv;
		}
		__syncthreads();
		// Scores of this warp's 16 rows against the tile's 64 keys.
		float s[FA_KEYS / 8][4];
#pragma unroll
		for (int t = 0; t < FA_KEYS / 8; t++) {
			s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0;
			const __half *kr = Ks + (8 * t + g) * DP + 2 * tig;
#pragma unroll
			for (int d = 0; d < D / 16; d++) mma16816(s[t], qf[d], *(const uint32_t *)(kr + 16 * d), *(const uint32_t *)(kr + 16 * d + 8));
		}
		float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
		for (int t = 0; t < FA_KEYS / 8; t++) {
			int j = k0 + 8 * t + 2 * tig;
			s[t][0] = j <= last0 ? s[t][0] * scale : -INFINITY;
			s[t][1] = j + 1 <= last0 ? s[t][1] * scale : -INFINITY;
			s[t][2] = j <= last1 ? s[t][2] * scale : -INFINITY;
			s[t][3] = j + 1 <= last1 ? s[t][3] * scale : -INFINITY;
			mx0 = fmaxf(mx0, fmaxf(s[t][0], s[t][1])), mx1 = fmaxf(mx1, fmaxf(s[t][2], s[t][3]));
		}
#pragma unroll
		for (int x = 1; x < 4; x <<= 1) {
			mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffff, mx0, x));
			mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffff, mx1, x));
		}
		// Every row sees key 0 in the first tile, so the maxima are finite.
		float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
		float c0 = expf(m0 - n0), c1 = expf(m1 - n1);
		m0 = n0, m1 = n1;
		l0 *= c0, l1 *= c1;
#pragma unroll
		for (int t = 0; t < D / 8; t++) o[t][0] *= c0, o[t][1] *= c0, o[t][2] *= c1, o[t][3] *= c1;
		uint32_t pf[FA_KEYS / 16][4];
#pragma unroll
		for (int t = 0; t < FA_KEYS / 8; t++) {
			float p0 = expf(s[t][0] - n0), p1 = expf(s[t][1] - n0), p2 = expf(s[t][2] - n1), p3 = expf(s[t][3] - n1);
			l0 += p0 + p1, l1 += p2 + p3;
			pf[t / 2][2 * (t & 1)] = pack_half2(p0, p1);
			pf[t / 2][2 * (t & 1) + 1] = pack_half2(p2, p3);
		}
		// O += P·V: the values' fragments by ldmatrix, transposed; lane l
		// points at key row (l & 7) + 8·((l >> 3) & 1) and the feature block
		// of (l >> 4), so one x4 load gives two 8-feature blocks' fragments.
#pragma unroll
		for (int kk = 0; kk < FA_KEYS / 16; kk++) {
#pragma unroll
			for (int t = 0; t < D / 8; t += 2) {
				int row = 16 * kk + (lane & 7) + 8 * ((lane >> 3) & 1), col = 8 * (t + (lane >> 4));
				uint32_t b0, b1, b2, b3;
				asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
				             : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3)
				             : "r"(vbase + 2 * (row * DP + col)));
				mma16816(o[t], pf[kk], b0, b1);
				mma16816(o[t + 1], pf[kk], b2, b3);
			}
		}
	}
#pragma unroll
	for (int x = 1; x < 4; x <<= 1) {
		l0 += __shfl_xor_sync(0xffffffff, l0, x);
		l1 += __shfl_xor_sync(0xffffffff, l1, x);
	}
	int r0 = q0 + warp * 16 + g, r1 = r0 + 8;
	float *oa = out + ((long long)r0 * heads + h) * D + 2 * tig, *ob = out + ((long long)r1 * heads + h) * D + 2 * tig;
#pragma unroll
	for (int t = 0; t < D / 8; t++) {
		if (r0 < n) *(float2 *)(oa + 8 * t) = make_float2(o[t][0] / l0, o[t][1] / l0);
		if (r1 < n) *(float2 *)(ob + 8 * t) = make_float2(o[t][2] / l1, o[t][3] / l1);
	}
}

#define FATTN(name, d)                                                                                                    \
	extern "C" __global__ void __launch_bounds__(128) name(const float *q, const __half *kc, const __half *vc, float *out, \
	                                                      int n, int heads, int kvHeads, const int *posp, float scale) {     \
		fattn<d>(q, kc, vc, out, n, heads, kvHeads, posp, scale);                                                          \
	}
FATTN(fattn_d64, 64)
FATTN(fattn_d128, 128)
