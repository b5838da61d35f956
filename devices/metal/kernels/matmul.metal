// matmul.metal: y[t, r] = Σ_k W[r, k]·x[t, k] for a weight W of m rows × k
// columns in its GGUF type, read in place, and f32 activations x of n rows;
// f32 arithmetic and accumulation throughout (activations are not quantized).
#include "common.h"

// matvec_<type>: decode (n = 1; also used for n of 2 or 3, one token per grid
// row). Layout: a threadgroup is MV_NSG simdgroups, each owning MV_NR
// consecutive weight rows; lane l decodes pieces l, l+32, … (8 weights each,
// common.h) of each of its rows, so the 32 lanes read a contiguous run of
// blocks of every row, and loads the matching 8 activations once for all
// MV_NR rows. One simd_sum per row at the end. Meant to be bound by memory
// (every weight byte read once, a few ALU ops per weight; not yet measured on
// a Mac); grid (ceil(m/(MV_NR·MV_NSG)), n).
template <DEQ_FN(DEQ)>
inline void matvec_impl(device const uint8_t *w, device const float *x, device float *y, constant MatParams &p,
                        uint3 tgpig, uint tiisg, uint sgitg) {
	int r0 = (int(tgpig.x) * MV_NSG + int(sgitg)) * MV_NR;
	int t = int(tgpig.y);
	int nr = min(MV_NR, p.m - r0); // rows this simdgroup owns; ≤ 0 past the end
	device const float *xr = x + ulong(t) * ulong(p.k);
	float acc[MV_NR];
	for (int r = 0; r < MV_NR; r++) acc[r] = 0.0f;
	int nc = p.k / 8;
	for (int c = int(tiisg); c < nc; c += 32) {
		float4 xa = float4(0.0f), xb = float4(0.0f);
		for (int r = 0; r < MV_NR; r++) {
			if (r < nr) {
				float v[8];
				int e0, e1;
				DEQ(w + ulong(r0 + r) * ulong(p.row_bytes), c, v, e0, e1);
				if (r == 0) {
					xa = *(device const float4 *)(xr + e0);
					xb = *(device const float4 *)(xr + e1);
				}
				float s = acc[r];
				s = fma(v[0], xa.x, s);
				s = fma(v[1], xa.y, s);
				s = fma(v[2], xa.z, s);
				s = fma(v[3], xa.w, s);
				s = fma(v[4], xb.x, s);
				s = fma(v[5], xb.y, s);
				s = fma(v[6], xb.z, s);
				s = fma(v[7], xb.w, s);
				acc[r] = s;
			}
		}
	}
	// Every lane reaches the simd_sums (no early exit), as they require.
	for (int r = 0; r < MV_NR; r++) {
		float s = simd_sum(acc[r]);
		if (tiisg == 0 && r < nr) y[ulong(t) * ulong(p.m) + ulong(r0 + r)] = s;
	}
}

// matmul_<type>: prefill (n ≥ 4). Layout: a threadgroup of MM_NSG
// simdgroups computes an MM_BM × MM_BN tile of the output (weight rows r0.. ×
// tokens t0..), MM_BK columns of k per step: the threads decode the weight
// tile into threadgroup memory as sa[k][row] (f32) and copy the activation
// tile as sb[token][k], then simdgroup s multiplies 8×8 blocks with
// simdgroup_multiply_accumulate for tokens 0..31 × its rows 16s..16s+15 (8
// accumulators). The result goes through threadgroup memory so that the
// edges of the output are written with bounds checks. Weights are read once
// per MM_BN tokens, so at prefill sizes the 8×8 f32 multiply-accumulates
// should bound it (not yet measured on a Mac).
// Threadgroup memory: (MM_BK·MM_BM + MM_BN·MM_BK) floats = 12288 bytes, of
// which the output tile (MM_BN·MM_BM floats) reuses the first 8192.
template <DEQ_FN(DEQ)>
inline void matmul_impl(device const uint8_t *w, device const float *x, device float *y, constant MatParams &p,
                        threadgroup float *sh, uint3 tgpig, uint3 tpitg, uint sgitg) {
	threadgroup float *sa = sh;                 // [MM_BK][MM_BM]
	threadgroup float *sb = sh + MM_BK * MM_BM; // [MM_BN][MM_BK]
	int r0 = int(tgpig.x) * MM_BM, t0 = int(tgpig.y) * MM_BN;
	int tid = int(tpitg.x);
	int rs = 16 * int(sgitg); // this simdgroup's first row in the tile
	simdgroup_float8x8 acc[8]; // acc[2·tb + rb]: tokens 8tb.., rows rs+8rb..
	for (int i = 0; i < 8; i++) acc[i] = make_filled_simdgroup_matrix<float, 8>(0.0f);
	for (int k0 = 0; k0 < p.k; k0 += MM_BK) {
		// The weight tile: MM_BM rows × 4 pieces, two per thread.
		for (int q = tid; q < MM_BM * 4; q += 32 * MM_NSG) {
			int r = q >> 2, s = q & 3;
			float v[8];
			int e0 = k0 + 8 * s, e1 = e0 + 4;
			if (r0 + r < p.m) {
				DEQ(w + ulong(r0 + r) * ulong(p.row_bytes), (k0 >> 3) + s, v, e0, e1);
			} else {
				for (int i = 0; i < 8; i++) v[i] = 0.0f;
			}
			for (int i = 0; i < 4; i++) {
				sa[(e0 - k0 + i) * MM_BM + r] = v[i];
				sa[(e1 - k0 + i) * MM_BM + r] = v[i + 4];
			}
		}
		// The activation tile: MM_BN tokens × 4 runs of 8, one per thread.
		for (int q = tid; q < MM_BN * 4; q += 32 * MM_NSG) {
			int t = q >> 2, s = q & 3;
			float4 a = float4(0.0f), b = float4(0.0f);
			if (t0 + t < p.n) {
				device const float *xp = x + ulong(t0 + t) * ulong(p.k) + ulong(k0 + 8 * s);
				a = *(device const float4 *)xp;
				b = *(device const float4 *)(xp + 4);
			}
			threadgroup float *d = sb + t * MM_BK + 8 * s;
			d[0] = a.x;
			d[1] = a.y;
			d[2] = a.z;
			d[3] = a.w;
			d[4] = b.x;
			d[5] = b.y;
			d[6] = b.z;
			d[7] = b.w;
		}
		threadgroup_barrier(mem_flags::mem_threadgroup);
		for (int kk = 0; kk < MM_BK; kk += 8) {
			simdgroup_float8x8 a[4], b[2];
			for (int tb = 0; tb < 4; tb++) simdgroup_load(a[tb], sb + 8 * tb * MM_BK + kk, MM_BK);
			for (int rb = 0; rb < 2; rb++) simdgroup_load(b[rb], sa + kk * MM_BM + rs + 8 * rb, MM_BM);
			for (int tb = 0; tb < 4; tb++) {
				for (int rb = 0; rb < 2; rb++) {
					simdgroup_multiply_accumulate(acc[2 * tb + rb], a[tb], b[rb], acc[2 * tb + rb]);
				}
			}
		}
		threadgroup_barrier(mem_flags::mem_threadgroup);
	}
	for (int tb = 0; tb < 4; tb++) {
		for (int rb = 0; rb < 2; rb++) simdgroup_store(acc[2 * tb + rb], sh + 8 * tb * MM_BM + rs + 8 * rb, MM_BM);
	}
	threadgroup_barrier(mem_flags::mem_threadgroup);
	for (int i = tid; i < MM_BN * MM_BM; i += 32 * MM_NSG) {
		int t = i / MM_BM, r = i % MM_BM;
		if (t0 + t < p.n && r0 + r < p.m) y[ulong(t0 + t) * ulong(p.m) + ulong(r0 + r)] = sh[i];
	}
}

// Buffers: 0 weight, 1 input [n, k], 2 output [n, m]; params at 3.
#define MATMUL_KERNELS(name)                                                                                   \
	kernel void matvec_##name(device const uint8_t *w [[buffer(0)]], device const float *x [[buffer(1)]],      \
	                          device float *y [[buffer(2)]], constant MatParams &p [[buffer(3)]], THREAD_IDS) { \
		matvec_impl<deq8_##name>(w, x, y, p, tgpig, tiisg, sgitg);                                             \
	}                                                                                                          \
	kernel void matmul_##name(device const uint8_t *w [[buffer(0)]], device const float *x [[buffer(1)]],      \
	                          device float *y [[buffer(2)]], constant MatParams &p [[buffer(3)]],              \
	                          TG_MEM(float, sh), THREAD_IDS) {                                                 \
		matmul_impl<deq8_##name>(w, x, y, p, sh, tgpig, tpitg, sgitg);                                         \
	}

FOR_WEIGHT_TYPES(MATMUL_KERNELS)
