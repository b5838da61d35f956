// attn.cuh: the decode attention of TinyLlama's shape that tail.cu and
// oattn.cu run: 32 query heads of 64 over 4 KV heads, shaped as the device's
// attention_g (kernels/attention.cu): a unit of AW warps takes two query
// heads of one KV head, a warp 32 keys at a time, lane l key l, an online
// softmax over rounds of 32, the warps merged through shared memory.
#pragma once
#include <cuda_fp16.h>

#include "measure.cuh"

constexpr int HD = 64;                     // head size
constexpr int KVH = 4, QH = 32;            // KV heads, query heads
constexpr int GQ = QH / KVH;               // query heads a KV head
constexpr int QR = QH * HD, KR = KVH * HD; // q rows, k (and v) rows
constexpr int MAXSPAN = 1024;

// unitSync is a barrier of the first n threads of the block (barrier 1).
__device__ __forceinline__ void unitSync(int n) { asm volatile("bar.sync 1, %0;" ::"r"(n) : "memory"); }

// attnUnit is the attention of query heads h0 and h0+1 (of one KV head) over
// keys 0..span-1, by the AW warps of unit u of the block (warp w of it; AU
// units a block), written to out (global or shared memory). The first n
// threads of the block call it together (every unit running): the merge
// waits at a barrier of them. The keys and values are read from L2 only
// (CG) or by plain loads, which L1 may keep.
template <int AW, int AU, bool CG = true>
__device__ __forceinline__ void attnUnit(const float *q, const __half *kc, const __half *vc, float *out, int span, int h0, int u, int w, int n) {
	__shared__ __align__(16) float qs[AU][2][HD];
	__shared__ float ps[AU][AW][2][32];
	__shared__ float sm[AU][AW][2][2 + HD];
	auto ld2 = [](const __half2 *p) { return CG ? __ldcg(p) : *p; };
	auto ld16 = [](const uint4 *p) { return CG ? __ldcg(p) : *p; };
	int lane = threadIdx.x & 31, t = 32 * w + lane; // t: the unit's thread
	int kh = (h0 / GQ) * HD;
	if (t < 2 * HD / 4) *(float4 *)(&qs[u][0][0] + 4 * t) = __ldcg((const float4 *)(q + h0 * HD) + t);
	unitSync(n);
	const float scale = 0.125f; // 1/sqrt(64)
	float m[2] = {-INFINITY, -INFINITY}, s[2] = {0, 0};
	float2 acc[2] = {make_float2(0, 0), make_float2(0, 0)};
	for (int base = 32 * w; base < span; base += 32 * AW) {
		int key = base + lane;
		__half2 vr[32];
#pragma unroll
		for (int k = 0; k < 32; k++) vr[k] = base + k < span ? ld2((const __half2 *)(vc + (long long)(base + k) * KR + kh) + lane) : __half2();
		float x[2] = {0, 0};
		if (key < span) {
			const uint4 *kr = (const uint4 *)(kc + (long long)key * KR + kh);
			uint4 kw[HD / 8];
#pragma unroll
			for (int c = 0; c < HD / 8; c++) kw[c] = ld16(kr + c);
#pragma unroll
			for (int c = 0; c < HD / 8; c++) {
				float2 k0 = __half22float2(*(__half2 *)&kw[c].x), k1 = __half22float2(*(__half2 *)&kw[c].y);
				float2 k2 = __half22float2(*(__half2 *)&kw[c].z), k3 = __half22float2(*(__half2 *)&kw[c].w);
#pragma unroll
				for (int g = 0; g < 2; g++) {
					float4 qa = *(const float4 *)(&qs[u][g][8 * c]), qb = *(const float4 *)(&qs[u][g][8 * c + 4]);
					float d = x[g];
					d = fmaf(qa.x, k0.x, d), d = fmaf(qa.y, k0.y, d), d = fmaf(qa.z, k1.x, d), d = fmaf(qa.w, k1.y, d);
					d = fmaf(qb.x, k2.x, d), d = fmaf(qb.y, k2.y, d), d = fmaf(qb.z, k3.x, d), d = fmaf(qb.w, k3.y, d);
					x[g] = d;
				}
			}
		}
#pragma unroll
		for (int g = 0; g < 2; g++) {
			float xs = key < span ? x[g] * scale : -INFINITY, mx = xs;
			for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, o));
			float mn = fmaxf(m[g], mx), corr = expf(m[g] - mn);
			float p = key < span ? expf(xs - mn) : 0, sum = p;
			for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, o);
			s[g] = s[g] * corr + sum, m[g] = mn;
			acc[g].x *= corr, acc[g].y *= corr;
			ps[u][w][g][lane] = p;
		}
		__syncwarp();
		int nk = min(32, span - base);
#pragma unroll
		for (int k = 0; k < 32; k++) {
			if (k >= nk) break;
			float2 v = __half22float2(vr[k]);
#pragma unroll
			for (int g = 0; g < 2; g++) {
				float pk = ps[u][w][g][k];
				acc[g].x = fmaf(pk, v.x, acc[g].x), acc[g].y = fmaf(pk, v.y, acc[g].y);
			}
		}
		__syncwarp();
	}
#pragma unroll
	for (int g = 0; g < 2; g++) {
		if (lane == 0) sm[u][w][g][0] = m[g], sm[u][w][g][1] = s[g];
		sm[u][w][g][2 + 2 * lane] = acc[g].x, sm[u][w][g][3 + 2 * lane] = acc[g].y;
	}
	unitSync(n);
	// Per head: the warps merged, in warp order (a warp with no keys has sum 0).
	for (int e = t; e < 2 * HD; e += 32 * AW) {
		int g = e / HD, d = e % HD;
		float M = -INFINITY;
		for (int i = 0; i < AW; i++) M = fmaxf(M, sm[u][i][g][0]);
		float S = 0, v = 0;
		for (int i = 0; i < AW; i++) {
			float f = sm[u][i][g][1] > 0 ? expf(sm[u][i][g][0] - M) : 0;
			S += sm[u][i][g][1] * f, v += sm[u][i][g][2 + d] * f;
		}
		out[(h0 + g) * HD + d] = v / S;
	}
}


// newKV allocates a KV cache of MAXSPAN positions (keys kc, values vc, f16)
// and fills it with the same pseudo-random values in [-1, 1] every run.
static void newKV(__half **kc, __half **vc) {
	CK(cudaMalloc(kc, (size_t)MAXSPAN * KR * 2));
	CK(cudaMalloc(vc, (size_t)MAXSPAN * KR * 2));
	std::vector<__half> hk((size_t)MAXSPAN * KR), hv((size_t)MAXSPAN * KR);
	unsigned st = 777;
	for (size_t i = 0; i < hk.size(); i++) {
		st = st * 1103515245 + 12345, hk[i] = __float2half((float)((st >> 16) % 2001) / 1000.0f - 1);
		st = st * 1103515245 + 12345, hv[i] = __float2half((float)((st >> 16) % 2001) / 1000.0f - 1);
	}
	CK(cudaMemcpy(*kc, hk.data(), hk.size() * 2, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(*vc, hv.data(), hv.size() * 2, cudaMemcpyHostToDevice));
}
