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
// argmax_row returns row x's pick (n elements) to thread 0 of the block.
__device__ __forceinline__ int argmax_row(const float *x, int n) {
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
	}
	return (n > 0 && x[0] != x[0]) || bi < 0 ? 0 : bi;
}

extern "C" __global__ void __launch_bounds__(ARGMAX_THREADS) argmax(const float *x, int n, int *out) {
	int id = argmax_row(x + (long long)blockIdx.x * n, n);
	if (threadIdx.x == 0) out[blockIdx.x] = id;
}

// argmax_next: argmax's pick of row x into *out, also kept as the token of
// a sequence's next decode step (tokens[1], which embed reads) at the
// position after this step's (tokens[0], which the step's RoPE and
// attention read): a chained step (devices.Chainer) then runs without the
// host uploading either.
extern "C" __global__ void __launch_bounds__(ARGMAX_THREADS) argmax_next(const float *x, int n, int *out, int *tokens) {
	int id = argmax_row(x, n);
	if (threadIdx.x == 0) *out = id, tokens[1] = id, tokens[0] += 1;
}

// topk: the m largest elements of each row of x (n elements a row), largest
// first and equal ones by lower index: the order in which runtime's sampler
// takes a row's top k (Sampler.SampleTop), so that a sampled step reads back
// m (index, value) pairs a row, oi and ov (m a row), instead of the row. A
// row holding a NaN, where no such order holds, gets oi[0] = -1 and nothing
// else: its reader reads the row whole. One block of TOPK_THREADS a row.
//
// Each element is a key: its value's bits mapped to an unsigned order
// (topk_ord; -0 as +0). A radix select over the keys' four bytes, one
// histogram pass a byte (per-warp histograms, lanes of a bin added by their
// leader), finds tau, the m-th largest key, and how many of the keys equal
// to tau the m take (need): all keys above tau are taken, and of those at
// tau the need with the lowest indices, found by a pass in index order when
// there are more of them. The m are then put in order by rank. Once a pass
// leaves at most TOPK_CAP keys at or above its bin (for a row of logits
// usually the first: a byte of sign and exponent), those are gathered and
// ranked directly instead, each key made distinct by its index: one pass
// over the row in place of up to four.
#define TOPK_THREADS 1024
#define TOPK_MAX 256 // the most a row (devices.MaxPicks)
#define TOPK_WARPS (TOPK_THREADS / 32)
#define TOPK_U 8 // values a thread loads at once in a pass over the row
#define TOPK_CAP 1024 // the most keys ranked directly, once a pass has narrowed them to so few (in hist's memory: 8 KiB of its 32)

__device__ __forceinline__ unsigned topk_ord(float v) {
	unsigned u = __float_as_uint(v == 0.0f ? 0.0f : v);
	return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// topk_gather appends to out, at slots counted by *cnt, the key of each
// element of row x whose order o takes(o) holds (the order above, then the
// index's complement, so that equal values sort by lower index), a thread
// loading TOPK_U values at once.
template <class F> __device__ __forceinline__ void topk_gather(const float *x, int n, F takes, unsigned long long *out, int *cnt) {
	for (int base = threadIdx.x; base < n; base += TOPK_U * TOPK_THREADS) {
		float v[TOPK_U];
#pragma unroll
		for (int u = 0; u < TOPK_U; u++) {
			int i = base + u * TOPK_THREADS;
			v[u] = i < n ? x[i] : 0;
		}
#pragma unroll
		for (int u = 0; u < TOPK_U; u++) {
			int i = base + u * TOPK_THREADS;
			unsigned o = topk_ord(v[u]);
			if (i < n && takes(o)) out[atomicAdd(cnt, 1)] = (unsigned long long)o << 32 | (0xffffffffu - (unsigned)i);
		}
	}
}

// topk_row is topk's work for one row x, by every thread of the block: oi
// and ov (m each) are written by threads 0..m-1, or oi[0] = -1 by thread 0.
__device__ __forceinline__ void topk_row(const float *x, int n, int m, int *oi, float *ov) {
	__shared__ __align__(8) unsigned hist[TOPK_WARPS][256];
	__shared__ unsigned long long keys[TOPK_MAX];
	__shared__ unsigned s_prefix, s_need, s_ties;
	__shared__ int s_nan, s_cnt, s_taken;
	__shared__ int wsum[TOPK_WARPS];
	int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
	if (tid == 0) s_nan = 0, s_cnt = 0, s_taken = 0;
	unsigned prefix = 0, mask = 0, need = m, ties = 0;
	for (int shift = 24; shift >= 0; shift -= 8) {
		for (int i = lane; i < 256; i += 32) hist[warp][i] = 0;
		__syncthreads();
		bool nan = false;
		// Every lane of the warp takes part in each round (the match).
		// A round's TOPK_U values are loaded first, all at once: one at a
		// time, each pass waited for a trip to L2 a value.
		for (int base = warp * 32; base < n; base += TOPK_U * TOPK_THREADS) {
			float v[TOPK_U];
#pragma unroll
			for (int u = 0; u < TOPK_U; u++) {
				int i = base + u * TOPK_THREADS + lane;
				v[u] = i < n ? x[i] : 0;
			}
#pragma unroll
			for (int u = 0; u < TOPK_U; u++) {
				bool in = false;
				unsigned bin = 0;
				if (base + u * TOPK_THREADS + lane < n) {
					if (v[u] != v[u]) {
						nan = true;
					} else {
						unsigned o = topk_ord(v[u]);
						in = (o & mask) == prefix;
						bin = (o >> shift) & 255;
					}
				}
				unsigned act = __ballot_sync(0xffffffff, in);
				if (in) {
					unsigned same = __match_any_sync(act, bin);
					if (lane == __ffs(same) - 1) hist[warp][bin] += __popc(same);
				}
			}
		}
		if (nan) s_nan = 1;
		__syncthreads();
		if (s_nan) break;
		// Sum the warps' histograms into the first.
		for (int b = tid; b < 256; b += TOPK_THREADS) {
			unsigned s = 0;
			for (int w = 0; w < TOPK_WARPS; w++) s += hist[w][b];
			hist[0][b] = s;
		}
		__syncthreads();
		if (warp == 0) {
			// The highest bin b whose count with those of the bins above
			// it (acc) reaches need, else bin 0: lane l holds bins 8l..8l+7
			// and their total; the lanes above l hold above[l] of them.
			unsigned own = 0;
#pragma unroll
			for (int j = 0; j < 8; j++) own += hist[0][8 * lane + j];
			unsigned above = own; // then: what the lanes above hold
#pragma unroll
			for (int o = 1; o < 32; o <<= 1) {
				unsigned v = __shfl_down_sync(0xffffffffu, above, o);
				if (lane + o < 32) above += v;
			}
			above -= own;
			unsigned cross = __ballot_sync(0xffffffffu, above < need && above + own >= need);
			int hi = cross ? 31 - __clz(cross) : 0; // the crossing lane, the highest if several (none: 0)
			if (lane == hi) {
				unsigned acc = above;
				int b = 8 * lane + 7;
				for (; b > 0; b--) {
					if (acc + hist[0][b] >= need) break;
					acc += hist[0][b];
				}
				s_need = need - acc, s_prefix = prefix | ((unsigned)b << shift), s_ties = hist[0][b];
			}
		}
		__syncthreads();
		need = s_need, prefix = s_prefix, ties = s_ties, mask |= 255u << shift;
		if (m - need + ties <= TOPK_CAP) break; // few enough keys at or above tau's bin: ranked below
	}
	if (s_nan) {
		if (tid == 0) oi[0] = -1;
		return;
	}
	if (m - need + ties <= TOPK_CAP) {
		// The keys at or above the bin the passes so far found, gathered
		// (in hist's memory, which no pass reads now) with their indices,
		// then each ranked by the count of those above it: a key's bits
		// and its index's order make every key distinct, and the largest
		// first and equal values by lower index are the keys' order.
		unsigned long long *cand = (unsigned long long *)&hist[0][0];
		topk_gather(x, n, [&](unsigned o) { return (o & mask) >= prefix; }, cand, &s_cnt);
		__syncthreads();
		int c = s_cnt;
		for (int a = tid; a < c; a += TOPK_THREADS) {
			unsigned long long k = cand[a];
			int r = 0;
			for (int j = 0; j < c; j++) r += cand[j] > k;
			if (r < m) {
				int i = (int)(0xffffffffu - (unsigned)(k & 0xffffffffu));
				oi[r] = i, ov[r] = x[i];
			}
		}
		return;
	}
	// tau = prefix. Keys above it take the first m - need slots in any
	// order; if every key at tau is taken, they go there too.
	bool all = ties == need;
	topk_gather(x, n, [&](unsigned o) { return o > prefix || (all && o == prefix); }, keys, &s_cnt);
	if (!all) {
		// The need keys at tau with the lowest indices: chunks of the
		// row in index order, each tie's rank among the chunk's ties by
		// the warps' ballots.
		__syncthreads();
		for (int base = 0; base < n; base += TOPK_THREADS) {
			int i = base + tid;
			bool tie = i < n && topk_ord(x[i]) == prefix;
			unsigned b = __ballot_sync(0xffffffff, tie);
			if (lane == 0) wsum[warp] = __popc(b);
			__syncthreads();
			int before = s_taken;
			for (int w = 0; w < warp; w++) before += wsum[w];
			before += __popc(b & ((1u << lane) - 1));
			if (tie && before < (int)need) keys[m - need + before] = (unsigned long long)prefix << 32 | (0xffffffffu - (unsigned)i);
			__syncthreads();
			if (tid == 0) {
				int t = 0;
				for (int w = 0; w < TOPK_WARPS; w++) t += wsum[w];
				s_taken += t;
			}
			__syncthreads();
			if (s_taken >= (int)need) break;
		}
	}
	__syncthreads();
	if (tid < m) {
		unsigned long long k = keys[tid];
		int r = 0;
		for (int j = 0; j < m; j++) r += keys[j] > k;
		int i = (int)(0xffffffffu - (unsigned)(k & 0xffffffffu));
		oi[r] = i, ov[r] = x[i];
	}
}

extern "C" __global__ void __launch_bounds__(TOPK_THREADS) topk(const float *x, int n, int m, int *oi, float *ov) {
	topk_row(x + (long long)blockIdx.x * n, n, m, oi + (long long)blockIdx.x * m, ov + (long long)blockIdx.x * m);
}

// sample_exp is runtime's sampleExp (runtime/sampler.go) operation for
// operation, each rounded as Go rounds it (no contraction), so that it
// gives the same bits: e^x by x = k·ln2 + r, ln2 in two parts, a rational
// approximation of e^r and the scaling by 2^k in two exact steps; 0 below
// -708.
__device__ double sample_exp(double x) {
	const double ln2Hi = 6.93147180369123816490e-01, ln2Lo = 1.90821492927058770002e-10, log2e = 1.44269504088896338700e+00;
	const double p1 = 1.66666666666666657415e-01, p2 = -2.77777777770155933842e-03, p3 = 6.61375632143793436117e-05,
	             p4 = -1.65339022054652515390e-06, p5 = 4.13813679705723846039e-08;
	if (x != x) return x;
	if (x > 7.09782712893383973096e+02) return __longlong_as_double(0x7ff0000000000000LL);
	if (x < -708) return 0;
	if (x > -1.0 / (1 << 28) && x < 1.0 / (1 << 28)) return __dadd_rn(1, x);
	int k = __double2int_rz(x < 0 ? __dsub_rn(__dmul_rn(log2e, x), 0.5) : __dadd_rn(__dmul_rn(log2e, x), 0.5));
	double kf = k;
	double hi = __dsub_rn(x, __dmul_rn(kf, ln2Hi)), lo = __dmul_rn(kf, ln2Lo);
	double r = __dsub_rn(hi, lo), t = __dmul_rn(r, r);
	double q = __dadd_rn(__dmul_rn(t, p5), p4);
	q = __dadd_rn(__dmul_rn(t, q), p3);
	q = __dadd_rn(__dmul_rn(t, q), p2);
	q = __dadd_rn(__dmul_rn(t, q), p1);
	double c = __dsub_rn(r, __dmul_rn(t, q));
	double y = __dsub_rn(1, __dsub_rn(__dsub_rn(lo, __ddiv_rn(__dmul_rn(r, c), __dsub_rn(2, c))), hi));
	int h = k / 2;
	y = __dmul_rn(y, __longlong_as_double((long long)(h + 1023) << 52));
	return __dmul_rn(y, __longlong_as_double((long long)(k - h + 1023) << 52));
}

// sample_softmax is runtime's softmax over the first n of the block's
// candidates v (largest first) at temperature t, by the block: each term
// by its own thread, their float64 sum by thread 0 in order, the
// probabilities p by their threads again.
__device__ __forceinline__ void sample_softmax(const float *v, int n, float t, float *p, double *e, double *sum) {
	int i = threadIdx.x;
	if (i < n) {
		e[i] = sample_exp((double)__fdiv_rn(__fsub_rn(v[i], v[0]), t));
		p[i] = __double2float_rn(e[i]);
	}
	__syncthreads();
	if (i == 0) {
		double s = 0;
		for (int j = 0; j < n; j++) s = __dadd_rn(s, e[j]);
		*sum = s;
	}
	__syncthreads();
	if (i < n) p[i] = __double2float_rn(__ddiv_rn((double)p[i], *sum));
	__syncthreads();
}

// sample_next: the pick runtime's sampler makes (Sampler.SampleTop without
// a repeat penalty, devices.SampleChainer) from row x's k largest (topk's
// order) with draw r: their softmax, those whose running float32 sum first
// reaches top-p, their softmax at temperature temp, and the first whose
// running sum exceeds r (the last if none does). The pick goes to *out
// and, as argmax_next's does, to the next chained step's token and
// position; a row holding a NaN gets -1 (and token 0), which its reader
// takes as the sign to pick from the row itself.
extern "C" __global__ void __launch_bounds__(TOPK_THREADS) sample_next(const float *x, int n, int k, float topp, float temp, float r, int *out,
                                                                     int *tokens) {
	__shared__ int si[TOPK_MAX];
	__shared__ float sv[TOPK_MAX], sp[TOPK_MAX];
	__shared__ double se[TOPK_MAX], ssum;
	__shared__ int scut;
	topk_row(x, n, k, si, sv);
	__syncthreads();
	if (si[0] < 0) {
		if (threadIdx.x == 0) *out = -1, tokens[1] = 0, tokens[0] += 1;
		return;
	}
	sample_softmax(sv, k, 1.0f, sp, se, &ssum);
	if (threadIdx.x == 0) {
		int cut = k;
		if (topp < 1) {
			float cum = 0;
			for (int i = 0; i < k; i++) {
				cum = __fadd_rn(cum, sp[i]);
				if (cum >= topp) {
					cut = i + 1;
					break;
				}
			}
		}
		scut = cut;
	}
	__syncthreads();
	int cut = scut;
	sample_softmax(sv, cut, temp, sp, se, &ssum);
	if (threadIdx.x == 0) {
		int id = si[cut - 1];
		float cum = 0;
		for (int i = 0; i < cut; i++) {
			cum = __fadd_rn(cum, sp[i]);
			if (r < cum) {
				id = si[i];
				break;
			}
		}
		*out = id, tokens[1] = id, tokens[0] += 1;
	}
}
