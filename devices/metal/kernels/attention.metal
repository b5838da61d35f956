// attention.metal: the layer's KV cache and causal grouped-query softmax
// attention over it.
//
// The cache is f16 (binary16, round to nearest even), ctx positions ×
// kv_heads·head_dim per K and V buffer, as devices/cpu and llama.cpp keep it:
// half the memory of f32 and the same rounding of keys and values. Queries,
// scores, the softmax and the output accumulator are f32 (devices/cpu also
// rounds the query and the accumulator to f16 on its decode path; that
// difference is within a few 2⁻¹¹ of max|v|).
#include "common.h"

// kv_store: kc[pos·dim + i] = half(k[i]), vc[…] = half(v[i]) for the step's
// n rows of dim = kv_heads·head_dim. Buffers: 0 k, 1 v, 2 K cache, 3 V cache;
// params at 4.
kernel void kv_store(device const float *k [[buffer(0)]], device const float *v [[buffer(1)]],
                     device half *kc [[buffer(2)]], device half *vc [[buffer(3)]],
                     constant AttnParams &p [[buffer(4)]], THREAD_IDS) {
	int dim = p.kv_heads * p.head_dim;
	int i = int(tgpig.x * ntg.x + tpitg.x);
	if (i >= p.n * dim) return;
	ulong o = ulong(p.pos) * ulong(dim) + ulong(i);
	kc[o] = half(k[i]);
	vc[o] = half(v[i]);
}

// attention: query row i of head h sees cache positions 0..pos+i and reads
// KV head h/(heads/kv_heads). Layout: one threadgroup per (head, query row)
// of ATT_NSG simdgroups; simdgroup g takes positions g, g+ATT_NSG, … with an
// online softmax (running max, sum and value accumulator; lane l holds
// features l, l+32, …), each score a simd_sum of the lanes' partial dot
// products; then the simdgroups' partial results are merged through
// threadgroup memory: ATT_NSG·(2 + head_dim) floats. Bound: reading the
// cache (each KV head's rows are read once per query head of its group, the
// repeats mostly from cache); a decode step has only `heads` threadgroups, so
// long contexts would want the positions split over more (flash-decoding).
// Buffers: 0 q [n, heads·head_dim], 1 K cache, 2 V cache, 3 out; params at 4.
kernel void attention(device const float *q [[buffer(0)]], device const half *kc [[buffer(1)]],
                      device const half *vc [[buffer(2)]], device float *out [[buffer(3)]],
                      constant AttnParams &p [[buffer(4)]], TG_MEM(float, sh), THREAD_IDS) {
	int h = int(tgpig.x), i = int(tgpig.y);
	int hd = p.head_dim, dim = p.kv_heads * hd;
	int kh = (h / (p.heads / p.kv_heads)) * hd;
	int span = p.pos + i + 1;
	device const float *qi = q + (ulong(i) * ulong(p.heads) + ulong(h)) * ulong(hd);
	float qr[ATT_MAXT], acc[ATT_MAXT];
	for (int t = 0; t < ATT_MAXT; t++) {
		int f = int(tiisg) + 32 * t;
		qr[t] = f < hd ? qi[f] : 0.0f;
		acc[t] = 0.0f;
	}
	// -FLT_MAX/2, not -INFINITY, starts the running max: under fast math the
	// compiler may assume there are no infinities. The first score is above
	// it, m − x cannot overflow, and its exp is 0.
	float m = -FLT_MAX / 2, s = 0.0f;
	// The trip count is the same for every lane of a simdgroup, as simd_sum
	// needs.
	for (int j = int(sgitg); j < span; j += ATT_NSG) {
		device const half *kr = kc + ulong(j) * ulong(dim) + ulong(kh);
		device const half *vr = vc + ulong(j) * ulong(dim) + ulong(kh);
		float dot = 0.0f;
		for (int t = 0; t < ATT_MAXT; t++) {
			int f = int(tiisg) + 32 * t;
			if (f < hd) dot = fma(qr[t], float(kr[f]), dot);
		}
		float x = simd_sum(dot) * p.scale;
		float pj = 1.0f, corr = 1.0f;
		if (x > m) {
			corr = precise::exp(m - x);
			m = x;
		} else {
			pj = precise::exp(x - m);
		}
		s = s * corr + pj;
		for (int t = 0; t < ATT_MAXT; t++) {
			int f = int(tiisg) + 32 * t;
			if (f < hd) acc[t] = acc[t] * corr + pj * float(vr[f]);
		}
	}
	threadgroup float *ms = sh;               // [ATT_NSG][2]: max, sum
	threadgroup float *as = sh + 2 * ATT_NSG; // [ATT_NSG][hd]: accumulators
	if (tiisg == 0) {
		ms[2 * sgitg] = m;
		ms[2 * sgitg + 1] = s;
	}
	for (int t = 0; t < ATT_MAXT; t++) {
		int f = int(tiisg) + 32 * t;
		if (f < hd) as[int(sgitg) * hd + f] = acc[t];
	}
	threadgroup_barrier(mem_flags::mem_threadgroup);
	float mx = -FLT_MAX / 2;
	for (int g = 0; g < ATT_NSG; g++) mx = max(mx, ms[2 * g]);
	float sum = 0.0f, fac[ATT_NSG];
	for (int g = 0; g < ATT_NSG; g++) {
		fac[g] = ms[2 * g + 1] > 0.0f ? precise::exp(ms[2 * g] - mx) : 0.0f;
		sum += ms[2 * g + 1] * fac[g];
	}
	device float *o = out + (ulong(i) * ulong(p.heads) + ulong(h)) * ulong(hd);
	for (int d = int(tpitg.x); d < hd; d += int(ntg.x)) {
		float v = 0.0f;
		for (int g = 0; g < ATT_NSG; g++) v += as[g * hd + d] * fac[g];
		o[d] = v / sum;
	}
}
