// oattn measures whether a decode step's short-context attention costs less
// inside the o projection's launch than as a launch of its own. After the
// thirty-second session TinyLlama's decode attention is 22 launches of about
// 4.7 µs a step (16% of it), at depths under 128 a chain of latencies more
// than bytes; the o projection after it is 128 blocks, one a multiprocessor.
// Every block of the o projection needs the whole attention output, so each
// would compute all 32 heads itself, reading the KV cache once a block (at
// 128 keys, 128 KiB of keys and values for TinyLlama's 4 KV heads: L2
// traffic that grows with the span, so this can pay only below some depth,
// which this program finds).
//
// Each phase: the attention of 32 query heads of 64 over 4 KV heads and the
// span's keys (attn.cuh, shaped as the device's attention_g), whose queries
// are the phase before's output, then the o projection (matvec.cuh's
// 2048×2048 4-bit rows, sixteen rows a block of 512 threads, 128 blocks),
// bounded as v/(1+|v|). The same phases run
//   - o alone:       the mat-vec only (what the attention adds to it);
//   - two launches:  the attention (16 blocks of four warps), then the
//                    mat-vec, captured in a CUDA graph (the device today);
//   - inside:        one launch: each block runs the 16 units of two heads
//                    in four rounds of its four units of four warps into
//                    shared memory (the same sums as two launches, so the
//                    output is checked equal bit for bit), then quantizes
//                    that and takes its rows;
//   - inside, pre:   the same with each warp's row loaded into registers
//                    before the attention (its bytes do not depend on it);
//   - one warp a pair, pre: all 16 pairs of heads at once, a warp each over
//                    all the span's keys (other sums: the largest difference
//                    from two launches is printed, not required to be 0).
// Keys and values are read by plain loads, which L1 may keep across a
// block's units, as attention_g reads them.
//
// It is not part of the Go build. Run it on the GPU:
//
//	nvcc -O3 -arch=sm_90 -Xptxas -v -o oattn oattn.cu && ./oattn
//
// Times are medians of repeated runs after a warm-up, by CUDA events.
#include <cmath>
#include <cstring>

#include "attn.cuh"
#include "matvec.cuh"

constexpr int COLS = QR, ROWS = QR; // the o projection: 2048×2048
constexpr int BLOCKS = ROWS / (THREADS / 32);

// rows takes each warp's row of the o projection from the staged input: h
// already loaded where held.
__device__ __forceinline__ void rows(const uint8_t *W, float *y, const int8_t *xq, const float *xd, Held &h, bool held) {
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int row = blockIdx.x * (THREADS / 32) + warp;
	if (!held) loadRow(W, row, COLS, lane, h);
	float v = dotRow(h, COLS, lane, xq, xd);
	if (lane == 0) y[row] = v / (1 + fabsf(v));
}

// oOnly is the o projection of x (global).
__global__ void __launch_bounds__(THREADS) oOnly(const uint8_t *W, const float *x, float *y) {
	__shared__ __align__(16) int8_t xq[COLS];
	__shared__ float xd[COLS / 32];
	stage(x, COLS, xq, xd);
	__syncthreads();
	Held h;
	rows(W, y, xq, xd, h, false);
}

// attn is the attention alone: a block of four warps a pair of heads.
__global__ void __launch_bounds__(128) attn(const float *q, const __half *kc, const __half *vc, float *out, int span) {
	attnUnit<4, 1, false>(q, kc, vc, out, span, 2 * blockIdx.x, 0, threadIdx.x >> 5, 128);
}

// inside is the attention in every block (into shared memory), then the o
// projection: with ONE, a warp a pair of heads at once; else four rounds of
// four units of four warps. With PRE the warp's row is loaded first.
template <bool ONE, bool PRE>
__global__ void __launch_bounds__(THREADS, 1) inside(const uint8_t *W, const float *q, const __half *kc, const __half *vc, float *y, int span) {
	__shared__ __align__(16) float a[QR];
	__shared__ __align__(16) int8_t xq[COLS];
	__shared__ float xd[COLS / 32];
	int warp = threadIdx.x >> 5;
	Held h;
	if (PRE) loadRow(W, blockIdx.x * (THREADS / 32) + warp, COLS, threadIdx.x & 31, h);
	if (ONE) {
		attnUnit<1, THREADS / 32, false>(q, kc, vc, a, span, 2 * warp, warp, 0, THREADS);
	} else {
		for (int r = 0; r < QH / 2 / (THREADS / 32 / 4); r++) {
			int u = warp / 4;
			attnUnit<4, THREADS / 32 / 4, false>(q, kc, vc, a, span, 2 * (r * (THREADS / 32 / 4) + u), u, warp % 4, THREADS);
			__syncthreads(); // the units' shared memory is the next round's
		}
	}
	__syncthreads();
	stage<false>(a, COLS, xq, xd);
	__syncthreads();
	rows(W, y, xq, xd, h, PRE);
}

int main() {
	cudaDeviceProp p;
	CK(cudaGetDeviceProperties(&p, 0));
	cudaFuncAttributes fo, fa, f4, f4p, f1p;
	CK(cudaFuncGetAttributes(&fo, oOnly));
	CK(cudaFuncGetAttributes(&fa, attn));
	CK(cudaFuncGetAttributes(&f4, inside<false, false>));
	CK(cudaFuncGetAttributes(&f4p, inside<false, true>));
	CK(cudaFuncGetAttributes(&f1p, inside<true, true>));
	printf("%s, %d multiprocessors; registers (spilled bytes): o %d, attention %d, inside %d (%zu), inside pre %d (%zu), one warp a pair pre %d (%zu)\n",
	       p.name, p.multiProcessorCount, fo.numRegs, fa.numRegs, f4.numRegs, f4.localSizeBytes, f4p.numRegs, f4p.localSizeBytes, f1p.numRegs,
	       f1p.localSizeBytes);
	const int N = 64;
	long long wb = rowBytes(COLS) * ROWS;
	int copies = (int)std::max(2LL, (3LL * p.l2CacheSize + wb - 1) / wb);
	uint8_t *W;
	CK(cudaMalloc(&W, wb * copies));
	fillWeights(W, ROWS, COLS, copies);
	Chain ch(QR);
	float *a;
	__half *kc, *vc;
	CK(cudaMalloc(&a, QR * 4));
	newKV(&kc, &vc);
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	// Phase i's queries are ch.in(i): the phase before's output.
	const char *names[] = {"o alone", "two launches", "inside", "inside pre", "one warp pre"};
	printf("%-6s", "span");
	for (auto n : names) printf(" %14s", n);
	printf("   (us a phase)  inside = two  one warp's largest difference\n");
	for (int span : {8, 16, 32, 64, 128, 256, 512}) {
		cudaGraphExec_t ge[5];
		for (int way = 0; way < 5; way++) {
			cudaGraph_t g;
			CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
			for (int i = 0; i < N; i++) {
				const uint8_t *Wi = W + (i % copies) * wb;
				switch (way) {
				case 0: oOnly<<<BLOCKS, THREADS, 0, s>>>(Wi, ch.in(i), ch.out(i)); break;
				case 1:
					attn<<<QH / 2, 128, 0, s>>>(ch.in(i), kc, vc, a, span);
					oOnly<<<BLOCKS, THREADS, 0, s>>>(Wi, a, ch.out(i));
					break;
				case 2: inside<false, false><<<BLOCKS, THREADS, 0, s>>>(Wi, ch.in(i), kc, vc, ch.out(i), span); break;
				case 3: inside<false, true><<<BLOCKS, THREADS, 0, s>>>(Wi, ch.in(i), kc, vc, ch.out(i), span); break;
				case 4: inside<true, true><<<BLOCKS, THREADS, 0, s>>>(Wi, ch.in(i), kc, vc, ch.out(i), span); break;
				}
			}
			CK(cudaStreamEndCapture(s, &g));
			CK(cudaGraphInstantiateWithFlags(&ge[way], g, 0));
			CK(cudaGraphDestroy(g));
		}
		auto run = [&](cudaGraphExec_t g, std::vector<float> &res) {
			ch.reset(s);
			CK(cudaGraphLaunch(g, s));
			CK(cudaMemcpyAsync(res.data(), ch.out(N - 1), QR * 4, cudaMemcpyDeviceToHost, s));
			CK(cudaStreamSynchronize(s));
		};
		printf("%-6d", span);
		for (int way = 0; way < 5; way++) printf(" %14.2f", timed(s, [&] { CK(cudaGraphLaunch(ge[way], s)); }) * 1e3 / N);
		std::vector<float> r1(QR), r2(QR), r3(QR), r4(QR);
		run(ge[1], r1);
		run(ge[2], r2);
		run(ge[3], r3);
		run(ge[4], r4);
		bool finite = true;
		for (float v : r1) finite = finite && std::isfinite(v) && v != 0;
		bool same = finite && memcmp(r1.data(), r2.data(), QR * 4) == 0 && memcmp(r1.data(), r3.data(), QR * 4) == 0;
		float worst = 0;
		for (int i = 0; i < QR; i++) worst = std::max(worst, std::fabs(r4[i] - r1[i]));
		printf("   %14s  %g\n", same ? "yes" : "NO", worst);
		for (auto g : ge) CK(cudaGraphExecDestroy(g));
	}
	return 0;
}
