// roofline measures the numbers a hardware profile (configs/hardware/h100-*.yaml)
// needs for an NVIDIA GPU and its host link: kernel launch cost, host<->device
// copy latency and bandwidth (pinned and pageable), HBM read and copy
// bandwidth, the bandwidth plain f32, Q8_0 and Q4_0 mat-vec kernels reach, the
// time of an element-wise op at decode size, and the f32 FMA rate.
//
// It is not part of the Go build. Run it on the machine the profile is for:
//
//	nvcc -O3 -arch=sm_90 -o roofline roofline.cu && ./roofline
//
// Every timing is the median of repeated runs after a warm-up; device work is
// timed with CUDA events, host-visible latencies with a host clock around a
// synchronising call, as the executor would see them.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_fp16.h>
#include <vector>

#include "measure.cuh"

static double now() {
	return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

__global__ void empty() {}

// readAll sums a buffer with 16-byte loads, four in flight per thread, and
// writes one value per block: bytes read ≈ the buffer.
__global__ void readAll(const float4 *p, size_t n, float *out) {
	float s = 0;
	size_t stride = (size_t)gridDim.x * blockDim.x;
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i + 3 * stride < n; i += 4 * stride) {
		float4 a = p[i], b = p[i + stride], c = p[i + 2 * stride], d = p[i + 3 * stride];
		s += a.x + a.y + a.z + a.w + b.x + b.y + b.z + b.w + c.x + c.y + c.z + c.w + d.x + d.y + d.z + d.w;
	}
	for (; i < n; i += stride) {
		float4 a = p[i];
		s += a.x + a.y + a.z + a.w;
	}
	if (s == 12345.678f) out[blockIdx.x] = s; // keep the loads
}

__global__ void copyAll(const float4 *src, float4 *dst, size_t n) {
	size_t stride = (size_t)gridDim.x * blockDim.x;
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = src[i];
}

// gemvF32: one warp per row of W (rows×cols, row-major f32), 16-byte loads.
__global__ void gemvF32(const float *w, const float *x, float *y, int rows, int cols) {
	int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
	if (row >= rows) return;
	const float4 *r = (const float4 *)(w + (size_t)row * cols);
	const float4 *xv = (const float4 *)x;
	float s = 0;
	for (int i = lane; i < cols / 4; i += 32) {
		float4 a = r[i], b = xv[i];
		s += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
	}
	for (int o = 16; o > 0; o /= 2) s += __shfl_down_sync(0xffffffff, s, o);
	if (lane == 0) y[row] = s;
}

// gemvQ: the same over GGUF blocks of 32 weights with an f16 scale: Q8_0 (34
// bytes: scale, 32 int8) or Q4_0 (18 bytes: scale, 16 bytes of nibbles, low
// nibbles first, value (q-8)·scale). Blocks are only 2-byte aligned, so each
// warp first copies its row to shared memory with 16-byte loads (rows of
// 4096 weights are whole multiples of 16 bytes), then lane l multiplies
// weight l of every block: a straightforward kernel, not a tuned one.
template <int BB> __global__ void gemvQ(const unsigned char *w, const float *x, float *y, int rows, int cols) {
	extern __shared__ uint4 sm[];
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32, row = blockIdx.x * (blockDim.x / 32) + warp;
	if (row >= rows) return;
	int nb = cols / 32, n16 = nb * BB / 16;
	const uint4 *src = (const uint4 *)(w + (size_t)row * nb * BB);
	uint4 *dst = sm + warp * n16;
	for (int i = lane; i < n16; i += 32) dst[i] = src[i];
	__syncwarp();
	const unsigned char *r = (const unsigned char *)dst;
	float s = 0;
	for (int b = 0; b < nb; b++) { // lane l takes element l of every block: x reads coalesce
		const unsigned char *blk = r + b * BB;
		float d = __half2float(*(const __half *)blk);
		int q = BB == 34 ? (int)(signed char)blk[2 + lane] : (lane < 16 ? (blk[2 + lane] & 15) : (blk[2 + lane - 16] >> 4)) - 8;
		s += d * (float)q * x[b * 32 + lane];
	}
	for (int o = 16; o > 0; o /= 2) s += __shfl_down_sync(0xffffffff, s, o);
	if (lane == 0) y[row] = s;
}

__global__ void addVec(const float *a, const float *b, float *c, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) c[i] = a[i] + b[i];
}

// fmaPeak: 8 independent FMA chains per thread; 2 FLOPs per FMA.
__global__ void fmaPeak(float *out, int iters, float a, float b) {
	float r[8];
#pragma unroll
	for (int k = 0; k < 8; k++) r[k] = threadIdx.x + k;
	for (int i = 0; i < iters; i++) {
#pragma unroll
		for (int k = 0; k < 8; k++) r[k] = fmaf(r[k], a, b);
	}
	float s = 0;
#pragma unroll
	for (int k = 0; k < 8; k++) s += r[k];
	if (s == 12345.678f) out[0] = s;
}

static void fill(float *d, size_t n) {
	std::vector<float> h(std::min(n, (size_t)1 << 24));
	for (size_t i = 0; i < h.size(); i++) h[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
	for (size_t off = 0; off < n; off += h.size()) {
		size_t k = std::min(h.size(), n - off);
		CK(cudaMemcpy(d + off, h.data(), k * 4, cudaMemcpyHostToDevice));
	}
}

int main() {
	cudaDeviceProp p;
	CK(cudaGetDeviceProperties(&p, 0));
	int memClockKHz = 0, busWidth = 0;
	cudaDeviceGetAttribute(&memClockKHz, cudaDevAttrMemoryClockRate, 0);
	cudaDeviceGetAttribute(&busWidth, cudaDevAttrGlobalMemoryBusWidth, 0);
	printf("device: %s, %d SMs, %.1f GiB, L2 %d MiB, mem clock %d MHz, bus %d bits (nominal %.0f GB/s)\n", p.name,
	       p.multiProcessorCount, p.totalGlobalMem / 1073741824.0, p.l2CacheSize >> 20, memClockKHz / 1000, busWidth,
	       2.0 * memClockKHz * 1e3 * busWidth / 8 / 1e9);
	CK(cudaFree(0));

	// Launch cost: back to back (what a stream of ops pays), and launch + sync.
	double backToBack = timed(0, [] { for (int i = 0; i < 1000; i++) empty<<<1, 32>>>(); }, 20) / 1000;
	std::vector<double> ls;
	for (int i = 0; i < 2000; i++) {
		double t0 = now();
		empty<<<1, 32>>>();
		CK(cudaStreamSynchronize(0));
		if (i >= 100) ls.push_back(now() - t0);
	}
	printf("launch: %.2f us back to back, %.2f us launch+sync\n", backToBack * 1e3, median(ls) * 1e6);

	// Element-wise add at decode sizes, back to back.
	{
		int n = 2048;
		float *a, *b, *c;
		CK(cudaMalloc(&a, n * 4));
		CK(cudaMalloc(&b, n * 4));
		CK(cudaMalloc(&c, n * 4));
		fill(a, n);
		fill(b, n);
		double t = timed(0, [&] { for (int i = 0; i < 1000; i++) addVec<<<(n + 255) / 256, 256>>>(a, b, c, n); }, 20) / 1000;
		printf("add of %d f32, back to back: %.2f us each\n", n, t * 1e3);
		CK(cudaFree(a));
		CK(cudaFree(b));
		CK(cudaFree(c));
	}

	// Host <-> device copies.
	size_t sizes[] = {8 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20};
	size_t maxSize = 256 << 20;
	char *pageable = (char *)malloc(maxSize), *pinned;
	CK(cudaMallocHost(&pinned, maxSize));
	memset(pageable, 1, maxSize);
	memset(pinned, 1, maxSize);
	char *dev;
	CK(cudaMalloc(&dev, maxSize));
	printf("copies (median of host-timed synchronous cudaMemcpy):\n");
	printf("  %10s %22s %22s %22s %22s\n", "bytes", "H2D pageable", "D2H pageable", "H2D pinned", "D2H pinned");
	for (size_t sz : sizes) {
		printf("  %10zu", sz);
		for (int pin = 0; pin < 2; pin++)
			for (int dir = 0; dir < 2; dir++) {
				char *h = pin ? pinned : pageable;
				int reps = sz >= (16 << 20) ? 20 : 300;
				std::vector<double> ts;
				for (int i = 0; i < reps + 5; i++) {
					double t0 = now();
					if (dir == 0) CK(cudaMemcpy(dev, h, sz, cudaMemcpyHostToDevice));
					else CK(cudaMemcpy(h, dev, sz, cudaMemcpyDeviceToHost));
					if (i >= 5) ts.push_back(now() - t0);
				}
				double t = median(ts);
				printf(" %8.2f us %6.2f GB/s", t * 1e6, sz / t / 1e9);
			}
		printf("\n");
	}
	CK(cudaFreeHost(pinned));
	free(pageable);
	CK(cudaFree(dev));

	// HBM: read-only and copy, 4 GiB.
	{
		size_t bytes = (size_t)4 << 30, n = bytes / 16;
		float4 *a, *b;
		float *out;
		CK(cudaMalloc(&a, bytes));
		CK(cudaMalloc(&b, bytes / 2));
		CK(cudaMalloc(&out, 1 << 20));
		fill((float *)a, bytes / 4);
		int blocks = p.multiProcessorCount * 8;
		double tr = timed(0, [&] { readAll<<<blocks, 512>>>(a, n, out); }, 10);
		double tc = timed(0, [&] { copyAll<<<blocks, 512>>>(a, b, n / 2); }, 10);
		printf("HBM: read %.0f GB/s, copy %.0f GB/s (read+write bytes)\n", bytes / tr / 1e6, bytes / tc / 1e6);
		CK(cudaFree(a));
		CK(cudaFree(b));
		CK(cudaFree(out));
	}

	// Mat-vec (decode) over weights much larger than L2, rotating between
	// copies so that no run finds its weights in L2.
	{
		int rows = 11008, cols = 4096, copies = 8;
		size_t wf = (size_t)rows * cols * 4, w8 = (size_t)rows * (cols / 32) * 34, w4 = (size_t)rows * (cols / 32) * 18;
		std::vector<float *> f(copies);
		std::vector<unsigned char *> q8(copies), q4(copies);
		for (int i = 0; i < copies; i++) {
			CK(cudaMalloc(&f[i], wf));
			fill(f[i], wf / 4);
			CK(cudaMalloc(&q8[i], w8));
			CK(cudaMemset(q8[i], 0x11, w8)); // scale 0x1111 is a small finite f16
			CK(cudaMalloc(&q4[i], w4));
			CK(cudaMemset(q4[i], 0x11, w4));
		}
		float *x, *y;
		CK(cudaMalloc(&x, cols * 4));
		CK(cudaMalloc(&y, rows * 4));
		fill(x, cols);
		int k = 0;
		dim3 grid((rows + 7) / 8);
		double tf = timed(0, [&] { gemvF32<<<grid, 256>>>(f[k++ % copies], x, y, rows, cols); }, 40);
		double t8 = timed(0, [&] { gemvQ<34><<<grid, 256, 8 * w8 / rows>>>(q8[k++ % copies], x, y, rows, cols); }, 40);
		double t4 = timed(0, [&] { gemvQ<18><<<grid, 256, 8 * w4 / rows>>>(q4[k++ % copies], x, y, rows, cols); }, 40);
		printf("mat-vec %dx%d: f32 %.1f us, %.0f GB/s of weights; Q8_0 %.1f us, %.0f GB/s; Q4_0 %.1f us, %.0f GB/s\n", rows,
		       cols, tf * 1e3, wf / tf / 1e6, t8 * 1e3, w8 / t8 / 1e6, t4 * 1e3, w4 / t4 / 1e6);
		for (int i = 0; i < copies; i++) {
			CK(cudaFree(f[i]));
			CK(cudaFree(q8[i]));
			CK(cudaFree(q4[i]));
		}
		CK(cudaFree(x));
		CK(cudaFree(y));
	}

	// f32 FMA rate.
	{
		float *out;
		CK(cudaMalloc(&out, 4));
		int iters = 1 << 14, blocks = p.multiProcessorCount * 16, threads = 256;
		double t = timed(0, [&] { fmaPeak<<<blocks, threads>>>(out, iters, 0.999f, 0.001f); }, 10);
		double flops = 2.0 * 8 * iters * (double)blocks * threads;
		printf("f32 FMA: %.1f TFLOPS\n", flops / t / 1e9);
		CK(cudaFree(out));
	}
	return 0;
}
