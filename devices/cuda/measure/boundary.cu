// boundary measures what a decode step's kernel boundaries cost on an NVIDIA
// GPU against the other way to order a step's dependent phases: one resident
// (persistent) kernel whose blocks meet at a grid-wide barrier between
// phases. Issue 15's decode is held by a fixed cost of about 2.7 µs a launch
// besides its bytes (bench/RESULTS.md); programmatic dependent launch, as the
// decode tried it, did not lower it. Whether a persistent decode kernel would,
// or PDL with room beside each launch, is what this says.
//
// Each phase is a mat-vec shaped like the decode's: y = W·x for a weight of
// 4-bit quants in blocks of 32 with an f16 scale a block (Q4_0's 18 bytes,
// quants and scales apart), every block of the grid first quantizing x (f32,
// read from L2) to 8 bits in shared memory, then each warp taking rows a
// grid's warps apart with 16-byte loads and dp4a. Phase i+1's x is phase i's
// y, so each phase depends on the whole of the one before; the weights rotate
// over copies that together exceed L2, so each phase reads them from DRAM.
// The same phases run
//   - graph:      as N launches of one kernel, captured in a CUDA graph;
//   - graph pre, pipelined, no stage: the same with each warp's first row
//                 loaded before the staging (onePre), its next row before
//                 each product (onePipe), and nothing staged (oneSkip,
//                 timing only: its products are not checked);
//   - persistent: as one cooperative launch of the same grid, a grid-wide
//                 barrier (an atomic count and a generation word) between
//                 phases;
//   - prefetched: the same, each warp loading its next row's weights into
//                 registers before it waits at the barrier (the weights do
//                 not depend on the phase before; a kernel boundary cannot
//                 do this, and asking L2 ahead was measured slower);
//   - smem ahead: the same, each warp copying its next rows' weights (up to
//                 AHEAD) into shared memory by cp.async before the barrier,
//                 so that their trips from DRAM overlap the barrier and the
//                 next staging without holding registers: a "megakernel"
//                 streaming the next op's weights ahead of its dependency
//                 (written in the twenty-ninth session after its device
//                 time was spent: compiled for sm_90, not yet run), and
//                 the same with a barrier of release and acquire at GPU
//                 scope in place of full fences (grid_sync_ra);
//   - pre 1/mp:   graph pre at one block a multiprocessor (each warp more
//                 rows), the grid the PDL columns take;
//   - pdl 1/mp, pdl pre 1/mp: the same launches as programmatic dependent
//                 launches (onePDL, captured with programmatic stream
//                 serialization), without and with the first row loaded
//                 before the wait for the launch before;
//   - pdl touch:  the same with the first row read into L1 before the wait
//                 (onePDLTouch), not held in registers;
//   - pipe 1/mp, pdl pipe 1/mp: pipelined at one block a multiprocessor,
//                 as a plain and as a programmatic dependent launch;
// and, to size the parts, a graph of N empty launches and a kernel of N
// barriers alone. Every way must end with the same y bit for bit (checked),
// which also checks the barrier.
//
// It is not part of the Go build. Run it on the GPU:
//
//	nvcc -O3 -arch=sm_90 -o boundary boundary.cu && ./boundary
//
// Times are medians of repeated runs after a warm-up, by CUDA events.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_fp16.h>
#include <vector>

#include <cuda_pipeline.h>

#define MV_CS 0 // plain weight loads, as the tables in bench/RESULTS.md were measured
#include "matvec.cuh"

// grid_sync is a barrier for every block of a resident grid of nb blocks:
// bar[0] counts arrivals, bar[1] is the generation the last arrival moves.
__device__ __forceinline__ void grid_sync(unsigned *bar, unsigned nb) {
	__syncthreads();
	if (threadIdx.x == 0) {
		volatile unsigned *gen = bar + 1;
		unsigned g = *gen;
		__threadfence();
		if (atomicAdd(bar, 1) == nb - 1) {
			atomicExch(bar, 0);
			__threadfence();
			atomicAdd(bar + 1, 1);
		} else {
			while (*gen == g) {
			}
		}
		__threadfence();
	}
	__syncthreads();
}

// grid_sync_ra is grid_sync with release and acquire at GPU scope in place
// of full fences: the arrival an acq_rel atomic add, the last arrival's
// new generation a release store, the waiters' polls acquire loads.
__device__ __forceinline__ void grid_sync_ra(unsigned *bar, unsigned nb) {
	__syncthreads();
	if (threadIdx.x == 0) {
		unsigned g, old, cur;
		asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(g) : "l"(bar + 1) : "memory");
		asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(bar) : "memory");
		if (old == nb - 1) {
			asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(bar), "r"(0u) : "memory");
			asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(bar + 1), "r"(g + 1) : "memory");
		} else {
			do {
				asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(cur) : "l"(bar + 1) : "memory");
			} while (cur == g);
		}
	}
	__syncthreads();
}

// grid_sync_mono is a barrier of one ever-growing count (bar[2], zeroed
// before the launch): the k-th barrier (k from 0) waits until every block
// has arrived k+1 times. No last arrival has to move a generation, so a
// waiter's wait is one round trip shorter.
__device__ __forceinline__ void grid_sync_mono(unsigned *bar, unsigned nb, unsigned k) {
	__syncthreads();
	if (threadIdx.x == 0) {
		unsigned cur, want = (k + 1) * nb;
		asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(bar + 2) : "memory");
		do {
			asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(cur) : "l"(bar + 2) : "memory");
		} while (cur < want);
	}
	__syncthreads();
}

// phase is one mat-vec: y = W·x over the grid (block bx of nb). With held
// set, the warp's first row is already in h (prefetched before the barrier).
__device__ __forceinline__ void phase(const uint8_t *W, const float *x, float *y, int rows, int cols, int bx, int nb, Held &h, bool held) {
	__shared__ __align__(16) int8_t xq[MAXC];
	__shared__ float xd[MAXC / 32];
	stage(x, cols, xq, xd);
	__syncthreads();
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = nb * (blockDim.x >> 5);
	for (int row = bx * (blockDim.x >> 5) + warp; row < rows; row += nw) {
		if (!held) loadRow(W, row, cols, lane, h);
		held = false;
		float v = dotRow(h, cols, lane, xq, xd);
		if (lane == 0) y[row] = v / (1 + fabsf(v)); // bounded, so that many phases stay finite and nonzero
	}
	__syncthreads(); // xq is rewritten by the next phase
}

__global__ void __launch_bounds__(THREADS) one(const uint8_t *W, const float *x, float *y, int rows, int cols) {
	Held h;
	phase(W, x, y, rows, cols, blockIdx.x, gridDim.x, h, false);
}

// onePre is one with each warp's first row loaded into registers before the
// block stages x: the weights do not depend on the launch before, so their
// trip from DRAM can overlap the staging's.
__global__ void __launch_bounds__(THREADS) onePre(const uint8_t *W, const float *x, float *y, int rows, int cols) {
	Held h;
	int first = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	bool held = first < rows;
	if (held) loadRow(W, first, cols, threadIdx.x & 31, h);
	phase(W, x, y, rows, cols, blockIdx.x, gridDim.x, h, held);
}

// onePDL is one launched as a programmatic dependent launch (griddepcontrol,
// sm_90): every block at once lets the launch after it start
// (launch_dependents), so that its blocks take whatever room the
// multiprocessors have left while this one runs; with PRE each warp then
// loads its first row into registers; then it waits (griddepcontrol.wait)
// for the launch before to finish and its writes to be visible, and stages
// x. The nineteenth session's PDL in the decode let the next kernel in with
// every multiprocessor's registers taken by two blocks of the one before,
// and asked L2, not registers, for the first rows: no faster. Here the
// blocks hold fewer registers, so that the next launch's blocks fit beside
// them, and the first row's DRAM trip overlaps the launch before.
template <bool PRE>
__global__ void __launch_bounds__(THREADS) onePDL(const uint8_t *W, const float *x, float *y, int rows, int cols) {
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
	Held h;
	int first = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	bool held = PRE && first < rows;
	if (held) loadRow(W, first, cols, threadIdx.x & 31, h);
	asm volatile("griddepcontrol.wait;" ::: "memory");
	phase(W, x, y, rows, cols, blockIdx.x, gridDim.x, h, held);
}

// onePDLTouch is onePDL with each warp's first row read into L1 before the
// wait (a 4-byte load a 32-byte sector, summed so that the loads stay),
// not held in registers: the way branch experiment/pdl2's decode mat-vec
// (-DMV_PDL=2) asks for its first row, whose loads sit inside each type's
// sums.
__global__ void __launch_bounds__(THREADS) onePDLTouch(const uint8_t *W, const float *x, float *y, int rows, int cols) {
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
	int first = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
	if (first < rows) {
		const uint8_t *r = W + first * rowBytes(cols);
		unsigned t = 0;
		for (long long o = 32 * lane; o < rowBytes(cols); o += 32 * 32) t += *(const unsigned *)(r + o);
		if (cols < 0 && t == 0x9e3779b9u) y[0] = (float)t; // never: keeps the loads
	}
	asm volatile("griddepcontrol.wait;" ::: "memory");
	Held h;
	phase(W, x, y, rows, cols, blockIdx.x, gridDim.x, h, false);
}

// pipe is the pipelined phase: each warp's next row loaded into registers
// before it takes the dot product of the row it holds (two rows'
// registers). With PDL the launch is a programmatic dependent one (as
// onePDL): the first row is loaded before the wait for the launch before.
template <bool PDL> __device__ __forceinline__ void pipe(const uint8_t *W, const float *x, float *y, int rows, int cols) {
	__shared__ __align__(16) int8_t xq[MAXC];
	__shared__ float xd[MAXC / 32];
	if (PDL) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = gridDim.x * (blockDim.x >> 5);
	int row = blockIdx.x * (blockDim.x >> 5) + warp;
	Held a, b;
	if (row < rows) loadRow(W, row, cols, lane, a);
	if (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");
	stage(x, cols, xq, xd);
	__syncthreads();
	// Two rows a trip, so that each register set is named, not indexed.
	for (; row < rows; row += 2 * nw) {
		if (row + nw < rows) loadRow(W, row + nw, cols, lane, b);
		float v = dotRow(a, cols, lane, xq, xd);
		if (lane == 0) y[row] = v / (1 + fabsf(v));
		if (row + nw >= rows) break;
		if (row + 2 * nw < rows) loadRow(W, row + 2 * nw, cols, lane, a);
		v = dotRow(b, cols, lane, xq, xd);
		if (lane == 0) y[row + nw] = v / (1 + fabsf(v));
	}
}

// onePipe is one pipelined (pipe).
__global__ void __launch_bounds__(THREADS) onePipe(const uint8_t *W, const float *x, float *y, int rows, int cols) { pipe<false>(W, x, y, rows, cols); }

// onePDLPipe is onePipe as a programmatic dependent launch.
__global__ void __launch_bounds__(THREADS) onePDLPipe(const uint8_t *W, const float *x, float *y, int rows, int cols) { pipe<true>(W, x, y, rows, cols); }

// oneSkip stages nothing (wrong products, timing only): what the staging
// costs a launch.
__global__ void __launch_bounds__(THREADS) oneSkip(const uint8_t *W, const float *x, float *y, int rows, int cols) {
	__shared__ __align__(16) int8_t xq[MAXC];
	__shared__ float xd[MAXC / 32];
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = gridDim.x * (blockDim.x >> 5);
	Held h;
	for (int row = blockIdx.x * (blockDim.x >> 5) + warp; row < rows; row += nw) {
		loadRow(W, row, cols, lane, h);
		float v = dotRow(h, cols, lane, xq, xd);
		if (lane == 0) y[row] = v / (1 + fabsf(v));
	}
}

// persistent runs n phases: phase i reads weight copy i % copies (each
// wbytes) and buf[i % 2], and writes buf[(i + 1) % 2].
__global__ void __launch_bounds__(THREADS) persistent(const uint8_t *W, long long wbytes, int copies, float *buf0, float *buf1, int rows, int cols, int n,
                                                      unsigned *bar, int pre) {
	Held h;
	bool held = false;
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	for (int i = 0; i < n; i++) {
		const uint8_t *Wi = W + (i % copies) * wbytes;
		phase(Wi, i % 2 ? buf1 : buf0, i % 2 ? buf0 : buf1, rows, cols, blockIdx.x, gridDim.x, h, held);
		held = false;
		int first = blockIdx.x * (blockDim.x >> 5) + warp;
		if (pre && i + 1 < n && first < rows) {
			loadRow(W + ((i + 1) % copies) * wbytes, first, cols, lane, h);
			held = true;
		}
		grid_sync(bar, gridDim.x);
	}
}

// persistentAhead is persistent with each warp's first AHEAD rows of the
// next phase's weights copied into shared memory (cp.async, holding no
// registers) as soon as it has taken this phase's products, so that their
// trips from DRAM overlap the barrier and the next staging; the warp's
// other rows load as before. What a persistent decode kernel that streams
// the next op's weights ahead of its dependency (a "megakernel") would
// gain. Dynamic shared memory: THREADS/32 · AHEAD rows.
constexpr int AHEAD = 2;

__device__ __forceinline__ void aheadRows(const uint8_t *W, int rows, int cols, int first, int nw, uint8_t *slots) {
	int lane = threadIdx.x & 31;
	long long rb = rowBytes(cols);
	for (int p = 0; p < AHEAD; p++) {
		int row = first + p * nw;
		if (row >= rows) break;
		const uint8_t *src = W + row * rb;
		for (int c = lane; 16 * c < rb; c += 32) __pipeline_memcpy_async(slots + p * rb + 16 * c, src + 16 * c, 16);
	}
	__pipeline_commit();
}

__global__ void __launch_bounds__(THREADS) persistentAhead(const uint8_t *W, long long wbytes, int copies, float *buf0, float *buf1, int rows, int cols,
                                                           int n, unsigned *bar, int ra) {
	extern __shared__ __align__(16) uint8_t slotMem[];
	__shared__ __align__(16) int8_t xq[MAXC];
	__shared__ float xd[MAXC / 32];
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = gridDim.x * (blockDim.x >> 5);
	long long rb = rowBytes(cols);
	uint8_t *slots = slotMem + warp * AHEAD * rb;
	int first = blockIdx.x * (blockDim.x >> 5) + warp;
	aheadRows(W, rows, cols, first, nw, slots);
	for (int i = 0; i < n; i++) {
		const uint8_t *Wi = W + (i % copies) * wbytes;
		const float *x = i % 2 ? buf1 : buf0;
		float *y = i % 2 ? buf0 : buf1;
		stage(x, cols, xq, xd);
		__syncthreads();
		__pipeline_wait_prior(0);
		__syncwarp(); // a lane reads pieces other lanes copied
		int p = 0;
		for (int row = first; row < rows; row += nw, p++) {
			Held h;
			loadAt<false>(p < AHEAD ? slots + p * rb : Wi + row * rb, cols, lane, h); // plain: a slot is shared memory
			float v = dotRow(h, cols, lane, xq, xd);
			if (lane == 0) y[row] = v / (1 + fabsf(v));
		}
		__syncwarp(); // the slots are read before they are copied over
		if (i + 1 < n) aheadRows(W + ((i + 1) % copies) * wbytes, rows, cols, first, nw, slots);
		if (ra == 2) // and xq is rewritten after every warp's products
			grid_sync_mono(bar, gridDim.x, i);
		else if (ra)
			grid_sync_ra(bar, gridDim.x);
		else
			grid_sync(bar, gridDim.x);
	}
}

__global__ void empty() {}

__global__ void barriers(unsigned *bar, int n, int ra) {
	for (int i = 0; i < n; i++)
		if (ra == 2)
			grid_sync_mono(bar, gridDim.x, i);
		else if (ra)
			grid_sync_ra(bar, gridDim.x);
		else
			grid_sync(bar, gridDim.x);
}

// PhaseKernel is a kernel of one phase: y = W·x.
typedef void (*PhaseKernel)(const uint8_t *, const float *, float *, int, int);

// GraphWay is a column whose N phases are N launches in a CUDA graph: of
// kernel k, on the decode's grid or at one block a multiprocessor (onePerMP),
// as programmatic dependent launches (pdl) or not; check: its y must equal
// the first way's (not oneSkip's, which stages nothing).
struct GraphWay {
	const char *name;
	PhaseKernel k;
	bool onePerMP, pdl, check;
};
static const GraphWay graphWays[] = {
    {"graph us", one, false, false, true},           {"graph pre", onePre, false, false, true},
    {"pipelined", onePipe, false, false, true},      {"no stage", oneSkip, false, false, false},
    {"pre 1/mp", onePre, true, false, true},         {"pdl 1/mp", onePDL<false>, true, true, true},
    {"pdl pre 1/mp", onePDL<true>, true, true, true}, {"pdl touch", onePDLTouch, true, true, true},
    {"pipe 1/mp", onePipe, true, false, true},       {"pdl pipe 1/mp", onePDLPipe, true, true, true},
};

int main() {
	cudaDeviceProp p;
	CK(cudaGetDeviceProperties(&p, 0));
	int per = 0;
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, persistent, THREADS, 0));
	int perOne = 0;
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perOne, one, THREADS, 0));
	int grid = per * p.multiProcessorCount;
	printf("%s, %d multiprocessors, L2 %d MiB; %d threads a block, %d blocks a multiprocessor (one: %d), grid %d\n", p.name, p.multiProcessorCount,
	       p.l2CacheSize >> 20, THREADS, per, perOne, grid);
	const int N = 64;
	unsigned *bar;
	CK(cudaMalloc(&bar, 12));
	CK(cudaMemset(bar, 0, 12));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

	// The parts alone: an empty launch in a graph, a barrier in a kernel.
	cudaGraph_t eg;
	cudaGraphExec_t ege;
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	for (int i = 0; i < N; i++) empty<<<grid, THREADS, 0, s>>>();
	CK(cudaStreamEndCapture(s, &eg));
	CK(cudaGraphInstantiateWithFlags(&ege, eg, 0));
	double te = timed(s, [&] { CK(cudaGraphLaunch(ege, s)); });
	int n = N;
	int ra = 0;
	void *ba[] = {&bar, &n, &ra};
	double tb = timed(s, [&] { CK(cudaLaunchCooperativeKernel((void *)barriers, grid, THREADS, ba, 0, s)); });
	ra = 1;
	double tr = timed(s, [&] { CK(cudaLaunchCooperativeKernel((void *)barriers, grid, THREADS, ba, 0, s)); });
	ra = 2;
	double tm = timed(s, [&] {
		CK(cudaMemsetAsync(bar + 2, 0, 4, s));
		CK(cudaLaunchCooperativeKernel((void *)barriers, grid, THREADS, ba, 0, s));
	});
	printf("empty launch in a graph: %.2f us each; grid barrier alone: %.2f us each (release/acquire: %.2f, one count: %.2f)\n", te * 1e3 / N,
	       tb * 1e3 / N, tr * 1e3 / N, tm * 1e3 / N);
	// The device-to-device copy rate, bytes read and written (as
	// bench/cuda/fa.sh's weight fraction counts it): a phase's weight bytes
	// at it are the phase's floor.
	size_t cb = 512 << 20;
	void *c0, *c1;
	CK(cudaMalloc(&c0, cb));
	CK(cudaMalloc(&c1, cb));
	double tc = timed(s, [&] { CK(cudaMemcpyAsync(c1, c0, cb, cudaMemcpyDeviceToDevice, s)); });
	double copyRate = 2.0 * cb / (tc * 1e-3);
	CK(cudaFree(c0));
	CK(cudaFree(c1));
	printf("copy rate: %.0f GB/s counting bytes read and written\n", copyRate / 1e9);

	struct Shape {
		const char *name;
		int rows, cols;
	} shapes[] = {{"4096x4096 (7B's o, as 4.5 bits a weight)", 4096, 4096}, {"2048x2048 (TinyLlama's o)", 2048, 2048},
	              {"2560x2048 (TinyLlama's q,k,v)", 2560, 2048}, {"11008x4096 (7B's gate or up)", 11008, 4096}};
	printf("%-44s %10s", "shape (phase i+1's x is phase i's y)", "bytes us");
	for (auto &w : graphWays) printf(" %10s", w.name);
	printf(" %10s %10s %10s %10s %10s   %s\n", "persist us", "prefetch us", "smem ahead", "+acq/rel", "+one count", "same y");
	for (auto sh : shapes) {
		int rows = sh.rows, cols = sh.cols;
		if (rows != cols && rows < cols) continue;
		long long wb;
		int copies;
		uint8_t *W = weightCopies(rows, cols, p.l2CacheSize, wb, copies);
		int len = std::max(rows, cols);
		float *b0, *b1;
		CK(cudaMalloc(&b0, len * 4));
		CK(cudaMalloc(&b1, len * 4));
		std::vector<float> x0(len);
		for (int i = 0; i < len; i++) x0[i] = (float)((i * 37) % 101 - 50) / 50.0f;
		auto reset = [&] {
			CK(cudaMemcpyAsync(b0, x0.data(), len * 4, cudaMemcpyHostToDevice, s));
			CK(cudaMemsetAsync(b1, 0, len * 4, s));
		};
		// Square shapes chain (phase i+1 reads phase i's rows); q,k,v's
		// 2560 rows are read back as its first 2048.
		// The decode's grid (mvBlocks in fuse_cuda.go): at most one wave,
		// every warp as many rows as the busiest.
		int need = (rows + THREADS / 32 - 1) / (THREADS / 32), rounds = (need + grid - 1) / grid, blocks = (need + rounds - 1) / rounds;
		// blocks1: the same at one block a multiprocessor, which leaves
		// each room for a block of the launch after (the PDL columns).
		int sms = p.multiProcessorCount, rounds1 = (need + sms - 1) / sms, blocks1 = (need + rounds1 - 1) / rounds1;
		std::vector<float> yg(len), yp(len), yf(len);
		auto result = [&](std::vector<float> &y) {
			CK(cudaMemcpyAsync(y.data(), N % 2 ? b1 : b0, len * 4, cudaMemcpyDeviceToHost, s));
			CK(cudaStreamSynchronize(s));
		};
		// Each graph way: its N launches captured (cudaLaunchKernelEx, with
		// programmatic stream serialization for pdl), timed, and one run's
		// result compared with the first way's.
		std::vector<double> tw;
		bool same = true;
		for (auto &w : graphWays) {
			cudaGraphExec_t ge = graphOf(s, N, w.onePerMP ? blocks1 : blocks, THREADS, 0, w.pdl, 1, [&](int i, cudaLaunchConfig_t &cfg) {
				const uint8_t *Wi = W + (i % copies) * wb;
				const float *xi = i % 2 ? b1 : b0;
				float *yi = i % 2 ? b0 : b1;
				CK(cudaLaunchKernelEx(&cfg, w.k, Wi, xi, yi, rows, cols));
			});
			reset();
			tw.push_back(timed(s, [&] { CK(cudaGraphLaunch(ge, s)); }));
			reset();
			CK(cudaGraphLaunch(ge, s));
			std::vector<float> y(len);
			result(y);
			if (&w == graphWays)
				yg = y;
			else if (w.check)
				same = same && memcmp(yg.data(), y.data(), rows * 4) == 0;
			CK(cudaGraphExecDestroy(ge));
		}
		auto runP = [&](int pre) {
			void *a[] = {&W, &wb, &copies, &b0, &b1, &rows, &cols, &n, &bar, &pre};
			CK(cudaLaunchCooperativeKernel((void *)persistent, blocks, THREADS, a, 0, s));
		};
		double tp = timed(s, [&] { runP(0); });
		reset();
		runP(0);
		result(yp);
		double tf = timed(s, [&] { runP(1); });
		reset();
		runP(1);
		result(yf);
		// The same with the next phase's rows in shared memory, where the
		// grid still fits the GPU at once with the slots.
		size_t slotBytes = (size_t)(THREADS / 32) * AHEAD * rowBytes(cols);
		CK(cudaFuncSetAttribute(persistentAhead, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)slotBytes));
		int perA = 0;
		CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perA, persistentAhead, THREADS, slotBytes));
		double ta = -1, tar = -1, tam = -1;
		std::vector<float> ya(len), yar(len), yam(len);
		if (perA * p.multiProcessorCount >= blocks) {
			auto runA = [&](int ra) {
				void *a[] = {&W, &wb, &copies, &b0, &b1, &rows, &cols, &n, &bar, &ra};
				if (ra == 2) CK(cudaMemsetAsync(bar + 2, 0, 4, s));
				CK(cudaLaunchCooperativeKernel((void *)persistentAhead, blocks, THREADS, a, slotBytes, s));
			};
			ta = timed(s, [&] { runA(0); });
			reset();
			runA(0);
			result(ya);
			tar = timed(s, [&] { runA(1); });
			reset();
			runA(1);
			result(yar);
			tam = timed(s, [&] { runA(2); });
			reset();
			runA(2);
			result(yam);
		} else {
			ya = yar = yam = yg;
		}
		same = same && memcmp(yg.data(), yp.data(), rows * 4) == 0 && memcmp(yg.data(), yf.data(), rows * 4) == 0 &&
		       memcmp(yg.data(), ya.data(), rows * 4) == 0 && memcmp(yg.data(), yar.data(), rows * 4) == 0 && memcmp(yg.data(), yam.data(), rows * 4) == 0;
		printf("%-44s %10.2f", sh.name, wb / copyRate * 1e6);
		for (double t : tw) printf(" %10.2f", t * 1e3 / N);
		printf(" %10.2f %10.2f %10.2f %10.2f %10.2f   %s (%d blocks; one a multiprocessor: %d)\n", tp * 1e3 / N, tf * 1e3 / N, ta * 1e3 / N, tar * 1e3 / N,
		       tam * 1e3 / N, same ? "yes" : "NO", blocks, blocks1);
		CK(cudaFree(W));
		CK(cudaFree(b0));
		CK(cudaFree(b1));
	}
	return 0;
}
