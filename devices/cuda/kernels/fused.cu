// fused.cu: decode-step kernels (one token) that each do the work of a run of
// ops, so that a Llama block is five launches instead of sixteen. The device
// fuses only where the ops are queued together and every value an op would
// write is still written (a fused launch is invisible to the plan), and each
// kernel computes exactly what the single-op kernels compute (common.cuh).
#include "common.cuh"
#include "q8.cuh"

#define MV_THREADS 256 // 8 warps, each taking rows a grid's warps apart; block_rms_scale needs 256
#define MV_PLAIN 0     // up to three weights' rows, one after another
#define MV_SILU 1      // gate W0 and up W1 row by row; S = silu(Y0)·Y1
#define MV_ADD 2       // one weight; S = res + Y0
#define MV_ROPE 3      // q W0, k W1, v W2 rows two by two; then the step's RoPE of q and k and the cache append (rope_kv)
#define MV_RSC 128     // pairs of a head whose sine and cosine MV_ROPE tabulates (heads up to 256)

// rope_rows is MV_ROPE's unit g of mv: two rows of q (W0), k (W1) or v (W2)
// by one warp, one after the other, the two that RoPE turns together for q and k (rope_feats),
// the next two for v; then lane 0 writes the products Y, the turned pair
// to qo or ko and the keys' and values' f16 cache rows kc, vc at the
// step's position, each computed as rope_kv computes it from the products.
// rope packs the head size, the rope's dims (<< 12) and its mode (<< 24).
// rsc is the block's table of each pair's sine and cosine at the step's
// position (rope_sc, mv), so that a warp's lane 0 does not step θ alone.
template <int T>
__device__ __forceinline__ void rope_rows(int g, int lane, const XQ &xq, const float *xs, int nb, int cols, const uint8_t *W0, const uint8_t *W1,
                                          const uint8_t *W2, long long rb, float *Y0, float *Y1, float *Y2, int r0, int r1, float *qo,
                                          float *ko, __half *kc, __half *vc, int rope, float rscale, const int *posp, const float *freqs,
                                          const float2 *rsc) {
	int headDim = rope & 0xfff, dims = (rope >> 12) & 0xfff, half = headDim / 2;
	bool neox = rope >> 24;
	int hq = r0 / 2, hk = r1 / 2, kind = g < hq ? 0 : g < hq + hk ? 1 : 2;
	int p = kind == 0 ? g : kind == 1 ? g - hq : g - hq - hk, j = p % half, a = 2 * p, b = 2 * p + 1;
	const uint8_t *W = kind == 0 ? W0 : kind == 1 ? W1 : W2;
	float *Y = kind == 0 ? Y0 : kind == 1 ? Y1 : Y2;
	if (kind < 2) {
		int f0, f1;
		rope_feats(j, dims, neox, f0, f1);
		a = (p / half) * headDim + f0, b = (p / half) * headDim + f1;
	}
	// One row after the other, as the plain mat-vec takes them: both rows'
	// loads at once (row_dotq<T, 2>) made Llama-7B's decode 4% slower.
	float y[2];
#pragma unroll 1
	for (int r = 0; r < 2; r++) {
		const uint8_t *row = W + (r ? b : a) * rb;
		if (D8<T>::block)
			row_dotq<T, 1>(&row, xq, nb, lane, y + r);
		else
			y[r] = row_dot<T>(row, xs, cols, lane);
	}
	if (lane != 0) return;
	Y[a] = y[0], Y[b] = y[1];
	int pos = *posp;
	long long base = (long long)pos * r1;
	if (kind == 2) {
		vc[base + a] = __float2half_rn(y[0]), vc[base + b] = __float2half_rn(y[1]);
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
// kernel start early (programmatic dependent launch) were each slower.
template <int T>
__device__ __forceinline__ void mv(const float *x, const float *nw, float *nout, float eps, int cols, const uint8_t *W0, const uint8_t *W1,
                                   const uint8_t *W2, long long rb, float *Y0, float *Y1, float *Y2, int r0, int r1, int r2, int mode,
                                   const float *res, float *S, float *qo, float *ko, __half *kc, __half *vc, int rope, float rscale,
                                   const int *posp, const float *freqs) {
	extern __shared__ float4 smem[];
	__shared__ float part[32];
	__shared__ float2 rsc[MV_RSC];
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int total = mode == MV_SILU ? r0 : mode == MV_ROPE ? (r0 + r1 + r2) / 2 : r0 + r1 + r2, nwarps = gridDim.x * (MV_THREADS / 32);
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
	XQ xq = xq_at((uint8_t *)smem, cols);
	float *xs = (float *)smem;
	const int RP = 4; // pieces of eight a thread holds in registers: rows up to 8192
	bool aligned = (((uintptr_t)x | (uintptr_t)nw | (uintptr_t)nout) & 15) == 0;
	if (D8<T>::block && nw && (cols & 7) == 0 && cols <= 8 * MV_THREADS * RP && aligned) {
		// The normalised block types' path: x read once, in 16-byte
		// pieces held in registers, then normalised and quantized there
		// (the same values, in the same order, as block_rms_scale and
		// the general path below).
		float v[RP][8], s = 0;
#pragma unroll
		for (int j = 0; j < RP; j++) {
			int c = threadIdx.x + MV_THREADS * j;
			if (8 * c >= cols) break;
			float4 a = *(const float4 *)(x + 8 * c), b = *(const float4 *)(x + 8 * c + 4);
			v[j][0] = a.x, v[j][1] = a.y, v[j][2] = a.z, v[j][3] = a.w, v[j][4] = b.x, v[j][5] = b.y, v[j][6] = b.z, v[j][7] = b.w;
#pragma unroll
			for (int k = 0; k < 8; k++) s = fmaf(v[j][k], v[j][k], s);
		}
		float scale = 1.0f / sqrtf(block_sum(s, part) / cols + eps);
#pragma unroll
		for (int j = 0; j < RP; j++) {
			int c = threadIdx.x + MV_THREADS * j;
			if (8 * c >= cols) break;
			float4 a = *(const float4 *)(nw + 8 * c), b = *(const float4 *)(nw + 8 * c + 4);
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
	for (int g = blockIdx.x * (MV_THREADS / 32) + warp; g < total; g += nwarps) {
		if (mode == MV_ROPE) {
			rope_rows<T>(g, lane, xq, xs, nb, cols, W0, W1, W2, rb, Y0, Y1, Y2, r0, r1, qo, ko, kc, vc, rope, rscale, posp, freqs, rsc);
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
		float y[2];
		if (D8<T>::block) {
			const uint8_t *rs[2] = {W, U};
			if (mode == MV_SILU)
				row_dotq<T, 2>(rs, xq, nb, lane, y);
			else
				row_dotq<T, 1>(rs, xq, nb, lane, y);
		} else if (mode == MV_SILU) {
			row_dot2<T>(W, U, xs, cols / 8, lane, y[0], y[1]);
		} else {
			y[0] = row_dot<T>(W, xs, cols, lane);
		}
		if (lane != 0) continue;
		if (mode == MV_SILU) {
			Y0[row] = y[0], Y1[row] = y[1], S[row] = silu_of(y[0], y[1]);
			continue;
		}
		Y[row] = y[0];
		if (mode == MV_ADD) S[row] = res[row] + y[0];
	}
}

#define MV(id, name)                                                                                                                     \
	extern "C" __global__ void __launch_bounds__(MV_THREADS)                                                                             \
	    mv_##name(const float *x, const float *nw, float *nout, float eps, int cols, const uint8_t *W0, const uint8_t *W1, const uint8_t *W2, \
	              long long rb, float *Y0, float *Y1, float *Y2, int r0, int r1, int r2, int mode, const float *res, float *S, float *qo,     \
	              float *ko, __half *kc, __half *vc, int rope, float rscale, const int *posp, const float *freqs) {                         \
		mv<id>(x, nw, nout, eps, cols, W0, W1, W2, rb, Y0, Y1, Y2, r0, r1, r2, mode, res, S, qo, ko, kc, vc, rope, rscale, posp, freqs);   \
	}
FOR_TYPES(MV)

// rope_kv: the decode step's RoPE of the queries q (qw features) and keys k
// (kw) into qo and ko, and the append of the rotated keys and the values v
// to the layer's caches at the step's position, in one launch. Thread i
// takes pair i of q (pair i%half of head i/half, rope_feats), then of k,
// then two values.
extern "C" __global__ void rope_kv(const float *q, const float *k, const float *v, float *qo, float *ko, __half *kc, __half *vc, int qw, int kw,
                                   int headDim, int dims, float scale, const int *posp, int neox, const float *freqs) {
	int pos = *posp, half = headDim / 2;
	int i = blockIdx.x * blockDim.x + threadIdx.x, qp = qw / 2, kp = kw / 2;
	long long base = (long long)pos * kw;
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
// mat-vec of weight type T stages its row (quant32 or quant256). One block
// of 256 threads per row.
template <int T>
__device__ __forceinline__ void xq_rows(const float *x, uint8_t *xq, int cols, long long stride) {
	const float *xr = x + (long long)blockIdx.x * cols;
	XQ q = xq_at(xq + blockIdx.x * stride, cols);
	auto val = [&](int i) { return xr[i]; };
	if (D8<T>::block == 32)
		quant32(val, cols, q, D8<T>::q81);
	else if (D8<T>::block == 256)
		quant256(val, cols, q);
}

#define XQROWS(id, name) \
	extern "C" __global__ void xq_##name(const float *x, uint8_t *xq, int cols, long long stride) { xq_rows<id>(x, xq, cols, stride); }
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
		const uint8_t *blk = W + (long long)b * D::bytes;
#pragma unroll
		for (int t = 0; t < NR; t++) {
			if (t >= nv) break; // the same for every lane
			XQ x = xq_at((uint8_t *)xb + t * xs, cols);
			int dot = 0, off = 0;
			if (ok) D::part(blk, k, x, b, dot, off);
#pragma unroll
			for (int o = 1; o < D::TPB; o <<= 1) {
				dot += __shfl_xor_sync(FULL, dot, o);
				if (D::hasOff) off += __shfl_xor_sync(FULL, off, o);
			}
			if (ok && k == 0) acc[t] = __fadd_rn(acc[t], D::fin(blk, x, b, dot, off));
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
