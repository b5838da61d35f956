// mmq.cu: a prefill mat-mul y[t, r] = Σ_k W[r, k]·x[t, k] on 8-bit tensor
// cores (mma.sync m16n8k32 / m16n8k16, s8 inputs, s32 sums), as llama.cpp's
// MMQ computes it: the activations are quantized in blocks of 32 (mmq_quant:
// d = max|x|/127, q = x/d rounded, and s = d·Σq, ggml's Q8_1), each weight
// block is decoded to its 8-bit integers and its scale (and minimum), every
// block's dot product is an exact integer sum on the tensor cores, and only
// the block's scaling is floating point:
//
//	DM  (Q4_0, Q5_0, Q8_0, IQ4_NL):  y += Σq_w·q_x · d_w·d_x
//	MIN (Q4_1, Q5_1, Q4_K, Q5_K):    y += Σq_w·q_x · d_w·d_x + m_w·s_x
//
// Against the f16 kernels (matmul.cu, mmt) it reads half the shared-memory
// bytes per product, runs the tensor cores at their 8-bit rate, and spends
// no f16 conversion per weight; but every 32 columns it scales each product
// in floating point. The error is that of the 8-bit activations (at most
// d_x/2 per element), as on the CPU device and in llama.cpp. It runs only
// with HYBRID_CUDA_MMQ=1 (useMMQ in run_cuda.go): on an H100 it measured
// 0.7-1.1× mmt (TestPrefillMatMul), both bound by latency, not by the
// tensor cores (ncu on Q4_K 4096×4096 at 512 tokens, with four warps a
// 128-token tile: 9% of the 8-bit pipe busy, 12% of the warp slots used,
// half the issue slots idle).
//
// The pipeline is mmt's: a block computes a tile of MT = 64 weight rows × NK
// tokens (128, 64 or 32), each warp a corner of 32 rows × WT tokens,
// stepping k by KT = 64 (two blocks of 32 between barriers); the weight
// bytes of a chunk of CH = 256 columns arrive by cp.async a chunk ahead, the
// activations' 8-bit tile and scales AHEAD steps ahead, and step s+1's
// weights are decoded into the other int8 stage while step s multiplies.
// Split-K as mmt (blockIdx.y counts tt token tiles for each slice of ks
// columns; slice z writes Y + z·n·rows, summed by mmt_sum).
#include "common.cuh"
#include "q8.cuh"
#include "tc.cuh"

#define MT 64     // rows per tile
#define KT 64     // k per step: two blocks of 32
#define CH 256    // k per chunk of weight bytes
#define QP 80     // padded row of a shared int8 tile, in bytes: ldmatrix's eight rows of 80 bytes hit 32 distinct banks
#define AHEAD 2   // steps the activations are copied ahead
#define MQ_DM 0   // y += c·d_w·d_x
#define MQ_MIN 1  // y += c·d_w·d_x + m_w·s_x

// MQ<T> decodes weight type T for mmq: half(raw, j, h, q) writes the 16
// 8-bit integers of elements 16h..16h+15 of 32-element block j (0..7) of a
// chunk of 256 columns whose bytes start at raw, four to a word in element
// order; scale(raw, j) is block j's (d_w, m_w). mode is the
// block's scaling (MQ_*); ok is false for the types mmq does not take.
template <int T> struct MQ {
	static const bool ok = false;
	static const int mode = MQ_DM;
	static __device__ __forceinline__ void half(const uint8_t *, int, int, uint32_t *q) { q[0] = q[1] = q[2] = q[3] = 0; }
	static __device__ __forceinline__ float2 scale(const uint8_t *, int) { return make_float2(0, 0); }
};

// Q4_0, Q8_0 and Q6_K are not taken: the device's rows of them are
// regrouped (quant.cuh's grp_d, grp_q, q6_grp), and mmq is off by default
// (useMMQ in run_cuda.go).

// Q4_1: nibbles as Q4_0, no offset; the minimum m.
template <> struct MQ<T_Q4_1> {
	static const bool ok = true;
	static const int mode = MQ_MIN;
	static __device__ __forceinline__ void half(const uint8_t *raw, int j, int h, uint32_t *q) {
		const uint8_t *b = raw + 20 * j;
#pragma unroll
		for (int i = 0; i < 4; i++) q[i] = u32(b + 4 + 4 * i) >> (4 * h) & NIB;
	}
	static __device__ __forceinline__ float2 scale(const uint8_t *raw, int j) { return make_float2(f16(raw + 20 * j), f16(raw + 20 * j + 2)); }
};

// Q5_0: nibbles as Q4_0 with bit e of qh as element e's fifth bit, minus 16.
template <> struct MQ<T_Q5_0> {
	static const bool ok = true;
	static const int mode = MQ_DM;
	static __device__ __forceinline__ void half(const uint8_t *raw, int j, int h, uint32_t *q) {
		const uint8_t *b = raw + 22 * j;
		uint32_t qh = w16x2(b + 2) >> (16 * h);
#pragma unroll
		for (int i = 0; i < 4; i++) q[i] = __vsub4((w16x2(b + 6 + 4 * i) >> (4 * h) & NIB) | bit4(qh >> (4 * i)), 0x10101010u);
	}
	static __device__ __forceinline__ float2 scale(const uint8_t *raw, int j) { return make_float2(f16(raw + 22 * j), 0); }
};

// Q5_1: as Q5_0 without the offset; the minimum m.
template <> struct MQ<T_Q5_1> {
	static const bool ok = true;
	static const int mode = MQ_MIN;
	static __device__ __forceinline__ void half(const uint8_t *raw, int j, int h, uint32_t *q) {
		const uint8_t *b = raw + 24 * j;
		uint32_t qh = u32(b + 4) >> (16 * h);
#pragma unroll
		for (int i = 0; i < 4; i++) q[i] = (u32(b + 8 + 4 * i) >> (4 * h) & NIB) | bit4(qh >> (4 * i));
	}
	static __device__ __forceinline__ float2 scale(const uint8_t *raw, int j) { return make_float2(f16(raw + 24 * j), f16(raw + 24 * j + 2)); }
};

// IQ4_NL: nibbles as Q4_0, each mapped to its level.
template <> struct MQ<T_IQ4_NL> {
	static const bool ok = true;
	static const int mode = MQ_DM;
	static __device__ __forceinline__ void half(const uint8_t *raw, int j, int h, uint32_t *q) {
		const uint8_t *b = raw + 18 * j;
#pragma unroll
		for (int i = 0; i < 4; i++) q[i] = iq4Levels(w16x2(b + 2 + 4 * i) >> (4 * h) & NIB);
	}
	static __device__ __forceinline__ float2 scale(const uint8_t *raw, int j) { return make_float2(f16(raw + 18 * j), 0); }
};

// Q4_K and Q5_K: sub-block j is nibble j%2 of bytes 32(j/2).. of the quants
// (Q5_K: bit j of qh[l] is element l's fifth); d·sc and -dmin·m.
template <int T> struct MQK {
	static const bool ok = true;
	static const int mode = MQ_MIN;
	static __device__ __forceinline__ void half(const uint8_t *b, int j, int h, uint32_t *q) {
		const bool five = T == T_Q5_K;
		const uint8_t *qs = b + (five ? 48 : 16) + 32 * (j >> 1) + 16 * h;
#pragma unroll
		for (int i = 0; i < 4; i++) {
			q[i] = u32(qs + 4 * i) >> (4 * (j & 1)) & NIB;
			if (five) q[i] |= (u32(b + 16 + 16 * h + 4 * i) >> j & 0x01010101u) << 4;
		}
	}
	static __device__ __forceinline__ float2 scale(const uint8_t *b, int j) {
		int sc, m;
		scaleMinK4(j, b + 4, sc, m);
		return make_float2(__fmul_rn(f16(b), (float)sc), -__fmul_rn(f16(b + 2), (float)m));
	}
};
template <> struct MQ<T_Q4_K> : MQK<T_Q4_K> {};
template <> struct MQ<T_Q5_K> : MQK<T_Q5_K> {};

// mmq_quant quantizes x (n rows of cols f32) for mmq: xq[t·cols + e] the
// 8-bit integers and xd[(e/32)·npad + t] block e/32's (d, d·Σq), zeros for
// the tokens n..npad-1, so that a tile never reads past them. Eight threads
// a block of 32, four elements each.
extern "C" __global__ void mmq_quant(const float *x, int8_t *xq, float2 *xd, int n, int npad, int cols) {
	long long g = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 3;
	int l = threadIdx.x & 7, nb = cols / 32;
	bool in = g < (long long)npad * nb; // every lane takes part in the shuffles
	int t = in ? (int)(g / nb) : 0, b = in ? (int)(g % nb) : 0;
	float4 v = make_float4(0, 0, 0, 0);
	if (in && t < n) v = *(const float4 *)(x + (long long)t * cols + 32 * b + 4 * l);
	float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
	for (int o = 1; o < 8; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(FULL, amax, o));
	float d = amax / 127.0f, id = amax != 0 ? 127.0f / amax : 0.0f;
	int q0 = __float2int_rn(v.x * id), q1 = __float2int_rn(v.y * id), q2 = __float2int_rn(v.z * id), q3 = __float2int_rn(v.w * id);
	int sum = q0 + q1 + q2 + q3;
#pragma unroll
	for (int o = 1; o < 8; o <<= 1) sum += __shfl_xor_sync(FULL, sum, o);
	if (!in) return;
	*(uint32_t *)(xq + (long long)t * cols + 32 * b + 4 * l) = (q0 & 0xff) | (q1 & 0xff) << 8 | (q2 & 0xff) << 16 | (uint32_t)(q3 & 0xff) << 24;
	if (l == 0) xd[(long long)b * npad + t] = make_float2(d, d * (float)sum);
}

// mmq's dynamic shared memory (mmqShared in run_cuda.go): two stages of
// decoded weights (MT rows of QP bytes) and their scales (MT×2 float2),
// AHEAD+1 stages of activations (NK rows of QP bytes) and their scales (2×NK
// float2), and two chunks of weight bytes (MT rows of rs bytes each). cols
// must be a multiple of KT.
template <int NK, int WT, int T>
__device__ __forceinline__ void mmq(const uint8_t *W, long long rb, int cb, int rs, const int8_t *Xq, const float2 *XD, int npad, float *Y,
                                    int rows, int r0, int cols, int n, int ks, int tt) {
	typedef MQ<T> M;
	constexpr int WN = NK / WT, THREADS = 2 * WN * 32, NF = WT / 8, WARPS = THREADS / 32;
	constexpr int NB = AHEAD + 1;
	constexpr int PX = NK * (KT / 16) / THREADS; // a thread's 16-byte activation pieces a step
	constexpr int PW = MT * (KT / 16) / THREADS; // a thread's sixteens of weights a step
	extern __shared__ __align__(16) uint8_t smem[];
	int8_t *A = (int8_t *)smem;                // [2][MT·QP]
	float2 *AS = (float2 *)(A + 2 * MT * QP);  // [2][MT][2]
	int8_t *B = (int8_t *)(AS + 2 * MT * 2);   // [NB][NK·QP]
	float2 *BS = (float2 *)(B + NB * NK * QP); // [NB][2][NK]
	uint8_t *R = (uint8_t *)(BS + NB * 2 * NK); // [2][MT·rs]
	int z = blockIdx.y / tt, kbeg = z * ks, kend = min(cols, kbeg + ks);
	Y += (long long)z * n * rows;
	int t0 = (blockIdx.y % tt) * NK;
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int wr = (warp / WN) * 32, wt = (warp % WN) * WT;
	float acc[2][NF][4];
#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < NF; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0;
	const int8_t *xs[PX];
	uint32_t xd[PX];
#pragma unroll
	for (int i = 0; i < PX; i++) {
		int q = threadIdx.x + i * THREADS, t = q / (KT / 16), e = 16 * (q % (KT / 16));
		xs[i] = Xq + (long long)(t0 + t) * cols + kbeg + e;
		xd[i] = t * QP + e;
	}
	uint32_t a0 = smem_addr(A), b0 = smem_addr(B);
	uint32_t aoff[2], boff[NF / 2];
#pragma unroll
	for (int i = 0; i < 2; i++) aoff[i] = (wr + 16 * i + (lane & 15)) * QP + 16 * (lane >> 4);
#pragma unroll
	for (int j = 0; j < NF; j += 2) boff[j / 2] = (wt + 8 * j + (lane & 7) + 8 * (lane >> 4)) * QP + 16 * ((lane >> 3) & 1);
	auto issueB = [&](int stage, int k) { // k: columns past kbeg
#pragma unroll
		for (int i = 0; i < PX; i++) cp_async16(B + stage * NK * QP + xd[i], xs[i] + k, 16);
		// The tokens' scales of the step's two blocks: NK float2 each, two a piece.
#pragma unroll
		for (int kk = 0; kk < 2; kk++) {
			const float2 *src = XD + (long long)((kbeg + k) / 32 + kk) * npad + t0;
			for (int p = threadIdx.x; p < NK / 2; p += THREADS) cp_async16(BS + (stage * 2 + kk) * NK + 2 * p, src + 2 * p, 16);
		}
	};
	auto issueR = [&](int buf, int c0) {
		long long off = (long long)(c0 / CH) * cb;
		int bytes = (int)((long long)min(CH, kend - c0) * cb / CH);
		bool whole = ((off | bytes) & 15) == 0;
		int words = whole ? bytes / 16 : (int)((off + bytes + 3) / 4 - off / 4);
		for (int r = warp; r < MT; r += WARPS) {
			if (r0 + r >= rows) continue;
			const uint8_t *src = W + (long long)(r0 + r) * rb + (off & ~3LL);
			uint8_t *dst = R + buf * MT * rs + r * rs;
			if (whole)
				for (int w = lane; w < words; w += 32) cp_async16(dst + 16 * w, src + 16 * w, 16);
			else
				for (int w = lane; w < words; w += 32) cp_async4(dst + 4 * w, src + 4 * w);
		}
	};
	// Step k (columns past kbeg) decoded into stage buf from the chunk's
	// bytes at raw (its buffer, past the row start's rounding): task p
	// takes half p%2 of block (p/2)%2 of the step in row p/4.
	auto decodeA = [&](int buf, int k, const uint8_t *raw) {
#pragma unroll
		for (int i = 0; i < PW; i++) {
			int p = threadIdx.x + i * THREADS, r = p >> 2, kk = (p >> 1) & 1, h = p & 1, j = (k % CH) / 32 + kk;
			uint32_t q[4] = {0, 0, 0, 0};
			float2 s = make_float2(0, 0);
			if (r0 + r < rows) {
				M::half(raw + r * rs, j, h, q);
				if (h == 0) s = M::scale(raw + r * rs, j);
			}
			*(uint4 *)(A + buf * MT * QP + r * QP + 32 * kk + 16 * h) = make_uint4(q[0], q[1], q[2], q[3]);
			if (h == 0) AS[(buf * MT + r) * 2 + kk] = s;
		}
	};
	auto raw = [&](int c) { return R + (c & 1) * MT * rs + (int)(((long long)(kbeg / CH + c) * cb) & 3); };
	int steps = (kend - kbeg) / KT;
	issueR(0, kbeg);
#pragma unroll
	for (int j = 0; j < AHEAD; j++) {
		if (j < steps) issueB(j, j * KT);
		cp_async_commit();
	}
	cp_async_wait<AHEAD - 1>();
	__syncthreads();
	decodeA(0, 0, raw(0));
	__syncthreads();
	int g = lane >> 2, tig = lane & 3;
	int sb = 0, sn = AHEAD;
	for (int s = 0; s < steps; s++) {
		int k = s * KT;
		if (s + AHEAD < steps) issueB(sn, k + AHEAD * KT);
		if (k % CH == 0 && kbeg + k + CH < kend) issueR((k / CH + 1) & 1, kbeg + k + CH);
		cp_async_commit();
		int ab = s & 1;
#pragma unroll
		for (int kk = 0; kk < 2; kk++) {
			uint32_t abase = a0 + ab * MT * QP + 32 * kk, bbase = b0 + sb * NK * QP + 32 * kk;
			uint32_t af[2][4], bf[NF][2];
#pragma unroll
			for (int i = 0; i < 2; i++) ldmatrix_x4(af[i], abase + aoff[i]);
#pragma unroll
			for (int j = 0; j < NF; j += 2) {
				uint32_t q[4];
				ldmatrix_x4(q, bbase + boff[j / 2]);
				bf[j][0] = q[0], bf[j][1] = q[1], bf[j + 1][0] = q[2], bf[j + 1][1] = q[3];
			}
			// The rows' scales: rows g and g+8 of each 16.
			float2 ws[2][2];
#pragma unroll
			for (int i = 0; i < 2; i++) {
				ws[i][0] = AS[(ab * MT + wr + 16 * i + g) * 2 + kk];
				ws[i][1] = AS[(ab * MT + wr + 16 * i + g + 8) * 2 + kk];
			}
#pragma unroll
			for (int j = 0; j < NF; j++) {
				// Tokens 2·tig and 2·tig+1 of the 8: (d, s) each.
				float4 xsc = *(const float4 *)(BS + (sb * 2 + kk) * NK + wt + 8 * j + 2 * tig);
				float dx[2] = {xsc.x, xsc.z}, sx[2] = {xsc.y, xsc.w};
#pragma unroll
				for (int i = 0; i < 2; i++) {
					int c[4];
					mma_s8k32(c, af[i], bf[j][0], bf[j][1]);
#pragma unroll
					for (int e = 0; e < 4; e++) {
						float2 w = ws[i][e >> 1];
						float v = fmaf(__int2float_rn(c[e]) * dx[e & 1], w.x, acc[i][j][e]);
						if (M::mode == MQ_MIN) v = fmaf(w.y, sx[e & 1], v);
						acc[i][j][e] = v;
					}
				}
			}
		}
		if (s + 1 < steps) decodeA((s + 1) & 1, k + KT, raw((k + KT) / CH));
		sb = sb + 1 == NB ? 0 : sb + 1, sn = sn + 1 == NB ? 0 : sn + 1;
		cp_async_wait<AHEAD - 1>();
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < NF; j++) {
			int r = r0 + wr + 16 * i + g, t = t0 + wt + 8 * j + 2 * tig;
			if (r < rows) {
				if (t < n) Y[(long long)t * rows + r] = acc[i][j][0];
				if (t + 1 < n) Y[(long long)(t + 1) * rows + r] = acc[i][j][1];
			}
			if (r + 8 < rows) {
				if (t < n) Y[(long long)t * rows + r + 8] = acc[i][j][2];
				if (t + 1 < n) Y[(long long)(t + 1) * rows + r + 8] = acc[i][j][3];
			}
		}
}

#define MMQ_PARAMS                                                                                                                   \
	const uint8_t *W0, const uint8_t *W1, const uint8_t *W2, long long rb, int cb, int rs, const int8_t *Xq, const float2 *XD, int npad, \
	    float *Y0, float *Y1, float *Y2, int rows0, int rows1, int rows2, int cols, int n, int ks, int tt
#define MMQ_PICK                                                                        \
	const uint8_t *W;                                                                   \
	float *Y;                                                                           \
	int rows, r0;                                                                       \
	pick3(W0, W1, W2, Y0, Y1, Y2, rows0, rows1, rows2, W, Y, rows, r0);
#define MMQ(id, name)                                                                                         \
	extern "C" __global__ void __launch_bounds__(256, 2) mmq_##name(MMQ_PARAMS) {                             \
		MMQ_PICK mmq<128, 32, id>(W, rb, cb, rs, Xq, XD, npad, Y, rows, r0, cols, n, ks, tt);                 \
	}                                                                                                         \
	extern "C" __global__ void __launch_bounds__(128) mmq64_##name(MMQ_PARAMS) {                              \
		MMQ_PICK mmq<64, 32, id>(W, rb, cb, rs, Xq, XD, npad, Y, rows, r0, cols, n, ks, tt);                  \
	}                                                                                                         \
	extern "C" __global__ void __launch_bounds__(64) mmq32_##name(MMQ_PARAMS) {                               \
		MMQ_PICK mmq<32, 32, id>(W, rb, cb, rs, Xq, XD, npad, Y, rows, r0, cols, n, ks, tt);                  \
	}
#define MQ_TYPES(X) X(T_Q4_1, q4_1) X(T_Q5_0, q5_0) X(T_Q5_1, q5_1) X(T_Q4_K, q4_k) X(T_Q5_K, q5_k) X(T_IQ4_NL, iq4_nl)
MQ_TYPES(MMQ)
