// matvec.cuh: the decode-shaped mat-vec that boundary.cu and tail.cu chain:
// y = W·x for a weight of 4-bit quants in blocks of 32 with an f16 scale a
// block (Q4_0's 18 bytes, quants and scales apart), every block of the grid
// first quantizing x (f32, read from L2) to 8 bits in shared memory, then
// each warp taking rows with 16-byte loads and dp4a. With MV_CS 1 (the
// default) the weights are read by streaming loads (ld.global.cs), as the
// decode's were in the thirtieth session (since the thirty-first its loads
// are evict-first in L2 only, kernels/q8.cuh), so that they do not push a
// step's other data out of L2; boundary.cu keeps plain loads (MV_CS 0), as
// its tables were measured.
#pragma once
#include <cstdint>
#include <cuda_fp16.h>
#include <vector>

#include "measure.cuh"

#ifndef MV_CS
#define MV_CS 1
#endif

constexpr int THREADS = 512; // the decode mat-vec's sixteen warps a block
constexpr int MAXC = 8192;   // the most columns a phase stages
constexpr int MAXT = 4;      // the most 16-byte quant loads a lane holds for one row (cols ≤ 4096)

// A row of cols weights: cols/2 bytes of quants (byte j of a block: weight
// j in its low nibble, j+16 in its high), then cols/32 f16 scales.
__host__ __device__ inline long long rowBytes(int cols) { return cols / 2 + cols / 32 * 2; }

// quantPiece quantizes a piece of eight (v) of a block of 32, whose four
// pieces are four adjacent lanes' (every lane of the warp takes part in the
// shuffles): the packed 8-bit values, and the block's scale in d.
__device__ __forceinline__ uint2 quantPiece(const float *v, float &d) {
	float m = 0;
#pragma unroll
	for (int k = 0; k < 8; k++) m = fmaxf(m, fabsf(v[k]));
	m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, 1));
	m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, 2));
	d = m / 127;
	float id = d > 0 ? 1 / d : 0;
	unsigned lo = 0, hi = 0;
#pragma unroll
	for (int k = 0; k < 4; k++) {
		lo |= (unsigned)(uint8_t)(int8_t)__float2int_rn(v[k] * id) << (8 * k);
		hi |= (unsigned)(uint8_t)(int8_t)__float2int_rn(v[k + 4] * id) << (8 * k);
	}
	return make_uint2(lo, hi);
}

// stage quantizes x (cols f32, read from L2, or with CG false by plain
// loads: x in shared memory) into the block's xq (int8) and xd (a scale for
// each 32), each thread a piece of 8, four threads a block.
template <bool CG = true> __device__ __forceinline__ void stage(const float *x, int cols, int8_t *xq, float *xd) {
	auto ld = [](const float *p) { return CG ? __ldcg((const float4 *)p) : *(const float4 *)p; };
	for (int c = threadIdx.x; 8 * c < cols; c += blockDim.x) {
		float4 a = ld(x + 8 * c), b = ld(x + 8 * c + 4);
		float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w}, d;
		*(uint2 *)(xq + 8 * c) = quantPiece(v, d);
		if ((c & 3) == 0) xd[c / 4] = d;
	}
}

// Held are one row's quant loads and scales, loaded ahead (prefetched).
struct Held {
	uint4 q[MAXT];
	__half d[MAXT];
};

// loadAt loads a row at r: from global memory by streaming loads (CS), or
// plain ones (a row copied into shared memory).
template <bool CS> __device__ __forceinline__ void loadAt(const uint8_t *r, int cols, int lane, Held &h) {
	const __half *sc = (const __half *)(r + cols / 2);
	int nb = cols / 32;
#pragma unroll
	for (int t = 0; t < MAXT; t++) {
		int b = t * 32 + lane;
		if (b < nb) {
			if (CS)
				h.q[t] = __ldcs((const uint4 *)(r + 16 * b)), h.d[t] = __ushort_as_half(__ldcs((const unsigned short *)(sc + b)));
			else
				h.q[t] = *(const uint4 *)(r + 16 * b), h.d[t] = sc[b];
		}
	}
}

// loadRow is loadAt for row row of W.
__device__ __forceinline__ void loadRow(const uint8_t *W, int row, int cols, int lane, Held &h) { loadAt<MV_CS>(W + row * rowBytes(cols), cols, lane, h); }

__device__ __forceinline__ float dotRow(const Held &h, int cols, int lane, const int8_t *xq, const float *xd) {
	int nb = cols / 32;
	float acc = 0;
#pragma unroll
	for (int t = 0; t < MAXT; t++) {
		int b = t * 32 + lane;
		if (b >= nb) break;
		const int *xs = (const int *)(xq + 32 * b);
		unsigned w[4] = {h.q[t].x, h.q[t].y, h.q[t].z, h.q[t].w};
		int s = 0;
#pragma unroll
		for (int k = 0; k < 4; k++) {
			s = __dp4a((int)(w[k] & 0x0f0f0f0f), xs[k], s);
			s = __dp4a((int)((w[k] >> 4) & 0x0f0f0f0f), xs[k + 4], s);
		}
		acc = fmaf(__half2float(h.d[t]) * xd[b], (float)s, acc);
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, o);
	return acc;
}

// fillWeights is copies weights of rows × cols at W: random quants, small
// positive f16 scales.
static void fillWeights(uint8_t *W, int rows, int cols, int copies) {
	long long wb = rowBytes(cols) * rows;
	std::vector<uint8_t> hw(wb * copies);
	unsigned st = 12345;
	for (auto &c : hw) st = st * 1103515245 + 12345, c = (uint8_t)(st >> 16);
	for (int c = 0; c < copies; c++)
		for (int r = 0; r < rows; r++) {
			__half *sc = (__half *)(hw.data() + c * wb + r * rowBytes(cols) + cols / 2);
			for (int b = 0; b < cols / 32; b++) sc[b] = __float2half(0.01f + 0.001f * ((r + b + c) % 7));
		}
	CK(cudaMemcpy(W, hw.data(), hw.size(), cudaMemcpyHostToDevice));
}

// weightCopies allocates and fills (fillWeights) enough copies of a rows ×
// cols weight, wb bytes each, that a chain rotating over them reads them
// from DRAM (together three times L2, at least two).
static uint8_t *weightCopies(int rows, int cols, long long l2, long long &wb, int &copies) {
	wb = rowBytes(cols) * rows;
	copies = (int)std::max(2LL, (3LL * l2 + wb - 1) / wb);
	uint8_t *W;
	CK(cudaMalloc(&W, wb * copies));
	fillWeights(W, rows, cols, copies);
	return W;
}
