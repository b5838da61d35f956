// ops.cu: the small ops of a Llama step over f32 rows; all are bound by
// memory (one read and one write of each element) or, at decode sizes, by the
// launch.
#include "common.cuh"

// embed_<type>: out[i, :] = row tokens[i] of the table W, decoded. One block
// per token; threads take pieces of 8.
template <int T>
__device__ __forceinline__ void embed(const uint8_t *W, long long rowBytes, const int *tokens, float *out, int cols) {
	const uint8_t *r = W + tokens[blockIdx.x] * rowBytes;
	float *o = out + (long long)blockIdx.x * cols;
	for (int c = threadIdx.x; c < cols / 8; c += blockDim.x) {
		float w[8];
		int e0, e1;
		Q<T>::deq(r, c, w, e0, e1);
#pragma unroll
		for (int j = 0; j < 4; j++) o[e0 + j] = w[j], o[e1 + j] = w[4 + j];
	}
	if (Tail<T>::any)
		for (int e = 8 * (cols / 8) + threadIdx.x; e < cols; e += blockDim.x) o[e] = Tail<T>::one(r, e);
}

#define EMBED(id, name) \
	extern "C" __global__ void embed_##name(const uint8_t *W, long long rb, const int *tokens, float *out, int cols) { embed<id>(W, rb, tokens, out, cols); }
FOR_TYPES(EMBED)

// rms_norm: y = x·(1/sqrt(mean(x²)+eps))·w per row of cols; one block of 256
// threads per row, the sum of squares reduced in f32 (the CPU sums in
// float64).
extern "C" __global__ void rms_norm(const float *x, const float *w, float *y, int cols, float eps) {
	__shared__ float part[32];
	const float *xr = x + (long long)blockIdx.x * cols;
	float *yr = y + (long long)blockIdx.x * cols;
	float scale = block_rms_scale(xr, cols, eps, part);
	for (int i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = rms_apply(xr[i], scale, w[i]);
}

// rope: llama.cpp's "normal" mode, or its NEOX mode where neox is set.
// Thread (row, head, pair j) rotates the pair's two features of the head
// (rope_feats) at the row's position (rope_pair), with the frequency factors
// freqs (Dims/2 of them) where not null. The position is read from the
// device, so a captured CUDA graph replays for every position: pos+row from
// posp (the step's position, written once per step), or, in a batched step
// of several sequences (rowp not null), rowp[2·row] (the row's position in
// its sequence; rowp[2·row+1] is its first cell, unused here).
extern "C" __global__ void rope(const float *x, float *y, int rows, int width, int headDim, int dims, float scale, const int *posp, int neox,
                                const float *freqs, const int *rowp) {
	int half = headDim / 2, heads = width / headDim;
	long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (idx >= (long long)rows * heads * half) return;
	int j = idx % half, f0, f1;
	long long rh = idx / half; // row*heads + head
	int row = rh / heads;
	int pos = rowp ? rowp[2 * row] : *posp + row;
	rope_feats(j, dims, neox, f0, f1);
	long long o0 = rh * headDim + f0, o1 = rh * headDim + f1;
	float x0 = x[o0], x1 = x[o1];
	rope_pair(x0, x1, pos, j, dims, scale, freqs, y[o0], y[o1]);
}

// silu_mul: y = silu(g)·u = g/(1+e^-g)·u.
extern "C" __global__ void silu_mul(const float *g, const float *u, float *y, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		y[i] = silu_of(g[i], u[i]);
	}
}

// add: y = a + b.
extern "C" __global__ void add(const float *a, const float *b, float *y, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = a[i] + b[i];
}

// add_bias: y = x + b, b (d elements) repeated over the rows of x (n
// elements in all).
extern "C" __global__ void add_bias(const float *x, const float *b, float *y, int n, int d) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = x[i] + b[i % d];
}

// kv_append: kc[cell·dim + i] = k[i], vc[cell·dim + i] = v[i] for the
// step's n rows of dim (total = n·dim), rounded to binary16 (the cache is
// f16, as the CPU device's). Row r's cell is read from the device: pos+r
// from posp, or in a batched step (rowp not null) rowp[2r+1] + rowp[2r], its
// sequence's first cell plus its position.
extern "C" __global__ void kv_append(const float *k, const float *v, __half *kc, __half *vc, int total, int dim, const int *posp, const int *rowp) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < total) {
		int r = i / dim;
		long long cell = rowp ? rowp[2 * r + 1] + rowp[2 * r] : *posp + r;
		long long o = cell * dim + i % dim;
		kc[o] = __float2half_rn(k[i]);
		vc[o] = __float2half_rn(v[i]);
	}
}

// argmax: out[r] = the index of the largest of row r, x[r·n .. r·n+n), the
// first one on ties, as a loop that moves to i where x[i] > x[best] picks it
// (runtime.Greedy): NaNs are never picked, and a NaN at 0 is (no comparison
// with it holds). One block of ARGMAX_THREADS a row: each thread scans i,
// i+ARGMAX_THREADS, … keeping its first largest, then the threads' picks are
// merged, the larger value winning and the lower index on ties.
#define ARGMAX_THREADS 1024
extern "C" __global__ void __launch_bounds__(ARGMAX_THREADS) argmax(const float *x, int n, int *out) {
	x += (long long)blockIdx.x * n;
	out += blockIdx.x;
	__shared__ float sv[ARGMAX_THREADS / 32];
	__shared__ int si[ARGMAX_THREADS / 32];
	float bv = 0;
	int bi = -1; // none yet
	for (int i = threadIdx.x; i < n; i += ARGMAX_THREADS) {
		float v = x[i];
		if (v == v && (bi < 0 || v > bv)) bv = v, bi = i;
	}
	// better(a, b): b beats a when it is a pick and a is not, or larger, or
	// as large at a lower index.
	auto merge = [](float &v, int &i, float ov, int oi) {
		if (oi >= 0 && (i < 0 || ov > v || (ov == v && oi < i))) v = ov, i = oi;
	};
	for (int o = 16; o > 0; o >>= 1) {
		float ov = __shfl_xor_sync(0xffffffff, bv, o);
		int oi = __shfl_xor_sync(0xffffffff, bi, o);
		merge(bv, bi, ov, oi);
	}
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	if (lane == 0) sv[warp] = bv, si[warp] = bi;
	__syncthreads();
	if (warp == 0) {
		bv = sv[lane], bi = si[lane];
		for (int o = 16; o > 0; o >>= 1) {
			float ov = __shfl_xor_sync(0xffffffff, bv, o);
			int oi = __shfl_xor_sync(0xffffffff, bi, o);
			merge(bv, bi, ov, oi);
		}
		if (lane == 0) *out = (n > 0 && x[0] != x[0]) || bi < 0 ? 0 : bi;
	}
}
