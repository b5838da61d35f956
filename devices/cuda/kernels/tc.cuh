// tc.cuh: tensor-core and asynchronous-copy helpers shared by the prefill
// mat-muls (matmul.cu: f16 inputs; mmq.cu: 8-bit inputs).
#pragma once
#include <cuda_fp16.h>
#include <stdint.h>

__device__ __forceinline__ void mma_f16(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
	             : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t *r, uint32_t addr) {
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

// cp_async16 copies 16 bytes, or writes 16 zeros where n is 0.
__device__ __forceinline__ void cp_async16(void *dst, const void *src, int n) {
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(n));
}

__device__ __forceinline__ void cp_async4(void *dst, const void *src) {
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(dst)), "l"(src));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// cp_async_wait waits until at most n of this thread's groups are pending.
template <int n> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(n)); }

__device__ __forceinline__ uint32_t half2_bits(float lo, float hi) {
	__half2 h = __floats2half2_rn(lo, hi);
	return *(uint32_t *)&h;
}


// pick3 chooses a prefill mat-mul block's weight and tile: one launch
// multiplies up to three weights of one type and row length by the same
// activations (a layer's q, k and v; gate and up), the 64-row tiles of
// weight j following those of weight j-1 along blockIdx.x. It returns the
// weight W, its output Y and rows, and the tile's first row r0.
__device__ __forceinline__ void pick3(const uint8_t *W0, const uint8_t *W1, const uint8_t *W2, float *Y0, float *Y1, float *Y2, int rows0,
                                      int rows1, int rows2, const uint8_t *&W, float *&Y, int &rows, int &r0) {
	int t0 = (rows0 + 63) / 64, t1 = (rows1 + 63) / 64, tx = blockIdx.x;
	if (tx < t0) {
		W = W0, Y = Y0, rows = rows0, r0 = 64 * tx;
	} else if (tx < t0 + t1) {
		W = W1, Y = Y1, rows = rows1, r0 = 64 * (tx - t0);
	} else {
		W = W2, Y = Y2, rows = rows2, r0 = 64 * (tx - t0 - t1);
	}
}
