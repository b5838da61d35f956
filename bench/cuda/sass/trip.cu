// trip.cu: the decode mat-vec's row loop (row_dotq, kernels/q8.cuh) alone, one
// kernel a type, for bench/cuda/sass/loops.py to count its SASS.
#include "../../../devices/cuda/kernels/common.cuh"
#include "../../../devices/cuda/kernels/q8.cuh"
template <int T>
__device__ void body(const uint8_t *W, long long rb, int nb, float *Y, int rows) {
	extern __shared__ float4 smem[];
	XQ xq = xq_at((uint8_t *)smem, nb * D8<T>::block);
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	for (int g = blockIdx.x * 16 + warp; g < rows; g += gridDim.x * 16) {
		const uint8_t *r = W + g * rb;
		float y[1];
		row_dotq<T, 1>(&r, xq, nb, lane, y);
		if (lane == 0) Y[g] = y[0];
	}
}
extern "C" __global__ void __launch_bounds__(512) ib_q4_k(const uint8_t *W, long long rb, int nb, float *Y, int rows) { body<T_Q4_K>(W, rb, nb, Y, rows); }
extern "C" __global__ void __launch_bounds__(512) ib_q6_k(const uint8_t *W, long long rb, int nb, float *Y, int rows) { body<T_Q6_K>(W, rb, nb, Y, rows); }
extern "C" __global__ void __launch_bounds__(512) ib_q4_0(const uint8_t *W, long long rb, int nb, float *Y, int rows) { body<T_Q4_0>(W, rb, nb, Y, rows); }
extern "C" __global__ void __launch_bounds__(512) ib_q8_0(const uint8_t *W, long long rb, int nb, float *Y, int rows) { body<T_Q8_0>(W, rb, nb, Y, rows); }
