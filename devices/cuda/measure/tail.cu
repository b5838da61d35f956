// tail measures whether a decode step's attention costs less run at the tail
// of the launch of q, k and v than as a launch of its own. After the
// thirtieth session a TinyLlama decode step spends about 4.5 µs a layer on
// its attention launch (16% of the step, bench/RESULTS.md), at depths under
// 128 a chain of trips more than bytes. The attention of one KV head needs
// only that head's rows of q, k and v, not the whole launch: so the block
// that finishes a KV head's last rows (a count a KV head, as flash-decoding's
// parts are counted) could run that head's attention while the rest of the
// launch finishes, saving the attention's launch and the wait for the
// launch's slowest block.
//
// Each phase is TinyLlama's q, k, v mat-vec (matvec.cuh's 2560×2048 4-bit
// rows, sixteen rows a block of 512 threads, 160 blocks) writing q (f32) and
// k, v (f16, into a cache at the step's position), then the attention of 32
// query heads of 64 over 4 KV heads and the span's keys, shaped as the
// device's attention_g: four warps take two query heads of one KV head, a
// warp 32 keys at a time, lane l key l, an online softmax over rounds of 32,
// the warps merged through shared memory. Phase i+1's x is phase i's
// attention output. The same phases run
//   - two launches:  the mat-vec, then the attention (16 blocks of 128
//                    threads), captured in a CUDA graph;
//   - tail:          one launch; each block adds its rows to its KV head's
//                    count (after a fence) and the block that completes it
//                    runs that head's attention with its sixteen warps (four
//                    units of four warps) and zeroes the count;
//   - spread:        one launch; the last four blocks to count a KV head's
//                    rows each run one unit of its attention (four warps),
//                    the three before the last waiting for the count, so
//                    that the attention runs on as many multiprocessors
//                    as its own launch's 16 blocks;
//   - mat-vec alone: the first launch only (what the attention adds to it).
// All ways must end with the same attention output bit for bit (checked):
// the attention's arithmetic is one function, in the same order.
// ptxas's registers for the tail kernel against the mat-vec alone's say
// what the attention's code costs the launch's warps.
//
// It is not part of the Go build. Run it on the GPU:
//
//	nvcc -O3 -arch=sm_90 -Xptxas -v -o tail tail.cu && ./tail
//
// Times are medians of repeated runs after a warm-up, by CUDA events.
#include <cmath>
#include <cstring>

#include "attn.cuh"
#include "matvec.cuh"

constexpr int ROWS = QR + 2 * KR, COLS = 2048;
constexpr int AW = 4;                      // warps of an attention unit (attention_g's ATG_WARPS)
constexpr int AU = THREADS / 32 / AW;      // units in a tail block: four, a KV head's eight query heads
constexpr int PER = ROWS / KVH;            // rows a KV head counts: 640

// kvOf is the KV head of mat-vec row r.
__host__ __device__ inline int kvOf(int r) { return r < QR ? r / (GQ * HD) : r < QR + KR ? (r - QR) / HD : (r - QR - KR) / HD; }

// qkv is the mat-vec part: each block's warps take rows bx·16+w, one each,
// q's written to q, k's and v's (as f16) to the caches' row pos.
__device__ __forceinline__ void qkv(const uint8_t *W, const float *x, float *q, __half *kc, __half *vc, int pos) {
	__shared__ __align__(16) int8_t xq[COLS];
	__shared__ float xd[COLS / 32];
	stage(x, COLS, xq, xd);
	__syncthreads();
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int row = blockIdx.x * (THREADS / 32) + warp;
	Held h;
	loadRow(W, row, COLS, lane, h);
	float v = dotRow(h, COLS, lane, xq, xd);
	v = v / (1 + fabsf(v));
	if (lane == 0) {
		if (row < QR)
			q[row] = v;
		else if (row < QR + KR)
			kc[(long long)pos * KR + row - QR] = __float2half(v);
		else
			vc[(long long)pos * KR + row - QR - KR] = __float2half(v);
	}
}

__global__ void __launch_bounds__(THREADS) mvOnly(const uint8_t *W, const float *x, float *q, __half *kc, __half *vc, int pos) { qkv(W, x, q, kc, vc, pos); }

// attn: a block of AW warps a unit: blocks KVH · GQ/2.
__global__ void __launch_bounds__(32 * AW) attn(const float *q, const __half *kc, const __half *vc, float *out, int span) {
	attnUnit<AW, AU>(q, kc, vc, out, span, 2 * blockIdx.x, 0, threadIdx.x >> 5, 32 * AW);
}

// tail: the mat-vec, then the attention of the KV head whose count this
// block completes, if any.
__global__ void __launch_bounds__(THREADS, 2) tail(const uint8_t *W, const float *x, float *q, __half *kc, __half *vc, float *out, int pos, unsigned *cnt) {
	__shared__ int run;
	qkv(W, x, q, kc, vc, pos);
	__threadfence(); // the block's rows seen by the GPU before its count
	__syncthreads();
	if (threadIdx.x == 0) {
		int g = kvOf(blockIdx.x * (THREADS / 32)); // a block's sixteen rows share a KV head
		run = atomicAdd(cnt + g, THREADS / 32) == PER - THREADS / 32 ? g : -1;
	}
	__syncthreads();
	if (run < 0) return;
	__threadfence(); // and the other blocks' rows seen from here on
	int warp = threadIdx.x >> 5;
	attnUnit<AW, AU>(q, kc, vc, out, pos + 1, run * GQ + 2 * (warp / AW), warp / AW, warp % AW, THREADS);
	if (threadIdx.x == 0) cnt[run] = 0; // for the next launch
}

// tailSpread: the mat-vec, then, in each of the last AU blocks to count a KV
// head's rows, one unit of that head's attention (its first AW warps; the
// others return), as many blocks as attn's. The counts grow over a graph's
// launches (zeroed at its start): a launch's rows are all counted at want,
// and a block that is not the last waits for it.
__global__ void __launch_bounds__(THREADS, 2) tailSpread(const uint8_t *W, const float *x, float *q, __half *kc, __half *vc, float *out, int pos,
                                                         unsigned *cnt, unsigned want) {
	__shared__ int unit;
	qkv(W, x, q, kc, vc, pos);
	__threadfence(); // the block's rows seen by the GPU before its count
	__syncthreads();
	int g = kvOf(blockIdx.x * (THREADS / 32));
	if (threadIdx.x == 0) {
		unsigned old = atomicAdd(cnt + g, THREADS / 32);
		int k = (int)(want - THREADS / 32 - old) / (THREADS / 32); // 0: the last block
		unit = k < AU ? k : -1;
		if (unit > 0) {
			unsigned c;
			do
				asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(c) : "l"(cnt + g) : "memory");
			while (c < want);
		}
	}
	__syncthreads();
	int warp = threadIdx.x >> 5;
	if (unit < 0 || warp >= AW) return;
	__threadfence(); // the other blocks' rows seen from here on
	attnUnit<AW, AU>(q, kc, vc, out, pos + 1, g * GQ + 2 * unit, 0, warp, 32 * AW);
}

int main() {
	cudaDeviceProp p;
	CK(cudaGetDeviceProperties(&p, 0));
	cudaFuncAttributes fa, fm, ft;
	CK(cudaFuncGetAttributes(&fm, mvOnly));
	CK(cudaFuncGetAttributes(&ft, tail));
	cudaFuncAttributes fs;
	CK(cudaFuncGetAttributes(&fs, tailSpread));
	CK(cudaFuncGetAttributes(&fa, attn));
	int perM = 0, perT = 0;
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perM, mvOnly, THREADS, 0));
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perT, tail, THREADS, 0));
	printf("%s, %d multiprocessors; registers (spilled bytes): mat-vec %d (%d blocks a multiprocessor), tail %d (%d, %zu), spread %d (%zu), attention %d\n",
	       p.name, p.multiProcessorCount, fm.numRegs, perM, ft.numRegs, perT, ft.localSizeBytes, fs.numRegs, fs.localSizeBytes, fa.numRegs);
	const int N = 64, blocks = ROWS / (THREADS / 32);
	long long wb = rowBytes(COLS) * ROWS;
	int copies = (int)std::max(2LL, (3LL * p.l2CacheSize + wb - 1) / wb);
	uint8_t *W;
	CK(cudaMalloc(&W, wb * copies));
	fillWeights(W, ROWS, COLS, copies);
	Chain ch(COLS); // COLS == QR: a phase's output is the next one's x
	float *q;
	__half *kc, *vc;
	unsigned *cnt;
	CK(cudaMalloc(&q, QR * 4));
	newKV(&kc, &vc);
	CK(cudaMalloc(&cnt, KVH * 4));
	CK(cudaMemset(cnt, 0, KVH * 4));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	printf("%-8s %12s %12s %12s %12s   %s\n", "span", "mat-vec us", "two us", "tail us", "spread us", "same out");
	for (int span : {16, 64, 128, 512}) {
		int pos = span - 1;
		auto capture = [&](int way, cudaGraphExec_t &ge) {
			cudaGraph_t g;
			CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
			for (int i = 0; i < N; i++) {
				const uint8_t *Wi = W + (i % copies) * wb;
				if (way == 0) {
					mvOnly<<<blocks, THREADS, 0, s>>>(Wi, ch.x0, q, kc, vc, pos);
				} else if (way == 1) {
					mvOnly<<<blocks, THREADS, 0, s>>>(Wi, ch.in(i), q, kc, vc, pos);
					attn<<<QH / 2, 32 * AW, 0, s>>>(q, kc, vc, ch.out(i), span);
				} else if (way == 2) {
					if (i == 0) CK(cudaMemsetAsync(cnt, 0, KVH * 4, s));
					tail<<<blocks, THREADS, 0, s>>>(Wi, ch.in(i), q, kc, vc, ch.out(i), pos, cnt);
				} else {
					if (i == 0) CK(cudaMemsetAsync(cnt, 0, KVH * 4, s));
					tailSpread<<<blocks, THREADS, 0, s>>>(Wi, ch.in(i), q, kc, vc, ch.out(i), pos, cnt, (unsigned)(PER * (i + 1)));
				}
			}
			CK(cudaStreamEndCapture(s, &g));
			CK(cudaGraphInstantiateWithFlags(&ge, g, 0));
			CK(cudaGraphDestroy(g));
		};
		cudaGraphExec_t g0, g1, g2, g3;
		capture(0, g0);
		capture(1, g1);
		capture(2, g2);
		capture(3, g3);
		auto run = [&](cudaGraphExec_t g, std::vector<float> *res) {
			ch.reset(s);
			CK(cudaGraphLaunch(g, s));
			if (res) {
				CK(cudaMemcpyAsync(res->data(), ch.out(N - 1), QR * 4, cudaMemcpyDeviceToHost, s));
				CK(cudaStreamSynchronize(s));
			}
		};
		double t0 = timed(s, [&] { CK(cudaGraphLaunch(g0, s)); });
		double t1 = timed(s, [&] { CK(cudaGraphLaunch(g1, s)); });
		double t2 = timed(s, [&] { CK(cudaGraphLaunch(g2, s)); });
		double t3 = timed(s, [&] { CK(cudaGraphLaunch(g3, s)); });
		std::vector<float> r1(QR), r2(QR), r3(QR);
		run(g1, &r1);
		run(g2, &r2);
		run(g3, &r3);
		bool finite = true;
		for (float v : r1) finite = finite && std::isfinite(v) && v != 0;
		bool same = memcmp(r1.data(), r2.data(), QR * 4) == 0 && memcmp(r1.data(), r3.data(), QR * 4) == 0 && finite;
		printf("%-8d %12.2f %12.2f %12.2f %12.2f   %s\n", span, t0 * 1e3 / N, t1 * 1e3 / N, t2 * 1e3 / N, t3 * 1e3 / N, same ? "yes" : "NO");
		for (auto g : {g0, g1, g2, g3}) CK(cudaGraphExecDestroy(g));
	}
	return 0;
}
