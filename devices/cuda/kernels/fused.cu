// fused.cu: decode-step kernels (one token) that each do the work of a run of
// ops, so that a Llama block is five launches instead of sixteen. The device
// fuses only where the ops are queued together and every value an op would
// write is still written (a fused launch is invisible to the plan), and each
// kernel computes exactly what the single-op kernels compute (common.cuh).
#include "common.cuh"
#include "q8.cuh"
#include "tc.cuh"

#define MV_THREADS 256 // 8 warps, each taking rows a grid's warps apart; block_rms_scale needs 256
// mvw_<type> and mvrw_<type>_<type2>: more warps a block, the norm's sums
// still by the first 256 threads; each type's block size is its launch
// bound, which the device reads back (wideMV in kernels_cuda.go). 1024
// (one block a multiprocessor, so x is staged half as often) measured
// mixed on an H200 (TestDecodeMatVec, µs, 512 → 1024): Q4_K 4096×4096 6.62
// → 6.52, 12288×4096 norm 12.99 → 13.27, Q4_0 2560×2048 4.22 → 4.32, and
// Q6_K, which spills at 64 registers, 19.40 → 21.68; so 512.
#ifndef MVW_THREADS
#define MVW_THREADS 512
#endif
#ifndef MVW_THREADS_SMALL
#define MVW_THREADS_SMALL MVW_THREADS // Q4_0, Q8_0, Q4_K and their MV_ROPE launches
#endif
// Q6_K's wide kernel takes 78 registers, one block a multiprocessor; held
// to 64 (two blocks, __launch_bounds__(512, 2), 32 bytes spilled) it
// measured faster alone on an H200 (TestDecodeMatVec, µs: 4096×11008 18.4
// → 16.1, 4096×4096 7.9 → 6.85) but slower in Llama-7B Q4_K_M's decode
// (tg128 499.9 → 488.7 tok/s). mvw2_q6_k below holds it to 64 without
// spills, for the launches that fill two blocks a multiprocessor.
#ifndef MVW_THREADS_BIG
#define MVW_THREADS_BIG MVW_THREADS // Q5_K and Q6_K, more registers a thread
#endif
#define MV_PLAIN 0     // up to three weights' rows, one after another
#define MV_SILU 1      // gate W0 and up W1 row by row; S = silu(Y0)·Y1
#define MV_ADD 2       // one weight; S = res + Y0
#define MV_ROPE 3      // q W0, k W1, v W2 rows two by two; then the step's RoPE of q and k and the cache append (rope_kv)
#define MV_RSC 128     // pairs of a head whose sine and cosine MV_ROPE tabulates (heads up to 256)
#define MV_NW_EARLY 1  // flags: the norm weight copied to shared memory before the wait (mv)
#define MV_RES_LATE 2  // flags: MV_ADD's residual read after the product, not before (mv)
#define MV_QIN 4       // flags: x is the input already staged (xq_at's layout, made once by the gate and up launch before, QG), copied, not made (mv)
#ifndef MV_STAGE_COPY
#define MV_STAGE_COPY 0 // 1 (2: only the launches without a norm, the o and down projections; thirty-eighth session, tg128 TinyLlama Q4_0 1829 → 1915 against 2093 for 1, Q4_K_M 1648 → 1719 against 1761): a timing-only build whose block-type mat-vecs copy a staged input from x's bytes instead of making it (wrong products): what an input quantized once, by the launch before, would cost; on an H200 (twenty-seventh session) Q4_K 12288×4096 norm 13.04 → 11.08 µs, Q6_K 4096×11008 15.38 → 13.60, Q4_0 2560×2048 norm 4.18 → 3.02, and tg128 Llama-7B 515 → 554 tok/s, TinyLlama Q4_0 1534 → 1785: the most such a design could gain, before its own cost (see mv)
#endif
#ifndef MV_SUM_ALL
#define MV_SUM_ALL 1 // the normalised staging's sum of squares by block_sum_all (one barrier; 0: block_sum, two)
#endif
#ifndef MV_STAGE_SKIP
#define MV_STAGE_SKIP 0 // 1: a timing-only build whose mat-vecs stage no input (wrong products); on an H200 it took Q4_K 4096×4096 from 7.36 to 4.78 µs, 12288×4096 norm 14.97 to 10.63, Q4_0 2560×2048 4.55 to 3.33
#endif

// pair_dots is rows a and b of W (type U, rb bytes a row) times the staged
// input (only row a where n is 1), one row after the other, as the plain
// mat-vec takes them; or, where both is set (rope's bit 26, ropePair2 in
// fuse_cuda.go) for Q4_0, Q8_0 and the kernels that set PB (mvr_q4_k_*),
// with both rows' loads at once (row_dotq<U, 2>, the same products). Where
// that would hold mvw_q4_k (which also has MV_SILU's two rows at once)
// past 64 registers it spills, and it once made Llama-7B's decode 4%
// slower there. Measured on an H200 (twenty-eighth session, tg128, at
// once / one after the other, two rounds): TinyLlama Q4_0 1585 / 1523,
// 1573 / 1527; Q4_K_M 1457 / 1449, 1466 / 1449; Q8_0 1202 / 1203; Llama-7B
// Q4_0 570 / 558; Llama-7B Q4_K_M 525 / 525.
//
// With P > 0, where both rows' loads go at once, pre holds P trips' loads
// of each (mv's PRE) if row a is preRow: row_dotq takes them in place of
// loading them.
template <int U, bool PB = false, int P = 0>
__device__ __forceinline__ void pair_dots(const uint8_t *W, int a, int b, int n, long long rb, const XQ &xq, const float *xs, int nb, int cols,
                                          int lane, float *y, bool both = false, const typename Pre<U>::Raw *pre = nullptr,
                                          const uint8_t *preRow = nullptr) {
	if (D8<U>::block && (PB || U == T_Q4_0 || U == T_Q8_0) && both && n == 2) {
		const uint8_t *rs[2] = {W + a * rb, W + b * rb};
		if (P > 0 && rs[0] == preRow)
			row_dotq<U, 2, P>(rs, xq, nb, lane, y, pre);
		else
			row_dotq<U, 2>(rs, xq, nb, lane, y);
		return;
	}
#pragma unroll 1
	for (int r = 0; r < n; r++) {
		const uint8_t *row = W + (r ? b : a) * rb;
		if (D8<U>::block)
			row_dotq<U, 1>(&row, xq, nb, lane, y + r);
		else
			y[r] = row_dot<U>(row, xs, cols, lane);
	}
}

// rope_rows is MV_ROPE's unit g of mv: two rows of q (W0) or k (W1) by one
// warp (pair_dots), the two that RoPE turns together (rope_feats),
// or one row of v (W2; the next two where rope's bit 25 is set); then lane
// 0 writes the products Y, the turned pair to qo or ko and the keys' and
// values' f16 cache rows kc, vc at the step's position, each computed as
// rope_kv computes it from the products. rope packs the head size, the
// rope's dims (<< 12), its mode (<< 24) and v's rows a unit (<< 25: set,
// two). v's rows one a unit spread a launch over more warps: Llama-7B's
// 8192 q and k rows and 4096 v rows are 8192 units on 4096 warps, three
// rows each, where 6144 pairs took 3072 warps, four rows each (mvBlocks:
// at most one wave, every warp as many units as the busiest). Measured on
// an H200 (twenty-eighth session, tg128 tok/s, v's rows two a unit → one):
// Llama-7B Q4_K_M 508 → 526, Llama-7B Q4_0 543 → 558, TinyLlama Q4_K_M
// 1429 → 1449, Q4_0 and Q8_0 unchanged (their launches are under a wave).
// rsc is the block's table of each pair's sine and cosine at the step's
// position (rope_sc, mv), so that a warp's lane 0 does not step θ alone.
// v's rows W2 may be of another type T2 (rows rb2 bytes) whose activations
// are quantized as T's (mixedRope in fuse_cuda.go: a Q4_K_M file's Q6_K
// attn_v under Q4_K q and k).
//
// rope_unit is unit g's weight (kind 0 q, 1 k, 2 v), its rows a and b (n of
// them) and its pair j of a head, as rope_rows finds them (mv's loads ahead).
// rope_rows keeps its own copy: calling rope_unit there changed ptxas's
// registers for most mat-vecs (mvw_q4_k and mvrw_q4_k_q6_k then spilled 4
// bytes at 64 registers).
struct RopeUnit {
	int kind, a, b, n, j;
};
__device__ __forceinline__ RopeUnit rope_unit(int g, int rope, int r0, int r1) {
	int headDim = rope & 0xfff, dims = (rope >> 12) & 0xfff, half = headDim / 2;
	bool neox = (rope >> 24) & 1;
	int nv = (rope >> 25) & 1 ? 2 : 1; // v's rows a unit
	int hq = r0 / 2, hk = r1 / 2, kind = g < hq ? 0 : g < hq + hk ? 1 : 2;
	int p = kind == 0 ? g : kind == 1 ? g - hq : g - hq - hk, j = p % half, a = 2 * p, b = 2 * p + 1;
	if (kind == 2 && nv == 1) a = p;
	if (kind < 2) {
		int f0, f1;
		rope_feats(j, dims, neox, f0, f1);
		a = (p / half) * headDim + f0, b = (p / half) * headDim + f1;
	}
	return RopeUnit{kind, a, b, kind == 2 ? nv : 2, j};
}
template <int T, int T2, bool PB, int P = 0>
__device__ __forceinline__ void rope_rows(int g, int lane, const XQ &xq, const float *xs, int nb, int cols, const uint8_t *W0, const uint8_t *W1,
                                          const uint8_t *W2, long long rb, long long rb2, float *Y0, float *Y1, float *Y2, int r0, int r1, float *qo,
                                          float *ko, __half *kc, __half *vc, int rope, float rscale, const int *posp, const float *freqs,
                                          const float2 *rsc, const typename Pre<T>::Raw *pre = nullptr, const uint8_t *preRow = nullptr) {
	int headDim = rope & 0xfff, dims = (rope >> 12) & 0xfff, half = headDim / 2;
	bool neox = (rope >> 24) & 1;
	int nv = (rope >> 25) & 1 ? 2 : 1; // v's rows a unit
	int hq = r0 / 2, hk = r1 / 2, kind = g < hq ? 0 : g < hq + hk ? 1 : 2;
	int p = kind == 0 ? g : kind == 1 ? g - hq : g - hq - hk, j = p % half, a = 2 * p, b = 2 * p + 1;
	if (kind == 2 && nv == 1) a = p;
	const uint8_t *W = kind == 0 ? W0 : kind == 1 ? W1 : W2;
	float *Y = kind == 0 ? Y0 : kind == 1 ? Y1 : Y2;
	if (kind < 2) {
		int f0, f1;
		rope_feats(j, dims, neox, f0, f1);
		a = (p / half) * headDim + f0, b = (p / half) * headDim + f1;
	}
	int n = kind == 2 ? nv : 2;
	static_assert(T2 == T || (D8<T2>::block == D8<T>::block && D8<T2>::q81 == D8<T>::q81 && D8<T>::block), "v's activations quantized as q's");
	float y[2];
	if (T2 != T && kind == 2)
		pair_dots<T2>(W, a, b, n, rb2, xq, xs, cols / (D8<T2>::block ? D8<T2>::block : 1), cols, lane, y);
	else
		pair_dots<T, PB, P>(W, a, b, n, rb, xq, xs, nb, cols, lane, y, (rope >> 26) & 1, pre, preRow);
	if (lane != 0) return;
	int pos = *posp;
	long long base = (long long)pos * r1;
	Y[a] = y[0];
	if (n == 2) Y[b] = y[1];
	if (kind == 2) {
		vc[base + a] = __float2half_rn(y[0]);
		if (n == 2) vc[base + b] = __float2half_rn(y[1]);
		return;
	}
	float o0, o1;
	if (2 * j >= dims)
		o0 = y[0], o1 = y[1];
	else if (half <= MV_RSC)
		rope_rot(y[0], y[1], rsc[j].x, rsc[j].y, o0, o1);
	else
		rope_pair(y[0], y[1], pos, j, dims, rscale, freqs, o0, o1);
	if (kind == 0) {
		qo[a] = o0, qo[b] = o1;
	} else {
		ko[a] = o0, ko[b] = o1;
		kc[base + a] = __float2half_rn(o0), kc[base + b] = __float2half_rn(o1);
	}
}

// mv_<type>: mat-vec of x (cols) against up to three weights W0..W2 of one
// type and one row length rb (r0, r1, r2 rows; Y0..Y2 get the products). If
// nw is set, x is first RMS-normalised with weight nw and eps, and block 0
// also writes the normalised row to nout (the RMSNorm op's output). x, or its
// normalised form, is staged in shared memory for the block's eight warps:
// quantized to 8 bits for the block types (xqBytes(cols), q8.cuh), as f32
// for the float types (4·cols bytes). mode adds the SiLU·mul or residual add
// to the writing of each row (see MV_*), or with MV_ROPE the decode step's
// RoPE of q and k and the append of k and v to the layer's cache, which
// rope_kv would do next (rope_rows; qo..freqs are rope_kv's). This is also
// the device's decode mat-vec when nothing is fused (one weight, no norm,
// MV_PLAIN).
//
// The grid is at most one wave (launchMV): warp w of the grid's nw takes
// rows w, w+nw, w+2·nw, … (for MV_SILU the gate and up rows of each), so
// that a block stages x once for several rows. Measured on an H100 (hybrid
// bench; TestDecodeMatVec times the layers' shapes): Llama-7B's decode 229
// -> 286 tok/s against a block for every eight rows. Asking L2 for the rows
// ahead (prefetch.global.L2), two rows a warp at once, and letting the next
// kernel start early (programmatic dependent launch, then with every
// multiprocessor's registers taken and the first rows asked of L2; the
// compute_90 build below does it without those, and gains) were each slower; so
// was streaming a warp's rows into shared memory with the copy engine
// (cp.async.bulk, sm_90; branch experiment/tma): on an H200 exact but
// 1.4-2.4× the instructions (ncu), Q4_K 4096×11008 13.4 → 15.6 µs, Q6_K
// alone faster (18.9 → 17.5). So was copying, by cp.async into shared
// memory before x is staged, the norm weight and each warp's first trip of
// weight bytes (builds MV_NW_ASYNC and MV_FIRST, since removed; H200,
// tg128 TinyLlama Q4_0 1469 → 1451 / 1354, Llama-7B 486 → 472 / 455): the
// room they take leaves fewer blocks a multiprocessor (Q4_K 4096×4096
// without a norm 5.57 → 5.73 µs), and the first trip's copy added more
// than it hid (6.63 µs). So was asking L2, at the launch's start, before x
// is staged, for the first 2 or 8 KiB of each warp's rows (prefetch.global.L2
// a line a lane; H200, tg128 Llama-7B 488 → 446 / 432 tok/s, TinyLlama Q4_0
// 1512 → 1492 / 1440). So was asking L2 for the next launch's first weight
// bytes, by each warp as it starts its last row and by the decode attention
// at its start (branch experiment/l2-next; H200, tg128 Llama-7B 485 with
// the code present and off → 488 / 475 / 450 asking 1, 4, 16 MiB a weight,
// attention 481 / 476 asking 4 and 64 MiB; TinyLlama Q4_0 and Q4_K_M within
// ±2%): the code alone, off, cost 3% against the build without it
// (499 → 485), as its check in the rows' loop moved their scheduling.
// Staging itself (the twenty-seventh session, H200, tg128 Llama-7B /
// TinyLlama Q4_0): a ready input copied in instead of made (MV_STAGE_COPY,
// timing only) would be worth 515 → 554 / 1534 → 1785 tok/s, but the
// mat-vec before makes the input a row a warp, its rows a grid apart, so
// that no warp or block holds a block of 32 or 256 of it, nor the norm's
// sum: quantizing it there adds a round trip and a reduction after that
// launch's last row, the latency the copy saves. (The attention before the
// o projection holds whole heads, blocks of 32 for Q4_0 and Q8_0; not
// tried.) Blocks of a cluster (2, 4 or 8)
// each quantizing a share of an input without a norm into every block's
// staged row through distributed shared memory were exact but slower
// (branch experiment/mv-cluster: 515 → 505 / 425, 1530 → 1488 / 1407 for
// 2 / 4; clusters also hold fewer blocks in a wave: Q4_K 12288×4096 norm,
// which shares nothing, 12.86 → 13.22 / 20.00 µs). So was dealing a
// launch's rows to its warps block by block, so that a last round fell on
// every block alike (warp w of block b the grid's w·blocks + b: 515 → 494,
// 1518 → 1479; ptxas spilled 8 bytes in mvw_q4_k).
//
// PRE (mvp_<type>, Pre<T> of Q4_0, Q8_0, Q4_K and Q6_K): each warp loads its first
// row's first preTrips<T>() trips of weights into registers before it waits for the
// launch before (or, built for compute_80, before it stages x), for the
// launches of at most one block a multiprocessor (launchMV): MV_PLAIN and
// MV_ADD, and MV_ROPE (Q4_0's on mvp_q4_0, Q4_K's and Q8_0's on mvrp_),
// whose unit's two rows take half of preTrips<T>() trips each. Their blocks, let in early by the launch before (PDL), load while it
// ends instead of idling at the wait. devices/cuda/measure/boundary.cu on an
// H200: a 2048×2048 phase 3.03 µs as graph launches, 2.98 as PDL, 2.36 as
// PDL with the first row held. tg128 on an H200 (thirty-third session,
// alternated): HYBRID_CUDA_PRE=0 against MV_PLAIN and MV_ADD's, TinyLlama
// Q4_0 1667 → 1729 tok/s, Q8_0 1353 → 1390, Q4_K_M 1563 → 1599; then
// HYBRID_CUDA_PRE_ROPE=0 against Q4_0's MV_ROPE too, 1709 → 1790.
// preTrips<T>() is MV_PRE trips a warp,
// two for Q4_K and one for Q6_K, whose trips are twelve and nineteen words
// a lane (Q4_K's four spilled 152 bytes at 128 registers, Q6_K's two 32):
// a TinyLlama row of 2048 weights whole, or most of one of 5632 (Q6_K: a
// third of a row of 2048, a ninth of 5632).
#ifndef MV_PRE
#define MV_PRE 4
#endif
template <int T> __host__ __device__ constexpr int preTrips() { return T == T_Q6_K ? 1 : T == T_Q4_K ? 2 : MV_PRE; }
template <int T, int NT, int T2 = T, bool SEQ = false, bool PB = false, bool PRE = false, int PS = 0, bool QG = false>
__device__ __forceinline__ void mv(const float *x, const float *nw, float *nout, float eps, int cols, const uint8_t *W0, const uint8_t *W1,
                                   const uint8_t *W2, long long rb, float *Y0, float *Y1, float *Y2, int r0, int r1, int r2, int mode,
                                   const float *res, float *S, float *qo, float *ko, __half *kc, __half *vc, int rope, float rscale,
                                   const int *posp, const float *freqs, long long rb2, int flags) {
	extern __shared__ float4 smem[];
	__shared__ float part[32];
	__shared__ float2 rsc[MV_RSC];
	__shared__ float sg[QG ? 2 : 1][32]; // QG: the group's S values, by the group's parity
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int total = mode == MV_SILU ? r0 : mode == MV_ROPE ? (r0 + r1) / 2 + ((rope >> 25) & 1 ? r2 / 2 : r2) : r0 + r1 + r2, nwarps = gridDim.x * (NT / 32);
#if __CUDA_ARCH__ >= 900
	// Built for compute_90 (fused90.ptx, loaded on Hopper and later), a
	// decode mat-vec is a programmatic dependent launch (launchMV, pdl in
	// launch_cuda.go): it lets the launch after it start at once, so that
	// that launch's blocks are scheduled into whatever room this one leaves
	// and wait there; then it waits for the launch before it to finish and
	// its writes to be visible (griddepcontrol.wait; a plain launch's
	// returns at once), before it reads anything a launch wrote. Nothing
	// before the wait writes global memory, and nothing but mvp_'s first
	// loads of weights (PRE, below) and the norm weight (MV_NW_EARLY) reads
	// it. Measured on an H200 (tg128,
	// HYBRID_CUDA_PDL=0 against this, alternated, thirty-second session):
	// Llama-7B Q4_K_M 541.1 → 553.4 tok/s, TinyLlama Q4_0 1657 → 1667, Q8_0
	// 1325 → 1347, Q4_K_M 1540 → 1557. Asking for each warp's first row
	// before the wait (4-byte loads into L1) gained Q4_0 1% more and lost
	// Q4_K_M 2%; prefetch.global.L1 of it, and PDL for the launches of one
	// block a multiprocessor only, gained less (bench/RESULTS.md). Holding
	// the first row's first trips in registers before the wait instead
	// gains more (PRE, mvp_, above).
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
	XQ xq = xq_at((uint8_t *)smem, cols);
	float *xs = (float *)smem;
	const int RP = 4; // pieces of eight a thread holds in registers: rows up to 8192
	bool aligned = (((uintptr_t)x | (uintptr_t)nw | (uintptr_t)nout) & 15) == 0;
	bool normQ = D8<T>::block && nw && (cols & 7) == 0 && cols <= 8 * MV_THREADS * RP && aligned;
	// MV_NW_EARLY (flags, set by launchMV with the room for it): the norm
	// weight, which no launch writes, copied into shared memory after the
	// staged row before the wait and before the first weights' loads
	// (PRE), each thread its own pieces (the ones it normalises below, so
	// no barrier), so that its trip to L2 overlaps the launch before
	// instead of following the sum of squares. Measured on an H200 (tg128,
	// HYBRID_CUDA_NW_EARLY=0 against this, alternated, thirty-seventh
	// session): TinyLlama Q4_0 1823 → 1847 tok/s, Q8_0 1468 → 1480, Q4_K_M
	// 1643 → 1671, Llama-7B Q4_K_M 554 → 568. Copied after the first
	// weights' loads instead, Q4_0 lost 1% (1823 → 1806) and the others
	// gained less.
	float *nws = (float *)((uint8_t *)smem + ((xqBytes(cols) + 15) & ~15));
	bool nwEarly = (flags & MV_NW_EARLY) && normQ;
	if (nwEarly) {
#pragma unroll
		for (int j = 0; j < RP; j++) {
			int c = threadIdx.x + MV_THREADS * j;
			if (threadIdx.x >= MV_THREADS || 8 * c >= cols) break;
			float4 a = *(const float4 *)(nw + 8 * c), b = *(const float4 *)(nw + 8 * c + 4);
			*(float4 *)(nws + 8 * c) = a, *(float4 *)(nws + 8 * c + 4) = b;
		}
	}
	// MV_ROPE's loads ahead: Q4_0's (mvp_q4_0), Q4_K's (mvrp_q4_k_q4_k)
	// and Q8_0's (mvrp_q8_0_q8_0) pairs of rows loaded at once
	// (pair_dots), half of preTrips<T>() trips of each row. (In
	// mvp_q8_0 itself, even one trip a row took it to 126 registers and 16
	// bytes spilled; in a kernel of its own, marked by PB, which changes
	// nothing else for Q8_0, two take 91 registers and none.)
	constexpr bool PRE_ROPE = PRE && (T == T_Q4_0 || ((T == T_Q4_K || T == T_Q8_0) && PB));
	typename Pre<T>::Raw pre[PRE ? preTrips<T>() : 1];
	const uint8_t *preRow = nullptr;
	int g0 = QG ? 32 * blockIdx.x + warp : blockIdx.x * (NT / 32) + warp; // the warp's first unit (the loop below's first g)
	if (PRE && (mode == MV_PLAIN || mode == MV_ADD || (mode == MV_ROPE && PRE_ROPE) || (mode == MV_SILU && PS > 0)) && g0 < total) {
		// The warp's first row and its first full trips' loads, as
		// row_dotq would issue them; for MV_ROPE, where the unit's two
		// rows are loaded at once (pair_dots), both rows' first trips,
		// half as many each.
		const uint8_t *rows[2];
		int R = 1;
		if (PRE_ROPE && mode == MV_ROPE) {
			RopeUnit u = rope_unit(g0, rope, r0, r1);
			const uint8_t *W = u.kind == 0 ? W0 : u.kind == 1 ? W1 : W2;
			rows[0] = W + u.a * rb, rows[1] = W + u.b * rb;
			// (Not v's rows where they are of another type, T2.)
			R = u.n == 2 && ((rope >> 26) & 1) && (T2 == T || u.kind < 2) ? 2 : 0;
		} else if (PS > 0 && mode == MV_SILU) {
			rows[0] = W0 + g0 * rb, rows[1] = W1 + g0 * rb, R = 2;
		} else
			rows[0] = g0 < r0 ? W0 + g0 * rb : g0 < r0 + r1 ? W1 + (g0 - r0) * rb : W2 + (g0 - r0 - r1) * rb;
		preRow = R ? rows[0] : nullptr;
		const int per = 32 / D8<T>::TPB;
		int full = cols / (D8<T>::block ? D8<T>::block : 1) / per, k = lane % D8<T>::TPB, first = lane / D8<T>::TPB;
		if (R == 1) {
#pragma unroll
			for (int it = 0; it < preTrips<T>(); it++) {
				if (it < full) {
					int b = it * per + first;
					pre[it] = Pre<T>::load(rows[0] + blkAt<T>(b), k, b);
				}
			}
		} else if ((PRE_ROPE || PS > 0) && R == 2) {
#pragma unroll
			for (int it = 0; it < (PS > 0 ? PS : preTrips<T>() / 2); it++) {
				if (it < full) {
					int b = it * per + first;
#pragma unroll
					for (int r = 0; r < 2; r++) pre[2 * it + r] = Pre<T>::load(rows[r] + blkAt<T>(b), k, b);
				}
			}
		}
	}
#if __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
	if (mode == MV_ROPE) {
		// The pairs' sines and cosines, one pair a thread, ready by the
		// barrier after the staging below.
		int dims = (rope >> 12) & 0xfff, half = (rope & 0xfff) / 2;
		if (half <= MV_RSC && threadIdx.x < half && 2 * (int)threadIdx.x < dims) {
			float sn, cs;
			rope_sc(*posp, threadIdx.x, rscale, freqs, sn, cs);
			rsc[threadIdx.x] = make_float2(sn, cs);
		}
	}
	if (D8<T>::block == 32 && mode != MV_ROPE && mode != MV_SILU && (flags & MV_QIN)) {
		// The input staged once, for every block, by the launch before
		// (QG, below): its bytes copied in, 16 a thread at a time.
		for (int i = threadIdx.x; i < ((xqBytes(cols) + 15) & ~15) / 16; i += NT) smem[i] = ((const float4 *)x)[i];
	} else if (MV_STAGE_SKIP) {
		// Timing only (bench/cuda/mv-ab.sh): no input staged, so the
		// products are wrong; what the staging costs a launch.
	} else if (MV_STAGE_COPY && D8<T>::block && (MV_STAGE_COPY == 1 || !nw)) {
		// Timing only: x's first xqBytes(cols) bytes (fewer than its
		// 4·cols) taken as the staged input and copied in, 16 bytes a
		// thread at a time, so the products are wrong; what staging
		// would cost a launch whose input an earlier launch had
		// normalised and quantized once for all its blocks.
		for (int i = threadIdx.x; i < xqBytes(cols) / 16; i += NT) smem[i] = ((const float4 *)x)[i];
	} else if (normQ) {
		// The normalised block types' path: x read once, in 16-byte
		// pieces held in registers, then normalised and quantized there
		// (the same values, in the same order, as block_rms_scale and
		// the general path below).
		// The first 256 threads hold the row (as block_rms_scale sums it);
		// in a block of 512 the others only wait for them. The norm weight
		// is read after the sum: asking L1 for it with x measured mixed
		// on an H200 (µs, Q4_K 12288×4096 12.99 → 13.34, 11008×4096
		// gate+up 18.30 → 18.08), and holding it in registers took Q4_K's
		// kernel from 64 to 102 registers.
		float v[RP][8], s = 0;
#pragma unroll
		for (int j = 0; j < RP; j++) {
			int c = threadIdx.x + MV_THREADS * j;
			if (threadIdx.x >= MV_THREADS || 8 * c >= cols) break;
			float4 a = *(const float4 *)(x + 8 * c), b = *(const float4 *)(x + 8 * c + 4);
			v[j][0] = a.x, v[j][1] = a.y, v[j][2] = a.z, v[j][3] = a.w, v[j][4] = b.x, v[j][5] = b.y, v[j][6] = b.z, v[j][7] = b.w;
#pragma unroll
			for (int k = 0; k < 8; k++) s = fmaf(v[j][k], v[j][k], s);
		}
		float scale = 1.0f / sqrtf((MV_SUM_ALL ? block_sum_all(s, part) : block_sum(s, part)) / cols + eps); // part is not written again
#pragma unroll
		for (int j = 0; j < RP; j++) {
			int c = threadIdx.x + MV_THREADS * j;
			if (threadIdx.x >= MV_THREADS || 8 * c >= cols) break;
			const float *wp = nwEarly ? nws : nw;
			float4 a = *(const float4 *)(wp + 8 * c), b = *(const float4 *)(wp + 8 * c + 4);
			float w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
			for (int k = 0; k < 8; k++) v[j][k] = rms_apply(v[j][k], scale, w[k]);
			if (blockIdx.x == 0) {
				*(float4 *)(nout + 8 * c) = make_float4(v[j][0], v[j][1], v[j][2], v[j][3]);
				*(float4 *)(nout + 8 * c + 4) = make_float4(v[j][4], v[j][5], v[j][6], v[j][7]);
			}
			if (D8<T>::block == 32)
				quant32_piece(c, v[j], xq, D8<T>::q81);
			else
				quant256_piece(c, v[j], xq);
		}
	} else if (D8<T>::block && !nw && (cols & 7) == 0 && aligned) {
		// The block types' input without a norm (the o and down
		// projections'): each thread reads a piece of eight in two 16-byte
		// loads and quantizes it, then the next NT pieces on: the values
		// the general path below quantizes, which reads x a float at a
		// time, a block of 256 (or NT pieces of 32) after another. Measured
		// on an H200 (TestDecodeMatVec, µs, general → this): Q4_K 4096×4096
		// 6.63 → 5.62, 4096×11008 13.35 → 11.66, Q6_K 4096×11008 18.70 →
		// 18.23, Q4_0 2048×5632 6.54 → 6.04, Q8_0 2048×5632 8.91 → 8.15;
		// holding two pieces a thread at once, 5.68, 12.16, 18.34, 5.90
		// and 8.16 (and Q4_K's kernel at 81 registers with three, 94 with
		// four, from 64).
		for (int c = threadIdx.x; 8 * c < cols; c += NT) { // a warp's pieces are in or out together: cols/8 is a multiple of 32 (blocks of 256) or 4 (of 32)
			float4 a = *(const float4 *)(x + 8 * c), b = *(const float4 *)(x + 8 * c + 4);
			float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
			if (D8<T>::block == 32)
				quant32_piece(c, v, xq, D8<T>::q81);
			else
				quant256_piece(c, v, xq);
		}
	} else {
		float scale = nw ? block_rms_scale(x, cols, eps, part) : 0;
		// val(i) is element i of the mat-vecs' input: x, or x normalised (the
		// RMSNorm op's output, which block 0 also writes).
		auto val = [&](int i) {
			if (!nw) return x[i];
			float v = rms_apply(x[i], scale, nw[i]);
			if (blockIdx.x == 0) nout[i] = v;
			return v;
		};
		if (D8<T>::block) {
			// Block types: x quantized to 8 bits as the CPU device does (q8.cuh).
			if (D8<T>::block == 32)
				quant32(val, cols, xq, D8<T>::q81);
			else
				quant256(val, cols, xq);
		} else {
			// Float types: x staged as f32.
			for (int i = threadIdx.x; i < cols; i += blockDim.x) xs[i] = val(i);
		}
	}
	__syncthreads();
	int nb = cols / (D8<T>::block ? D8<T>::block : 1);
	// QG (MV_SILU only): block b takes the units (rows) of groups of 32,
	// b, b + gridDim.x, …, each warp every NT/32-th row of a group, so
	// that a block holds a whole group of S, which it quantizes for the
	// launch after (q8_group).
	constexpr int per = QG ? 32 / (NT / 32) : 1; // rows a warp takes of a group
	for (int it = 0, g = g0; g < total;
	     it++, g = QG ? 32 * (blockIdx.x + it / per * gridDim.x) + it % per * (NT / 32) + warp : g + nwarps) {
		if (mode == MV_ROPE) {
			rope_rows<T, T2, PB, PRE_ROPE ? preTrips<T>() / 2 : 0>(g, lane, xq, xs, nb, cols, W0, W1, W2, rb, rb2, Y0, Y1, Y2, r0, r1, qo, ko, kc, vc,
			                                                  rope, rscale, posp, freqs, rsc, PRE ? pre : nullptr, preRow);
			continue;
		}
		// Row g of the launch: its weight row(s), product and index.
		const uint8_t *W, *U = 0;
		float *Y = Y0;
		int row = g;
		if (mode == MV_SILU) {
			W = W0 + g * rb, U = W1 + g * rb;
		} else if (g < r0) {
			W = W0 + g * rb;
		} else if (g < r0 + r1) {
			row = g - r0, W = W1 + row * rb, Y = Y1;
		} else {
			row = g - r0 - r1, W = W2 + row * rb, Y = Y2;
		}
		// MV_ADD's residual, asked for by lane 0 before the product, so that
		// its trip overlaps the row's instead of following it (a load after
		// the store to Y, which may alias res as far as nvcc knows, would
		// wait there; the fused launch's outputs overlap none of its inputs,
		// disjoint in fuse_cuda.go). MV_RES_LATE (flags) reads it after, as
		// before, to measure it; so do the float types (held across their
		// row, it made ptxas spill in mv_f16 and mv_bf16). Measured on an
		// H200 (tg128, MV_RES_LATE against this, alternated three times,
		// thirty-seventh session): TinyLlama Q4_0 1816 → 1825 tok/s, Q8_0
		// 1459 → 1470, Q4_K_M 1644 → 1651, Llama-7B Q4_K_M 565.9 → 567.1.
		const bool early = D8<T>::block && !(flags & MV_RES_LATE);
		float rv = 0;
		if (mode == MV_ADD && lane == 0 && early) rv = res[row];
		float y[2];
		if (D8<T>::block) {
			const uint8_t *rs[2] = {W, U};
			if (PS > 0 && mode == MV_SILU && W == preRow) {
				row_dotq<T, 2, PS>(rs, xq, nb, lane, y, pre);
			} else if (PRE && W == preRow) {
				row_dotq<T, 1, PRE ? preTrips<T>() : 0>(rs, xq, nb, lane, y, pre);
			} else if (mode == MV_SILU && SEQ) {
				row_dotq<T, 1>(rs, xq, nb, lane, y);
				row_dotq<T, 1>(rs + 1, xq, nb, lane, y + 1);
			} else if (mode == MV_SILU)
				row_dotq<T, 2>(rs, xq, nb, lane, y);
			else
				row_dotq<T, 1>(rs, xq, nb, lane, y);
		} else if (mode == MV_SILU) {
			row_dot2<T>(W, U, xs, cols / 8, lane, y[0], y[1]);
		} else {
			y[0] = row_dot<T>(W, xs, cols, lane);
		}
		if (QG) {
			float *sp = sg[it / per & 1];
			if (lane == 0) {
				float s = silu_of(y[0], y[1]);
				Y0[row] = y[0], Y1[row] = y[1], S[row] = s;
				sp[it % per * (NT / 32) + warp] = s;
			}
			if (it % per == per - 1) {
				__syncthreads();
				if (warp == 0) q8_group(sp[lane], (uint8_t *)qo, total, g / 32);
			}
			continue;
		}
		if (lane != 0) continue;
		if (mode == MV_SILU) {
			Y0[row] = y[0], Y1[row] = y[1], S[row] = silu_of(y[0], y[1]);
			continue;
		}
		Y[row] = y[0];
		if (mode == MV_ADD) S[row] = (early ? rv : res[row]) + y[0];
	}
}

// MV_K defines kernel kname, launch bound bounds (parenthesised), as mv with
// template arguments ... and mode md: the one signature of every decode
// mat-vec kernel (launchMV's arguments).
#define MV_K(kname, bounds, md, ...)                                                                                                      \
	extern "C" __global__ void __launch_bounds__ bounds                                                                                   \
	    kname(const float *x, const float *nw, float *nout, float eps, int cols, const uint8_t *W0, const uint8_t *W1, const uint8_t *W2,    \
	          long long rb, float *Y0, float *Y1, float *Y2, int r0, int r1, int r2, int mode, const float *res, float *S, float *qo,      \
	          float *ko, __half *kc, __half *vc, int rope, float rscale, const int *posp, const float *freqs, long long rb2, int flags) { \
		mv<__VA_ARGS__>(x, nw, nout, eps, cols, W0, W1, W2, rb, Y0, Y1, Y2, r0, r1, r2, md, res, S, qo, ko, kc, vc, rope, rscale, posp, \
		                freqs, rb2, flags);                                                                                            \
	}
#define MV(id, name) MV_K(mv_##name, (MV_THREADS), mode, id, MV_THREADS)
FOR_TYPES(MV)

// mvw_<type>: mv_<type> with 16 warps a block, for the common block types
// (the decode's default: mvWarps in fuse_cuda.go), so that a
// multiprocessor stages x for half as many blocks. The products are mv's
// bit for bit: the norm's sum is the first 256 threads', and a quantized
// block does not depend on which warp makes it.
#define MVW(id, name, nt) MV_K(mvw_##name, (nt), mode, id, nt)
MVW(T_Q4_0, q4_0, MVW_THREADS_SMALL)
MVW(T_Q8_0, q8_0, MVW_THREADS_SMALL)
MVW(T_Q4_K, q4_k, MVW_THREADS_SMALL)
MVW(T_Q5_K, q5_k, MVW_THREADS_BIG)
MVW(T_Q6_K, q6_k, MVW_THREADS_BIG)

// mvw2_q6_k: mvw_q6_k held to two blocks a multiprocessor, for launches of
// more rows than one block a multiprocessor takes (launchMV in
// fuse_cuda.go). MV_SILU's gate and up rows are taken one after the other
// (SEQ: row_dotq<T, 1> twice, the same products): their loads at once are
// what holds mvw_q6_k at 78 registers, and held to 64 it spills (above).
// ptxas: 64 registers, no spills. (Q5_K's, 88, still spills so; without the
// min-blocks bound both fit 64 registers without spills, but measured slower
// on an H200: tg128 TinyLlama Q5_K_M 1344 → 1322, Llama-7B 514 → 508, branch
// experiment/mvw2-q5k.) Measured
// on an H200 (tg128 tok/s, mvw_q6_k only → by launchMV's rule → mvw2_q6_k
// for every Q6_K launch, two rounds): Llama-7B Q4_K_M 499.1 / 498.1 → 514.2
// / 513.9 → 513.5 / 510.6, TinyLlama Q4_K_M 1394 / 1364 → 1404 / 1381 →
// 1418 / 1389, TinyLlama Q4_0 (only its output is Q6_K) 1444 / 1477 → 1487
// / 1514 → 1374 / 1507 (llama.cpp was building on the host's other cores).
#define MVW2(id, name) MV_K(mvw2_##name, (MVW_THREADS_BIG, 2), mode, id, MVW_THREADS_BIG, id, true)
MVW2(T_Q6_K, q6_k)

// mvp_<type> (Q4_0, Q8_0, Q4_K, Q6_K: Pre in q8.cuh): mvw_<type> with each warp's first row's first trips loaded
// before the wait (PRE, above), for MV_PLAIN and MV_ADD launches of at most
// one block a multiprocessor (launchMV): the products are mvw_'s bit for bit.
#define MVP(id, name) MV_K(mvp_##name, (MVW_THREADS_SMALL, 1), mode, id, MVW_THREADS_SMALL, id, false, false, true)
MVP(T_Q4_0, q4_0)
MVP(T_Q8_0, q8_0)
MVP(T_Q4_K, q4_k)
#define MVP_BIG(id, name) MV_K(mvp_##name, (MVW_THREADS_BIG, 1), mode, id, MVW_THREADS_BIG, id, false, false, true)
MVP_BIG(T_Q6_K, q6_k)
#ifndef MV_PRE_SILU
#define MV_PRE_SILU 1
#endif
MV_K(mvsp_q4_0, (MVW_THREADS_SMALL, 2), MV_SILU, T_Q4_0, MVW_THREADS_SMALL, T_Q4_0, false, false, true, MV_PRE_SILU)

// mvwq_q4_0 and mvwq_q8_0: mvw_'s MV_SILU launch with each block taking
// whole groups of 32 rows (QG), which it also writes quantized in blocks of
// 32 (q8_group, xq_at's layout) to qo, the input the down projection's
// launch after copies in (MV_QIN) instead of making it from S: made once
// for the launch, not by each of its blocks. For a down projection of Q4_0
// or Q8_0 (q81 false); q8Pair (fuse_cuda.go) pairs the two. Q4_0's is
// without mvsp_q4_0's early loads: with them (mvsq_q4_0, thirty-ninth
// session) the gate and up launch lost more than the down launch gained.
MV_K(mvwq_q4_0, (MVW_THREADS_SMALL), MV_SILU, T_Q4_0, MVW_THREADS_SMALL, T_Q4_0, false, false, false, 0, true)
MV_K(mvwq_q8_0, (MVW_THREADS_SMALL), MV_SILU, T_Q8_0, MVW_THREADS_SMALL, T_Q8_0, false, false, false, 0, true)

// mvr_<type>_<type2> and mvrw_<type>_<type2>: MV_ROPE's launch (on eight and
// on sixteen warps a block) where v's weight is of type2 and q's and k's of
// type, whose activation rows are quantized alike (mixedRope in
// fuse_cuda.go), so that a Q4_K_M file's layers with a Q6_K attn_v (half
// of them, llama-quantize's "more bits" layers) are one launch and not three
// (q and k; v; rope_kv). Each product is the one-type kernels' bit for bit.
// pb sets PB: q's and k's pairs with both rows' loads at once where rope's
// bit 26 asks (pair_dots), which in these kernels, without MV_SILU's code,
// fits 64 registers without spills; so Q4_K has one of its own,
// mvr(w)_q4_k_q4_k (ropeKernels in fuse_cuda.go).
#define MVR_K(kname, nt, id, id2, pb) MV_K(kname, (nt), MV_ROPE, id, nt, id2, false, pb)
#define MVR(id, name, id2, name2, pb)                                     \
	MVR_K(mvr_##name##_##name2, MV_THREADS, id, id2, pb)                  \
	MVR_K(mvrw_##name##_##name2, MVW_THREADS_SMALL, id, id2, pb)
MVR(T_Q4_K, q4_k, T_Q6_K, q6_k, true)
MVR(T_Q4_K, q4_k, T_Q4_K, q4_k, true)
// mvrp_q4_k_q4_k: mvrw_q4_k_q4_k with each warp's first unit's two rows'
// first trip loaded before the wait (PRE), for the launches of at most one
// block a multiprocessor under PDL (launchMV); mvrp_q8_0_q8_0 Q8_0's
// (91 registers, no spills; tg128 on an H200, thirty-fourth session,
// HYBRID_CUDA_PRE_ROPE=0's launch against it: TinyLlama Q8_0 1393 → 1438).
// (mvrp_q4_k_q6_k, v of Q6_K, spilled 72 bytes at 128 registers and gained
// nothing; mvsp_ for Q4_K's and Q8_0's gate and up neither: branch
// experiment/pre-more.)
MV_K(mvrp_q4_k_q4_k, (MVW_THREADS_SMALL, 1), MV_ROPE, T_Q4_K, MVW_THREADS_SMALL, T_Q4_K, false, true, true)
MV_K(mvrp_q8_0_q8_0, (MVW_THREADS_SMALL, 1), MV_ROPE, T_Q8_0, MVW_THREADS_SMALL, T_Q8_0, false, true, true)
MVR(T_Q5_K, q5_k, T_Q6_K, q6_k, false)
MVR(T_Q5_0, q5_0, T_Q8_0, q8_0, false)

// rope_kv: the decode step's RoPE of the queries q (qw features) and keys k
// (kw) into qo and ko, and the append of the rotated keys and the values v
// to the layer's caches at the step's position, in one launch; or the same
// for each row of a batched step (rope, rope and kv_append's values). Thread i
// takes pair i of q (pair i%half of head i/half, rope_feats), then of k,
// then two values.
extern "C" __global__ void rope_kv(const float *q, const float *k, const float *v, float *qo, float *ko, __half *kc, __half *vc, int qw, int kw,
                                   int headDim, int dims, float scale, const int *posp, int neox, const float *freqs, const int *rowp) {
	// A batched step's row blockIdx.y (rowp set): its own position and
	// cell, rowp[2r] and rowp[2r+1] + rowp[2r], as rope and kv_append
	// read them.
	int r = blockIdx.y;
	int pos = rowp ? rowp[2 * r] : *posp, half = headDim / 2;
	int i = blockIdx.x * blockDim.x + threadIdx.x, qp = qw / 2, kp = kw / 2;
	long long base = ((long long)pos + (rowp ? rowp[2 * r + 1] : 0)) * kw;
	q += (long long)r * qw, qo += (long long)r * qw, k += (long long)r * kw, ko += (long long)r * kw, v += (long long)r * kw;
	if (i < qp + kp) {
		bool isq = i < qp;
		int p = isq ? i : i - qp, j = p % half, f0, f1;
		rope_feats(j, dims, neox, f0, f1);
		int o0 = (p / half) * headDim + f0, o1 = (p / half) * headDim + f1;
		const float *x = isq ? q : k;
		float y0, y1;
		rope_pair(x[o0], x[o1], pos, j, dims, scale, freqs, y0, y1);
		if (isq) {
			qo[o0] = y0, qo[o1] = y1;
		} else {
			ko[o0] = y0, ko[o1] = y1;
			kc[base + o0] = __float2half_rn(y0), kc[base + o1] = __float2half_rn(y1);
		}
	} else if (i < qp + 2 * kp) {
		int off = 2 * (i - qp - kp);
		vc[base + off] = __float2half_rn(v[off]), vc[base + off + 1] = __float2half_rn(v[off + 1]);
	}
}

// Batched steps (several tokens, under the tensor-core batch): the mat-vecs
// of the decode step for n activation rows at once, so that a batched decode
// step of n sequences computes each row exactly as that sequence's decode
// step alone does, bit for bit, while reading each weight row once per
// MVB_NR activation rows instead of once per row.

// xq_<type> quantizes n rows of x (cols each) into xq, row r's XQ at
// r·stride (stride a multiple of 16, at least xqBytes(cols)), as the decode
// mat-vec of weight type T stages its row (quant32 or quant256, their
// pieces and blocks taken as they take them). A block of 256 threads takes
// 2048 elements (blockIdx.y) of a row (blockIdx.x), so that a step of few
// rows of many columns runs on more than one multiprocessor a row. It may
// first do the op that makes those rows, so that a batched step launches
// one kernel for both: with nw set, x's rows RMS-normalised by nw and eps
// (rms_norm's values: block_rms_scale, then rms_apply, every block of a row
// finding the same scale); with u set, silu(x)·u (silu_mul's, silu_of). y
// then gets the op's output, exactly what that op's own launch writes.
template <int T>
__device__ __forceinline__ void xq_rows(const float *x, const float *nw, const float *u, float *y, float eps, uint8_t *xq, int cols, long long stride) {
	__shared__ float part[32];
	long long off = (long long)blockIdx.x * cols;
	const float *xr = x + off;
	XQ q = xq_at(xq + blockIdx.x * stride, cols);
	float scale = nw ? block_rms_scale(xr, cols, eps, part) : 0; // nw is the same for the whole block
	auto val = [&](int i) {
		float v = nw ? rms_apply(xr[i], scale, nw[i]) : u ? silu_of(xr[i], u[off + i]) : xr[i];
		if (y) y[off + i] = v;
		return v;
	};
	float v[8];
	if (D8<T>::block == 32) {
		int c = blockIdx.y * blockDim.x + threadIdx.x; // quant32's piece of 8
		if (c < cols / 8) {
#pragma unroll
			for (int k = 0; k < 8; k++) v[k] = val(8 * c + k);
			quant32_piece(c, v, q, D8<T>::q81);
		}
	} else if (D8<T>::block == 256) {
		int b = blockIdx.y * (blockDim.x >> 5) + (threadIdx.x >> 5); // quant256's block: a warp's
		if (b < cols / 256) {
			int c = 32 * b + (threadIdx.x & 31);
#pragma unroll
			for (int k = 0; k < 8; k++) v[k] = val(8 * c + k);
			quant256_piece(c, v, q);
		}
	}
}

#define XQROWS(id, name)                                                                                                             \
	extern "C" __global__ void xq_##name(const float *x, const float *nw, const float *u, float *y, float eps, uint8_t *xq, int cols, \
	                                     long long stride) {                                                                          \
		xq_rows<id>(x, nw, u, y, eps, xq, cols, stride);                                                                              \
	}
FOR_TYPES(XQROWS)

#define MVB_NR 8 // activation rows per pass over a weight row

// row_dotx is row_dotq's dot product of one weight row W with nv (≤ NR)
// activation rows, row t's XQ at xb + t·xs, in one pass over the row: each
// (weight row, activation row) pair is summed in exactly the order row_dotq
// sums it, so each result equals the decode mat-vec's. A block's integer sums
// are reduced one activation row at a time, so that only the NR running
// sums stay live across the rows.
template <int T, int NR>
__device__ __forceinline__ void row_dotx(const uint8_t *W, const uint8_t *xb, int xs, int cols, int nv, int nb, int lane, float *y) {
	typedef D8<T> D;
	const int per = 32 / D::TPB;
	int k = lane % D::TPB, first = lane / D::TPB;
	float acc[NR];
#pragma unroll
	for (int t = 0; t < NR; t++) acc[t] = 0;
	int iters = (nb + per - 1) / per;
#pragma unroll 2
	for (int it = 0; it < iters; it++) {
		int b = it * per + first;
		bool ok = b < nb;
		const uint8_t *blk = W + blkAt<T>(b);
#pragma unroll
		for (int t = 0; t < NR; t++) {
			if (t >= nv) break; // the same for every lane
			XQ x = xq_at((uint8_t *)xb + t * xs, cols);
			int dot = 0, off = 0;
			uint32_t hw = 0;
			if (ok) D::part(blk, k, x, b, dot, off, hw);
#pragma unroll
			for (int o = 1; o < D::TPB; o <<= 1) {
				dot += __shfl_xor_sync(FULL, dot, o);
				if (D::hasOff) off += __shfl_xor_sync(FULL, off, o);
			}
			if (ok && k == 0) acc[t] = __fadd_rn(acc[t], D::fin(blk, x, b, dot, off, hw));
		}
	}
#pragma unroll
	for (int t = 0; t < NR; t++) {
		float s = acc[t];
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
		y[t] = s;
	}
}

// mvb_<type>: Y_j[t, row] = W_j[row] · x[t] for the n activation rows of xq
// (xq_<type>, row t at t·xs) against up to three weights W0..W2 of one type
// and row length rb (r0, r1, r2 rows, counted on as one range of rows).
// Block (gx, gy) takes activation rows gx·nr.. (at most nr ≤ MVB_NR of
// them), staged into shared memory, and weight rows gy·8·rw..: each warp
// rw of them, 8 apart, one after another. Activation groups vary fastest
// across blocks, so the blocks that read one weight row run together and
// all but the first find it in L2.
template <int T>
__device__ __forceinline__ void mvb(const uint8_t *xq, int xs, int n, int nr, int rw, int cols, const uint8_t *W0, const uint8_t *W1, const uint8_t *W2,
                                    long long rb, float *Y0, float *Y1, float *Y2, int r0, int r1, int r2) {
	extern __shared__ int4 xsm[];
	const int warps = MV_THREADS / 32;
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, total = r0 + r1 + r2;
	int first = blockIdx.y * warps * rw;
	// The warp's weight rows are on their way to L2 while x is staged.
	for (int r = 0; r < rw; r++) {
		int row = first + r * warps + warp;
		if (row >= total) break;
		const uint8_t *W = row < r0 ? W0 + row * rb : row < r0 + r1 ? W1 + (row - r0) * rb : W2 + (row - r0 - r1) * rb;
		for (long long o = 128 * lane; o < rb; o += 32 * 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(W + o));
	}
	int g = blockIdx.x * nr, nv = min(nr, n - g);
	const int4 *src = (const int4 *)(xq + (long long)g * xs);
	for (int i = threadIdx.x; i < nv * xs / 16; i += blockDim.x) xsm[i] = src[i];
	__syncthreads();
	int nb = cols / (D8<T>::block ? D8<T>::block : 1);
	for (int r = 0; r < rw; r++) {
		int row = first + r * warps + warp, rows = r0;
		if (row >= total) return;
		const uint8_t *W = W0;
		float *Y = Y0;
		if (row >= r0 + r1) {
			row -= r0 + r1, W = W2, Y = Y2, rows = r2;
		} else if (row >= r0) {
			row -= r0, W = W1, Y = Y1, rows = r1;
		}
		float y[MVB_NR];
		row_dotx<T, MVB_NR>(W + row * rb, (const uint8_t *)xsm, xs, cols, nv, nb, lane, y);
		if (lane == 0)
#pragma unroll
			for (int t = 0; t < MVB_NR; t++)
				if (t < nv) Y[(long long)(g + t) * rows + row] = y[t];
	}
}

#define MVB(id, name)                                                                                                                      \
	extern "C" __global__ void __launch_bounds__(MV_THREADS)                                                                               \
	    mvb_##name(const uint8_t *xq, int xs, int n, int nr, int rw, int cols, const uint8_t *W0, const uint8_t *W1, const uint8_t *W2, long long rb, \
	               float *Y0, float *Y1, float *Y2, int r0, int r1, int r2) {                                                              \
		if (D8<id>::block) mvb<id>(xq, xs, n, nr, rw, cols, W0, W1, W2, rb, Y0, Y1, Y2, r0, r1, r2);                                          \
	}
FOR_TYPES(MVB)

// mvt_<type> (and mvt2_<type>): mvb's product on 8-bit tensor cores, for
// up to 16 (32) activation rows, each row's result bit for bit the decode
// mat-vec's. The activations are xq_<type>'s rows (as mvb's); a block's
// integer sums come from mma (exact, like dp4a's), and every float step of
// row_dotq is redone in its order: the decode warp's lane group g (of
// per = 32/TPB) adds the terms D8<T>::fin of blocks g, g+per, … in turn, and
// the groups are then added by butterfly (g with g^(per/2), then
// g^(per/4), …, and +0 from the TPB-1 idle lanes of each group).
//
// A block of W warps (4, 8 or 16: mvtWarps) takes 8 weight rows
// (the mma's B, n = 8: lane l's row l/4, read straight from the weights,
// or, where stage is set, from shared memory, the eight rows copied there
// first in 16-byte pieces, all at once: Q4_0's two-byte reads of eight rows
// spread over memory made it 2.2× a single row's mat-vec at 4 rows) and
// all activation rows (A, m = 16 a tile, from L1); warp w takes the
// decode's groups g ≡ w (mod W), NJ = per/W of them, with a running sum
// each, so that the block reads each weight byte once and in order. A
// warp's groups are added as the butterfly's first levels add them; the W
// warps' sums, as its last levels: (V0 + V2) + (V1 + V3) for four. Within
// a 32-element block the mma's k order is free (the sum is exact), so lane
// t takes elements 8t..8t+7: one 8-byte load of each activation row. With
// S set (one weight), the product is also added to R into S, as the
// residual add after it does.
#define MVT_WARPS 4

// s4 turns four nibbles n (in bytes) into the int8s n-8; s6 turns four
// 6-bit values q into q-32.
__device__ __forceinline__ uint32_t s4(uint32_t v) { return ((v & NIB) + 0x78787878u) ^ 0x80808080u; }
__device__ __forceinline__ uint32_t s6(uint32_t q) { return (q + 0x60606060u) ^ 0x80808080u; }

// XT locates the parts of xq_<type>'s rows: quants at 0, d at d, the sums
// of 16 (bs) at s bytes from a row's start.
struct XT {
	int d, s;
};

__device__ __forceinline__ float xd(const uint8_t *x, XT o, int b) { return ((const float *)(x + o.d))[b]; }

// a32 is the A operand of the 32 activations from element e of rows x0
// (the tile's row l/4) and x1 (l/4+8), lane t taking elements 8t..8t+7.
__device__ __forceinline__ void a32(const uint8_t *x0, const uint8_t *x1, int e, int tig, uint32_t *a) {
	uint2 u = *(const uint2 *)(x0 + xo(e + 8 * tig)), v = *(const uint2 *)(x1 + xo(e + 8 * tig));
	a[0] = u.x, a[1] = v.x, a[2] = u.y, a[3] = v.y;
}

// TC<T> is weight type T in mvt: term gives block b's float terms f[mt][i]
// of the lane's pairs of each activation tile mt: i = 0 (activation row
// l/4, weight row 2t), 1 (l/4, 2t+1), 2 (l/4+8, 2t), 3 (l/4+8, 2t+1),
// with t = l%4; bB is block b of the lane's B row (l/4), bC0 and bC1 of
// weight rows 2t and 2t+1, x[mt] the two activation rows.
template <int T> struct TC { // not a type mvt is instantiated for
	template <int MT>
	static __device__ __forceinline__ void term(const uint8_t *, const uint8_t *, const uint8_t *, const uint8_t *const (&)[MT][2], XT, int, int,
	                                            float (&f)[MT][4]) {}
};

// tcDM is the term of the 32-element types whose fin is d_w·d_x·dot (Q4_0,
// Q8_0), given the B operand b0, b1.
// d0 and d1 are weight rows 2t's and 2t+1's scales.
template <int MT>
__device__ __forceinline__ void tcDM(uint32_t b0, uint32_t b1, float d0, float d1, const uint8_t *const (&x)[MT][2], XT o, int b, int tig,
                                     float (&f)[MT][4]) {
#pragma unroll
	for (int mt = 0; mt < MT; mt++) {
		uint32_t a[4];
		int c[4];
		a32(x[mt][0], x[mt][1], 32 * b, tig, a);
		mma_s8k32(c, a, b0, b1);
		float x0 = xd(x[mt][0], o, b), x1 = xd(x[mt][1], o, b);
		f[mt][0] = fmd(d0, x0, (float)c[0]), f[mt][1] = fmd(d1, x0, (float)c[1]);
		f[mt][2] = fmd(d0, x1, (float)c[2]), f[mt][3] = fmd(d1, x1, (float)c[3]);
	}
}

// Q4_0: elements 8t.. are the low nibbles of bytes 8t.. (t < 2) or the
// high nibbles of bytes 8(t-2).., as n-8: the decode's Σnx - 8Σx.
template <> struct TC<T_Q4_0> {
	template <int MT>
	static __device__ __forceinline__ void term(const uint8_t *bB, const uint8_t *bC0, const uint8_t *bC1, const uint8_t *const (&x)[MT][2], XT o, int b,
	                                            int tig, float (&f)[MT][4]) {
		// bB is the block's scale, its quants 16 + 14·(b%8) bytes on
		// (regrouped, grp_q): one 8-byte load a lane. (In the file's
		// 18-byte blocks, aligned words with the scales by shuffle, as
		// Q8_0 takes them, measured slower than two-byte loads: 4 rows of
		// 5632×2048, 22.9 µs against 18.1.)
		uint2 q = *(const uint2 *)(bB + 16 + 14 * (b & 7) + 8 * (tig & 1));
		int sh = 4 * (tig >> 1);
		tcDM<MT>(s4(q.x >> sh), s4(q.y >> sh), f16(bC0), f16(bC1), x, o, b, tig, f);
	}
};

template <> struct TC<T_Q8_0> {
	template <int MT>
	static __device__ __forceinline__ void term(const uint8_t *bB, const uint8_t *bC0, const uint8_t *bC1, const uint8_t *const (&x)[MT][2], XT o, int b,
	                                            int tig, float (&f)[MT][4]) {
		// bB is the block's scale, its quants 16 + 30·(b%8) bytes on
		// (regrouped, grp_q): one 8-byte load a lane; the scales by
		// shuffle from the lanes whose B row they are (lane 4r has row
		// r's): one load a lane instead of two (in the file's blocks, 4
		// rows of 5632×2048: 17.3 µs against 18.4).
		uint2 w = *(const uint2 *)(bB + 16 + 30 * (b & 7) + 8 * tig);
		float dB = f16(bB);
		tcDM<MT>(w.x, w.y, __shfl_sync(FULL, dB, 8 * tig), __shfl_sync(FULL, dB, 8 * tig + 4), x, o, b, tig, f);
	}
};

// Q4_K: sub-block j's sums p_j by mma on the raw nibbles (bytes 32(j/2)..
// of the quants, low nibbles for even j); dot = Σ sc_j·p_j and off =
// Σ m_j·(Σx of j's two sixteens), as partK's lanes add them; fin as finK.
template <> struct TC<T_Q4_K> {
	template <int MT>
	static __device__ __forceinline__ void term(const uint8_t *bB, const uint8_t *bC0, const uint8_t *bC1, const uint8_t *const (&x)[MT][2], XT o, int b,
	                                            int tig, float (&f)[MT][4]) {
		uint32_t s0 = u32(bC0 + 4), s1 = u32(bC0 + 8), s2 = u32(bC0 + 12);
		uint32_t t0 = u32(bC1 + 4), t1 = u32(bC1 + 8), t2 = u32(bC1 + 12);
		int dot[MT][4], off[MT][4];
#pragma unroll
		for (int mt = 0; mt < MT; mt++)
#pragma unroll
			for (int i = 0; i < 4; i++) dot[mt][i] = 0, off[mt][i] = 0;
#pragma unroll
		for (int c2 = 0; c2 < 4; c2++) {
			uint2 w = *(const uint2 *)(bB + 16 + 32 * c2 + 8 * tig);
#pragma unroll
			for (int h = 0; h < 2; h++) {
				int j = 2 * c2 + h, sc0, m0, sc1, m1;
				uint32_t b0 = w.x >> (4 * h) & NIB, b1 = w.y >> (4 * h) & NIB;
				scaleMinK4w(j, s0, s1, s2, sc0, m0);
				scaleMinK4w(j, t0, t1, t2, sc1, m1);
#pragma unroll
				for (int mt = 0; mt < MT; mt++) {
					uint32_t a[4];
					int c[4];
					a32(x[mt][0], x[mt][1], 256 * b + 32 * j, tig, a);
					mma_s8k32(c, a, b0, b1);
					uint32_t u = *(const uint32_t *)(x[mt][0] + o.s + 2 * (16 * b + 2 * j));
					uint32_t v = *(const uint32_t *)(x[mt][1] + o.s + 2 * (16 * b + 2 * j));
					int xs0 = (int)(short)(u & 0xffff) + (int)(short)(u >> 16), xs1 = (int)(short)(v & 0xffff) + (int)(short)(v >> 16);
					dot[mt][0] += sc0 * c[0], dot[mt][1] += sc1 * c[1], dot[mt][2] += sc0 * c[2], dot[mt][3] += sc1 * c[3];
					off[mt][0] += m0 * xs0, off[mt][1] += m1 * xs0, off[mt][2] += m0 * xs1, off[mt][3] += m1 * xs1;
				}
			}
		}
		float d0 = f16(bC0), m0 = f16(bC0 + 2), d1 = f16(bC1), m1 = f16(bC1 + 2);
#pragma unroll
		for (int mt = 0; mt < MT; mt++) {
			float x0 = xd(x[mt][0], o, b), x1 = xd(x[mt][1], o, b);
			f[mt][0] = __fmul_rn(x0, __fsub_rn(__fmul_rn(d0, (float)dot[mt][0]), __fmul_rn(m0, (float)off[mt][0])));
			f[mt][1] = __fmul_rn(x0, __fsub_rn(__fmul_rn(d1, (float)dot[mt][1]), __fmul_rn(m1, (float)off[mt][1])));
			f[mt][2] = __fmul_rn(x1, __fsub_rn(__fmul_rn(d0, (float)dot[mt][2]), __fmul_rn(m0, (float)off[mt][2])));
			f[mt][3] = __fmul_rn(x1, __fsub_rn(__fmul_rn(d1, (float)dot[mt][3]), __fmul_rn(m1, (float)off[mt][3])));
		}
	}
};

// Q6_K: each sixteen G of elements 16G.. (half G/8, chunk κ = (G%8)/2,
// bytes 16(G%2)..) by a k16 mma on q-32; dot = Σ sc_G·p_G as the decode's
// Σ sc·(Σqx - 32Σx); fin d_x·d_w·dot.
template <> struct TC<T_Q6_K> {
	template <int MT>
	static __device__ __forceinline__ void term(const uint8_t *bB, const uint8_t *bC0, const uint8_t *bC1, const uint8_t *const (&x)[MT][2], XT o, int b,
	                                            int tig, float (&f)[MT][4]) {
		int dot[MT][4];
#pragma unroll
		for (int mt = 0; mt < MT; mt++)
#pragma unroll
			for (int i = 0; i < 4; i++) dot[mt][i] = 0;
#pragma unroll
		for (int hf = 0; hf < 2; hf++)
#pragma unroll
			for (int par = 0; par < 2; par++) {
				// bB is the block's group (regrouped, q6_grp): aligned words.
				const uint8_t *ql = q6_ql(bB, b) + 64 * hf + 16 * par + 4 * tig;
				uint32_t L0 = u32(ql), L1 = u32(ql + 32), H = u32(q6_qh(bB, b) + 32 * hf + 16 * par + 4 * tig);
#pragma unroll
				for (int k = 0; k < 4; k++) {
					int G = 8 * hf + 2 * k + par;
					uint32_t l = k & 1 ? L1 : L0;
					uint32_t bq = s6((l >> (4 * (k >> 1)) & NIB) | (H >> (2 * k) & 0x03030303u) << 4);
					int sc0 = (int8_t)q6_sc(bC0, b)[G], sc1 = (int8_t)q6_sc(bC1, b)[G];
#pragma unroll
					for (int mt = 0; mt < MT; mt++) {
						int c[4], e = 256 * b + 16 * G + 4 * tig;
						mma_s8k16(c, *(const uint32_t *)(x[mt][0] + xo(e)), *(const uint32_t *)(x[mt][1] + xo(e)), bq);
						dot[mt][0] += sc0 * c[0], dot[mt][1] += sc1 * c[1], dot[mt][2] += sc0 * c[2], dot[mt][3] += sc1 * c[3];
					}
				}
			}
		float d0 = f16(q6_d(bC0, b)), d1 = f16(q6_d(bC1, b));
#pragma unroll
		for (int mt = 0; mt < MT; mt++) {
			float x0 = xd(x[mt][0], o, b), x1 = xd(x[mt][1], o, b);
			f[mt][0] = fmd(x0, d0, (float)dot[mt][0]), f[mt][1] = fmd(x0, d1, (float)dot[mt][1]);
			f[mt][2] = fmd(x1, d0, (float)dot[mt][2]), f[mt][3] = fmd(x1, d1, (float)dot[mt][3]);
		}
	}
};

// mvtRow is weight row r of the ranges W0 (r0 rows), W1 (r1), W2.
__device__ __forceinline__ const uint8_t *mvtRow(int r, const uint8_t *W0, const uint8_t *W1, const uint8_t *W2, long long rb, int r0, int r1) {
	return r < r0 ? W0 + r * rb : r < r0 + r1 ? W1 + (r - r0) * rb : W2 + (r - r0 - r1) * rb;
}

template <int T, int MT, int W>
__device__ __forceinline__ void mvt(const uint8_t *xq, int xs, int n, int cols, const uint8_t *W0, const uint8_t *W1, const uint8_t *W2, long long rb,
                                    float *Y0, float *Y1, float *Y2, int r0, int r1, int r2, int stage, const float *R, float *S) {
	typedef D8<T> D;
	const int per = 32 / D::TPB, NJ = per / W;
	static_assert(NJ >= 1, "more warps than the decode's lane groups");
	__shared__ float part[W][MT][4][32];
	extern __shared__ uint4 wst[];
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
	int total = r0 + r1 + r2, row0 = blockIdx.x * 8;
	// Rows past the last are read as the last, and not written.
	const uint8_t *bB = mvtRow(min(row0 + g, total - 1), W0, W1, W2, rb, r0, r1);
	const uint8_t *bC0 = mvtRow(min(row0 + 2 * tig, total - 1), W0, W1, W2, rb, r0, r1);
	const uint8_t *bC1 = mvtRow(min(row0 + 2 * tig + 1, total - 1), W0, W1, W2, rb, r0, r1);
	if (stage) {
		// The block's eight weight rows (rb bytes each, a whole number of
		// 16) copied to shared memory first, all at once and coalesced,
		// then read from there: the same bytes, so the same sums. Rows
		// are rb + 16 bytes apart there, so that the eight rows a warp
		// reads at one offset fall in different banks.
		uint8_t *ws = (uint8_t *)wst;
		int cpr = (int)(rb >> 4), pitch = (int)rb + 16;
		for (int c = threadIdx.x; c < 8 * cpr; c += blockDim.x) {
			int r = c / cpr, k = c - r * cpr;
			cp_async16(ws + r * pitch + 16 * k, mvtRow(min(row0 + r, total - 1), W0, W1, W2, rb, r0, r1) + 16 * k, 16);
		}
		cp_async_commit();
		cp_async_wait<0>();
		__syncthreads();
		bB = ws + g * pitch, bC0 = ws + 2 * tig * pitch, bC1 = ws + (2 * tig + 1) * pitch;
	}
	const uint8_t *x[MT][2];
#pragma unroll
	for (int mt = 0; mt < MT; mt++)
#pragma unroll
		for (int h = 0; h < 2; h++) x[mt][h] = xq + (long long)min(16 * mt + 8 * h + g, n - 1) * xs;
	XT o;
	o.d = cols + 16 * ((cols + 255) / 256), o.s = o.d + 4 * (cols / 32); // xq_at's layout
	float acc[NJ][MT][4];
#pragma unroll
	for (int j = 0; j < NJ; j++)
#pragma unroll
		for (int mt = 0; mt < MT; mt++)
#pragma unroll
			for (int i = 0; i < 4; i++) acc[j][mt][i] = 0;
	// The whole passes (a block for every group) without a condition, so
	// that each pass's loads are all on their way before its first mma
	// (measured with the condition inside: Q4_0 at 2 rows twice the decode
	// mat-vec's time); then the last, partial pass.
	int nb = cols / D::block, whole = nb / per;
	auto pass = [&](int it, bool part) {
#pragma unroll
		for (int j = 0; j < NJ; j++) {
			int b = it * per + warp + W * j;
			if (part && b >= nb) break; // the same for the whole warp
			float f[MT][4];
			long long at = blkAt<T>(b);
			TC<T>::template term<MT>(bB + at, bC0 + at, bC1 + at, x, o, b, tig, f);
#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int i = 0; i < 4; i++) acc[j][mt][i] = __fadd_rn(acc[j][mt][i], f[mt][i]);
		}
	};
	for (int it = 0; it < whole; it++) pass(it, false);
	if (whole * per < nb) pass(whole, true);
#pragma unroll
	for (int m = NJ / 2; m >= 1; m >>= 1)
#pragma unroll
		for (int j = 0; j < m; j++)
#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int i = 0; i < 4; i++) acc[j][mt][i] = __fadd_rn(acc[j][mt][i], acc[j + m][mt][i]);
#pragma unroll
	for (int mt = 0; mt < MT; mt++)
#pragma unroll
		for (int i = 0; i < 4; i++) part[warp][mt][i][lane] = acc[0][mt][i];
	__syncthreads();
	if (warp != 0) return;
#pragma unroll
	for (int mt = 0; mt < MT; mt++)
#pragma unroll
		for (int i = 0; i < 4; i++) {
			// The butterfly's last levels over the warps, as over
			// the warp's own groups above.
			float p[W];
#pragma unroll
			for (int w = 0; w < W; w++) p[w] = part[w][mt][i][lane];
#pragma unroll
			for (int m = W / 2; m >= 1; m >>= 1)
#pragma unroll
				for (int w = 0; w < m; w++) p[w] = __fadd_rn(p[w], p[w + m]);
			float v = p[0];
			if (D::TPB > 1) v = __fadd_rn(v, 0.0f);
			int t = 16 * mt + 8 * (i >> 1) + g, row = row0 + 2 * tig + (i & 1);
			if (t >= n || row >= total) continue;
			if (row < r0) {
				long long at = (long long)t * r0 + row;
				Y0[at] = v;
				if (S) S[at] = R[at] + v; // the residual add after a lone weight (add's y = a + b)
			} else if (row < r0 + r1)
				Y1[(long long)t * r1 + row - r0] = v;
			else
				Y2[(long long)t * r2 + row - r0 - r1] = v;
		}
}

// mvt_<type> takes 4 warps a block, mvtw_<type> 8 (more warps in flight
// where a launch has few blocks: a narrow matrix); mvt2 and mvtw2 take two
// tiles of activation rows.
#define MVTK(kname, id, MT, W)                                                                                                                        \
	extern "C" __global__ void __launch_bounds__(32 * W)                                                                                             \
	    kname(const uint8_t *xq, int xs, int n, int cols, const uint8_t *W0, const uint8_t *W1, const uint8_t *W2, long long rb, float *Y0, float *Y1, \
	          float *Y2, int r0, int r1, int r2, int stage, const float *R, float *S) {                                                                 \
		mvt<id, MT, W>(xq, xs, n, cols, W0, W1, W2, rb, Y0, Y1, Y2, r0, r1, r2, stage, R, S);                                                       \
	}
#define MVT(id, name)                      \
	MVTK(mvt_##name, id, 1, MVT_WARPS)     \
	MVTK(mvt2_##name, id, 2, MVT_WARPS)    \
	MVTK(mvtw_##name, id, 1, 2 * MVT_WARPS) \
	MVTK(mvtw2_##name, id, 2, 2 * MVT_WARPS)
MVT(T_Q4_0, q4_0)
MVT(T_Q8_0, q8_0)
MVT(T_Q4_K, q4_k)
MVT(T_Q6_K, q6_k)
// mvtx_<type>: sixteen warps, for the types of 16 lane groups or more.
MVTK(mvtx_q4_0, T_Q4_0, 1, 4 * MVT_WARPS)
MVTK(mvtx2_q4_0, T_Q4_0, 2, 4 * MVT_WARPS)
MVTK(mvtx_q8_0, T_Q8_0, 1, 4 * MVT_WARPS)
MVTK(mvtx2_q8_0, T_Q8_0, 2, 4 * MVT_WARPS)
