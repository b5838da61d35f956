// stamps times the parts of a decode launch's fixed cost from inside the
// kernels. Issue 15's decode spends about 2.5 µs a dependent launch besides
// its bytes (bench/RESULTS.md), and boundary.cu put a 2048×2048 phase with
// each warp's first row held before griddepcontrol.wait at 2.36 µs against an
// empty launch's 0.67, without saying where the rest goes. Here every block
// of every phase of a chain of N programmatic dependent launches (the
// decode's way since the thirty-second session) writes the GPU's global
// nanosecond clock (%globaltimer) at four points:
//
//	t0  the block starts (launch_dependents, its first row's loads asked for);
//	t1  griddepcontrol.wait has returned: the launch before is complete and
//	    its writes visible;
//	t2  x is staged (read from L2, quantized to 8 bits, __syncthreads);
//	t3  the block's last row is stored (__syncthreads).
//
// From them, per phase (the median over phases 8..N-1):
//
//	release  min t1 of the phase − max t3 of the phase before: from the last
//	         block's last store to the first block let through;
//	skew     max t1 − min t1: how far apart the blocks are let through;
//	stage    the median and the largest t2 − t1 over blocks;
//	rows     the median and the largest t3 − t2 over blocks;
//	period   max t3 − max t3 of the phase before: the phase's time in the chain.
//
// The ways, each a chain at one block a multiprocessor (the o and down
// launches' grid, which leaves room for the launch after), every launch
// programmatic dependent:
//
//	empty         wait, then the stamps: the boundary alone;
//	stage(/8)     wait, stage x (all its columns, or an eighth), then each
//	              warp one row from the staged x (no weights);
//	load(/8)      the same loads summed into shared memory, not quantized;
//	q8in          x written quantized by the phase before (timing only);
//	cl8           x staged by a cluster of 8 blocks, each quantizing an
//	              eighth into all eight's shared memory (cstaged);
//	mv, mv q8in   the mat-vec, each warp's first row held before the wait (as
//	              the decode's mvp_ kernels), from x or from a quantized x
//	              (shapes up to 4096 columns);
//
// and, first, normChains: the decode's own staging functions (kernels/q8.cuh,
// common.cuh) in blocks of 512, an input copied ready, quantized, or
// normalised and quantized with block_sum or block_sum_all. The clock's step
// is measured first: a part shorter than it is not resolved (on an H200 the
// differences come in steps of 0.256 µs, so the event-timed chain/ph is the
// number to read). A staged row is at least 256 columns (stage() shuffles
// across whole warps). Measured in the thirty-eighth session: bench/RESULTS.md.
//
// It is not part of the Go build. Run it on the GPU:
//
//	nvcc -O3 -arch=sm_90 -o stamps stamps.cu && ./stamps
//
// STAMPS_NORM_ONLY=1 runs normChains alone.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <cooperative_groups.h>

#include "matvec.cuh"
#include "../kernels/common.cuh"
#include "../kernels/q8.cuh"

namespace cg = cooperative_groups;

__device__ __forceinline__ unsigned long long gtime() {
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

// tick reads the clock n times in one thread and keeps the smallest step
// it saw and how many distinct values.
__global__ void tick(unsigned long long *out, int n) {
	unsigned long long prev = gtime(), step = ~0ull, distinct = 0;
	for (int i = 0; i < n; i++) {
		unsigned long long t = gtime();
		if (t != prev) step = min(step, t - prev), distinct++;
		prev = t;
	}
	out[0] = step, out[1] = distinct;
}

enum Kind { EMPTY, STAGE, LOAD, MV };

// stampedPhase is one phase of kind K, as a programmatic dependent launch writing
// its four stamps to st[4·block..]: launch_dependents and (MV) the warp's
// first row, the wait, stage() (which fills xq and xd from x), then one row
// a warp: y = W·x (MV), a row's sum from the staged x (STAGE, LOAD; scols
// of it), or nothing (EMPTY). Where qout is set, each row's value is also
// written as the launch after's quantized input (q8staged: 8-bit values,
// then a constant scale for each 32 at qout + MAXC; timing only).
template <Kind K, class Stage>
__device__ __forceinline__ void stampedPhase(const uint8_t *W, float *y, int rows, int cols, unsigned long long *st, int scols, int8_t *xq, float *xd,
                                      Stage stage, int8_t *qout = nullptr) {
	unsigned long long t0 = gtime();
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = gridDim.x * (blockDim.x >> 5);
	int row = blockIdx.x * (blockDim.x >> 5) + warp;
	Held h;
	if (K == MV && row < rows) loadRow(W, row, cols, lane, h);
	asm volatile("griddepcontrol.wait;" ::: "memory");
	unsigned long long t1 = gtime(), t2 = t1;
	if (K != EMPTY) {
		stage();
		__syncthreads();
		t2 = gtime();
		bool held = true;
		for (; row < rows; row += nw) {
			float v;
			if (K == MV) {
				if (!held) loadRow(W, row, cols, lane, h);
				held = false;
				v = dotRow(h, cols, lane, xq, xd);
			} else {
				int e = (row + lane) % scols;
				v = K == LOAD ? xd[e / 32] : (float)xq[e] * xd[e / 32];
				for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
			}
			if (lane == 0) {
				v = v / (1 + fabsf(v)); // bounded, so that many phases stay finite and nonzero
				y[row] = v;
				if (qout) {
					qout[row] = (int8_t)__float2int_rn(v * 127);
					if ((row & 31) == 0) ((float *)(qout + MAXC))[row / 32] = 1.0f / 127;
				}
			}
		}
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		unsigned long long t3 = gtime();
		st[4 * blockIdx.x] = t0, st[4 * blockIdx.x + 1] = t1, st[4 * blockIdx.x + 2] = t2, st[4 * blockIdx.x + 3] = t3;
	}
}

// stamped is stampedPhase with x staged from L2 by every block: quantized by
// stage() (STAGE: its first scols columns; MV: all), or (LOAD) the same
// loads summed into xd, not quantized. With clean set, the staged x is a
// buffer no phase writes (x0), not the phase before's y.
template <Kind K>
__global__ void __launch_bounds__(THREADS) stamped(const uint8_t *W, const float *x, float *y, int rows, int cols, unsigned long long *st, int scols,
                                                   const float *clean) {
	__shared__ __align__(16) int8_t xq[MAXC];
	__shared__ float xd[MAXC / 32];
	stampedPhase<K>(W, y, rows, cols, st, scols, xq, xd, [&] {
		const float *in = clean ? clean : x;
		if (K == LOAD)
			for (int c = threadIdx.x; 8 * c < scols; c += blockDim.x) {
				float4 a = __ldcg((const float4 *)(in + 8 * c)), b = __ldcg((const float4 *)(in + 8 * c + 4));
				xd[c / 4] = a.x + a.y + a.z + a.w + b.x + b.y + b.z + b.w;
			}
		else
			stage(in, K == MV ? cols : scols, xq, xd);
	});
}

// cstaged is stamped<STAGE> (or <MV>) with x staged by a cluster of C
// blocks: each block loads its C-th of x's columns from L2, quantizes it
// (quantPiece) and writes the int8 values and scales into every block's
// shared memory of the cluster (distributed shared memory), then the
// cluster meets at its barrier; so each block reads a C-th of x from L2 and
// quantizes a C-th. Every warp takes part in each round of the staging (the
// quantization's shuffles), its lanes past the slice with zeros.
template <int C, Kind K>
__global__ void __launch_bounds__(THREADS) cstaged(const uint8_t *W, const float *x, float *y, int rows, int cols, unsigned long long *st, int scols,
                                                   const float *) {
	__shared__ __align__(16) int8_t xq[MAXC];
	__shared__ float xd[MAXC / 32];
	stampedPhase<K>(W, y, rows, cols, st, scols, xq, xd, [&] {
		cg::cluster_group cl = cg::this_cluster();
		int n = K == MV ? cols : scols, per = n / C, r0 = (int)cl.block_rank() * per;
		for (int base = 0; base < per; base += 8 * blockDim.x) {
			int c = base / 8 + threadIdx.x;
			bool ok = 8 * c < per;
			float4 a = ok ? __ldcg((const float4 *)(x + r0 + 8 * c)) : make_float4(0, 0, 0, 0);
			float4 b = ok ? __ldcg((const float4 *)(x + r0 + 8 * c + 4)) : make_float4(0, 0, 0, 0);
			float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w}, d;
			uint2 q = quantPiece(v, d);
			if (ok)
#pragma unroll
				for (int r = 0; r < C; r++) {
					*(uint2 *)(cl.map_shared_rank(xq, r) + r0 + 8 * c) = q;
					if ((c & 3) == 0) cl.map_shared_rank(xd, r)[(r0 + 8 * c) / 32] = d;
				}
		}
		cl.sync();
	});
}

// q8staged is stamped<STAGE> (or <MV>) whose input comes quantized: the
// phase before wrote x as 8-bit values and a scale for each 32 (qin), so a
// block copies 1.1 bytes a column from L2 into shared memory, 16 bytes a
// thread, and quantizes nothing; each row's warp writes its value the same
// way for the phase after (qout). Timing only: the written scale is a
// constant, not a 32's largest magnitude (which the producer would find
// across warps), so the products are not checked.
template <Kind K>
__global__ void __launch_bounds__(THREADS) q8staged(const uint8_t *W, const int8_t *qin, int8_t *qout, float *y, int rows, int cols,
                                                    unsigned long long *st, int scols) {
	__shared__ __align__(16) int8_t xq[MAXC];
	__shared__ __align__(16) float xd[MAXC / 32];
	auto copy = [&] {
		int n = K == MV ? cols : scols;
		const float *din = (const float *)(qin + MAXC);
		for (int c = threadIdx.x; 16 * c < n; c += blockDim.x) *(uint4 *)(xq + 16 * c) = __ldcg((const uint4 *)(qin + 16 * c));
		for (int c = threadIdx.x; 4 * c < n / 32; c += blockDim.x) *(float4 *)(xd + 4 * c) = __ldcg((const float4 *)(din + 4 * c));
	};
	stampedPhase<K>(W, y, rows, cols, st, scols, xq, xd, copy, qout);
}

// NV is what nstaged's blocks do with x after the wait, with the decode
// kernel's own functions (kernels/common.cuh, q8.cuh), as its blocks of 512
// do for a Q4_0 weight (the first 256 threads holding x, a piece of eight
// each, for cols ≤ 2048; 4096 in two pieces):
enum NV {
	N_COPY,  // copy xqBytes(cols) ready bytes (an input quantized once before)
	N_QUANT, // quant32_piece of x (the o and down launches' path)
	N_NORM,  // the sum of squares, block_sum, rms_apply by the norm weight (in
	         // shared memory, copied before the wait), quant32_piece: the q,
	         // k, v, gate and up launches' path (block 0 also writes nout)
	N_NORM1, // N_NORM with block_sum_all (one barrier)
	N_NONLY, // N_NORM without the quantization (the normalised row in shared
	         // memory as f32)
};

template <NV V>
__global__ void __launch_bounds__(512) nstaged(const float *x, const float *nw, const uint8_t *ready, float *nout, float *y, int rows, int cols) {
	extern __shared__ __align__(16) uint8_t smem[];
	__shared__ float part[32];
	XQ xq = xq_at(smem, cols);
	float *xs = (float *)smem;
	float *nws = (float *)(smem + ((xqBytes(cols) + 15) & ~15) + (V == N_NONLY ? 4 * cols : 0));
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
	const int RP = 2;
	if (V != N_COPY && V != N_QUANT)
		for (int j = 0; j < RP; j++) {
			int c = threadIdx.x + 256 * j;
			if (threadIdx.x >= 256 || 8 * c >= cols) break;
			*(float4 *)(nws + 8 * c) = *(const float4 *)(nw + 8 * c), *(float4 *)(nws + 8 * c + 4) = *(const float4 *)(nw + 8 * c + 4);
		}
	asm volatile("griddepcontrol.wait;" ::: "memory");
	if (V == N_COPY) {
		for (int i = threadIdx.x; i < xqBytes(cols) / 16; i += blockDim.x) ((float4 *)smem)[i] = ((const float4 *)ready)[i];
	} else {
		float v[RP][8], s = 0;
#pragma unroll
		for (int j = 0; j < RP; j++) {
			int c = threadIdx.x + 256 * j;
			if (threadIdx.x >= 256 || 8 * c >= cols) break;
			float4 a = *(const float4 *)(x + 8 * c), b = *(const float4 *)(x + 8 * c + 4);
			v[j][0] = a.x, v[j][1] = a.y, v[j][2] = a.z, v[j][3] = a.w, v[j][4] = b.x, v[j][5] = b.y, v[j][6] = b.z, v[j][7] = b.w;
#pragma unroll
			for (int k = 0; k < 8; k++) s = fmaf(v[j][k], v[j][k], s);
		}
		float scale = 1;
		if (V == N_NORM || V == N_NONLY) scale = 1.0f / sqrtf(block_sum(s, part) / cols + 1e-5f);
		if (V == N_NORM1) scale = 1.0f / sqrtf(block_sum_all(s, part) / cols + 1e-5f);
#pragma unroll
		for (int j = 0; j < RP; j++) {
			int c = threadIdx.x + 256 * j;
			if (threadIdx.x >= 256 || 8 * c >= cols) break;
			if (V != N_QUANT) {
				float4 a = *(const float4 *)(nws + 8 * c), b = *(const float4 *)(nws + 8 * c + 4);
				float w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
				for (int k = 0; k < 8; k++) v[j][k] = rms_apply(v[j][k], scale, w[k]);
				if (blockIdx.x == 0) {
					*(float4 *)(nout + 8 * c) = make_float4(v[j][0], v[j][1], v[j][2], v[j][3]);
					*(float4 *)(nout + 8 * c + 4) = make_float4(v[j][4], v[j][5], v[j][6], v[j][7]);
				}
			}
			if (V == N_NONLY) {
#pragma unroll
				for (int k = 0; k < 8; k++) xs[8 * c + k] = v[j][k];
			} else
				quant32_piece(c, v[j], xq, false);
		}
	}
	__syncthreads();
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwp = gridDim.x * (blockDim.x >> 5);
	for (int row = blockIdx.x * (blockDim.x >> 5) + warp; row < rows; row += nwp) {
		int e = (row + lane) % cols;
		float v = V == N_NONLY ? xs[e] : (float)xq.q[xo(e)] * xq.d[e / 32];
		for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
		if (lane == 0) y[row] = v / (1 + fabsf(v));
	}
}

// normChains times nstaged's ways in chains of N programmatic dependent
// launches of rows × cols at one block of 512 a multiprocessor, as main does
// the other kernels, and checks that N_NORM1's chain ends with N_NORM's y.
static void normChains(int sms, cudaStream_t s) {
	const int N = 64;
	struct {
		const char *name;
		void (*fn)(const float *, const float *, const uint8_t *, float *, float *, int, int);
	} ways[] = {{"copy", nstaged<N_COPY>},       {"quant", nstaged<N_QUANT>}, {"norm", nstaged<N_NORM>},
	            {"norm 1 barrier", nstaged<N_NORM1>}, {"norm, no quant", nstaged<N_NONLY>}};
	printf("\nthe decode's staging (kernels/q8.cuh, common.cuh), blocks of 512, chains of %d launches, us a launch:\n", N);
	for (int cols : {2048, 4096}) {
		int rows = cols, need = rows / 16, rounds = (need + sms - 1) / sms, blocks = (need + rounds - 1) / rounds;
		float *b0, *b1, *nw, *nout;
		uint8_t *ready;
		CK(cudaMalloc(&b0, cols * 4));
		CK(cudaMalloc(&b1, cols * 4));
		CK(cudaMalloc(&nw, cols * 4));
		CK(cudaMalloc(&nout, cols * 4));
		CK(cudaMalloc(&ready, xqBytes(cols) + 16));
		CK(cudaMemset(ready, 0, xqBytes(cols) + 16));
		std::vector<float> x0(cols), w0(cols, 0.9f), y0;
		for (int i = 0; i < cols; i++) x0[i] = (float)((i * 37) % 101 - 50) / 50.0f;
		CK(cudaMemcpy(nw, w0.data(), cols * 4, cudaMemcpyHostToDevice));
		printf("  %d x %d, %d blocks:", rows, cols, blocks);
		for (auto &w : ways) {
			size_t sh = ((xqBytes(cols) + 15) & ~15) + 8 * cols;
			CK(cudaFuncSetAttribute(w.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh));
			cudaGraphExec_t ge = graphOf(s, N, blocks, 512, sh, true, 1, [&](int i, cudaLaunchConfig_t &cfg) {
				CK(cudaLaunchKernelEx(&cfg, w.fn, (const float *)(i % 2 ? b1 : b0), (const float *)nw, (const uint8_t *)ready, nout, i % 2 ? b0 : b1, rows,
				                      cols));
			});
			std::vector<float> y;
			double t = chainRun(s, ge, b0, x0, N % 2 ? b1 : b0, cols, y);
			const char *same = "";
			if (w.fn == nstaged<N_NORM>) y0 = y;
			if (w.fn == nstaged<N_NORM1>) same = memcmp(y0.data(), y.data(), cols * 4) == 0 ? " (same y)" : " (y DIFFERS)";
			printf("  %s %.2f%s", w.name, t * 1e3 / N, same);
			CK(cudaGraphExecDestroy(ge));
		}
		printf("\n");
		CK(cudaFree(b0));
		CK(cudaFree(b1));
		CK(cudaFree(nw));
		CK(cudaFree(nout));
		CK(cudaFree(ready));
	}
}

static double med(std::vector<double> v) {
	std::sort(v.begin(), v.end());
	return v.empty() ? 0 : v[v.size() / 2];
}

int main() {
	setvbuf(stdout, nullptr, _IOLBF, 0);
	cudaDeviceProp p;
	CK(cudaGetDeviceProperties(&p, 0));
	int sms = p.multiProcessorCount;
	unsigned long long *tk;
	CK(cudaMalloc(&tk, 16));
	tick<<<1, 1>>>(tk, 100000);
	unsigned long long ht[2];
	CK(cudaMemcpy(ht, tk, 16, cudaMemcpyDeviceToHost));
	printf("%s, %d multiprocessors; %%globaltimer: smallest step %llu ns, %llu distinct values in 100000 reads\n", p.name, sms, ht[0], ht[1]);

	const int N = 64;
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	normChains(sms, s);
	if (getenv("STAMPS_NORM_ONLY")) return 0;
	struct Shape {
		const char *name;
		int rows, cols;
	} shapes[] = {{"2048x2048 (TinyLlama's o)", 2048, 2048}, {"2560x2048 (TinyLlama's q,k,v)", 2560, 2048}, {"4096x4096 (7B's o)", 4096, 4096},
	              {"2048x5632 (TinyLlama's down)", 2048, 5632}};
	struct Way {
		const char *name;
		void (*fn)(const uint8_t *, const float *, float *, int, int, unsigned long long *, int, const float *);
		int div;   // the staged columns: cols / div
		bool clean; // staged from x0, not the phase before's y
		int cluster; // blocks a cluster (cstaged)
		bool mv;     // a mat-vec (cols ≤ 4096 only)
		bool q8;     // q8staged (fn unused)
	} ways[] = {{"empty", stamped<EMPTY>, 1, false, 1, false, false},
	            {"stage", stamped<STAGE>, 1, false, 1, false, false},
	            {"stage/8", stamped<STAGE>, 8, false, 1, false, false},
	            {"clean", stamped<STAGE>, 1, true, 1, false, false},
	            {"load", stamped<LOAD>, 1, false, 1, false, false},
	            {"load/8", stamped<LOAD>, 8, false, 1, false, false},
	            {"q8in", nullptr, 1, false, 1, false, true},
	            {"cl8", cstaged<8, STAGE>, 1, false, 8, false, false},
	            {"mv", stamped<MV>, 1, false, 1, true, false},
	            {"mv q8in", nullptr, 1, false, 1, true, true}};
	printf("%-32s %-8s %6s %8s %9s %8s %8s %8s %8s %8s %8s   (us; medians over phases 8..%d)\n", "shape", "way", "blocks", "chain/ph", "period", "release",
	       "skew", "stage", "stage mx", "rows", "rows mx", N - 1);
	for (auto sh : shapes) {
		int rows = sh.rows, cols = sh.cols;
		long long wb;
		int copies;
		uint8_t *W = weightCopies(rows, cols, p.l2CacheSize, wb, copies);
		int len = std::max(rows, cols);
		int8_t *q0, *q1;
		CK(cudaMalloc(&q0, MAXC * 2));
		CK(cudaMalloc(&q1, MAXC * 2));
		CK(cudaMemset(q0, 1, MAXC * 2));
		CK(cudaMemset(q1, 1, MAXC * 2));
		float *b0, *b1, *xc;
		CK(cudaMalloc(&xc, len * 4));
		CK(cudaMalloc(&b0, len * 4));
		CK(cudaMalloc(&b1, len * 4));
		std::vector<float> x0(len);
		for (int i = 0; i < len; i++) x0[i] = (float)((i * 37) % 101 - 50) / 50.0f;
		CK(cudaMemcpy(xc, x0.data(), len * 4, cudaMemcpyHostToDevice));
		// One block a multiprocessor, every warp as many rows as the busiest.
		int need = (rows + THREADS / 32 - 1) / (THREADS / 32), rounds = (need + sms - 1) / sms, blocks = (need + rounds - 1) / rounds;
		unsigned long long *st;
		CK(cudaMalloc(&st, (size_t)N * blocks * 4 * 8));
		std::vector<float> y0(len);
		for (auto &w : ways) {
			if (w.mv && cols > MAXT * 32 * 32) continue;
			if (blocks % w.cluster) continue;
			if ((cols / w.div) % 256) continue; // stage() takes whole warps
			cudaGraphExec_t ge = graphOf(s, N, blocks, THREADS, 0, true, w.cluster, [&](int i, cudaLaunchConfig_t &cfg) {
				const uint8_t *Wi = W + (i % copies) * wb;
				const float *xi = i % 2 ? b1 : b0;
				float *yi = i % 2 ? b0 : b1;
				unsigned long long *sti = st + (size_t)i * blocks * 4;
				int scols = cols / w.div;
				const float *cl = w.clean ? xc : nullptr;
				if (w.q8)
					CK(cudaLaunchKernelEx(&cfg, w.mv ? q8staged<MV> : q8staged<STAGE>, Wi, (const int8_t *)(i % 2 ? q1 : q0), i % 2 ? q0 : q1, yi, rows, cols,
					                      sti, scols));
				else
					CK(cudaLaunchKernelEx(&cfg, w.fn, Wi, xi, yi, rows, cols, sti, scols, cl));
			});
			// The last run's y: every mat-vec way must end with the same.
			std::vector<float> y;
			double t = chainRun(s, ge, b0, x0, N % 2 ? b1 : b0, len, y);
			const char *same = "";
			if (w.mv && w.fn == (decltype(w.fn))stamped<MV>)
				y0 = y;
			else if (w.mv && !w.q8)
				same = memcmp(y0.data(), y.data(), rows * 4) == 0 ? "  same y" : "  y DIFFERS";
			// The stamps of the last timed run.
			std::vector<unsigned long long> hs((size_t)N * blocks * 4);
			CK(cudaMemcpy(hs.data(), st, hs.size() * 8, cudaMemcpyDeviceToHost));
			std::vector<double> period, release, skew, stage, stageMx, rowsMd, rowsMx;
			auto at4 = [&](int ph, int b, int k) { return (double)hs[((size_t)ph * blocks + b) * 4 + k]; };
			for (int ph = 8; ph < N; ph++) {
				double maxT3prev = 0, maxT3 = 0, minT1 = 1e300, maxT1 = 0, sMx = 0, rMx = 0;
				std::vector<double> sv, rv;
				for (int b = 0; b < blocks; b++) {
					maxT3prev = std::max(maxT3prev, at4(ph - 1, b, 3));
					maxT3 = std::max(maxT3, at4(ph, b, 3));
					minT1 = std::min(minT1, at4(ph, b, 1));
					maxT1 = std::max(maxT1, at4(ph, b, 1));
					double a = at4(ph, b, 2) - at4(ph, b, 1), r = at4(ph, b, 3) - at4(ph, b, 2);
					sv.push_back(a), rv.push_back(r), sMx = std::max(sMx, a), rMx = std::max(rMx, r);
				}
				period.push_back(maxT3 - maxT3prev), release.push_back(minT1 - maxT3prev), skew.push_back(maxT1 - minT1);
				stage.push_back(med(sv)), stageMx.push_back(sMx), rowsMd.push_back(med(rv)), rowsMx.push_back(rMx);
			}
			printf("%-32s %-8s %6d %8.2f %9.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f%s\n", sh.name, w.name, blocks, t * 1e3 / N, med(period) / 1e3,
			       med(release) / 1e3, med(skew) / 1e3, med(stage) / 1e3, med(stageMx) / 1e3, med(rowsMd) / 1e3, med(rowsMx) / 1e3, same);
			CK(cudaGraphExecDestroy(ge));
		}
		CK(cudaFree(W));
		CK(cudaFree(b0));
		CK(cudaFree(b1));
		CK(cudaFree(st));
		CK(cudaFree(xc));
		CK(cudaFree(q0));
		CK(cudaFree(q1));
	}
	return 0;
}
