// ops.metal: the small ops of a Llama step over f32 rows. All are bound by
// memory (one read and one write of each element) or, at decode sizes, by the
// dispatch itself.
#include "common.h"

// embed_<type>: out[i, :] = row tokens[i] of the table W, decoded exactly as
// quant.Dequantize decodes it. One threadgroup per token; its threads take
// pieces of 8 (common.h). Token ids are checked by the plan before the
// dispatch; one outside the table is skipped here rather than read.
template <DEQ_FN(DEQ)>
inline void embed_impl(device const uint8_t *w, device const int *tokens, device float *y, constant EmbedParams &p,
                       uint3 tgpig, uint3 tpitg, uint3 ntg) {
	int i = int(tgpig.x);
	int id = tokens[i];
	if (id < 0 || id >= p.vocab) return;
	device const uint8_t *row = w + ulong(id) * ulong(p.row_bytes);
	device float *o = y + ulong(i) * ulong(p.cols);
	for (int c = int(tpitg.x); c < p.cols / 8; c += int(ntg.x)) {
		float v[8];
		int e0, e1;
		DEQ(row, c, v, e0, e1);
		for (int j = 0; j < 4; j++) {
			o[e0 + j] = v[j];
			o[e1 + j] = v[j + 4];
		}
	}
}

// Buffers: 0 table, 1 token ids (int32), 2 output [n, cols]; params at 3.
#define EMBED_KERNEL(name)                                                                                       \
	kernel void embed_##name(device const uint8_t *w [[buffer(0)]], device const int *tokens [[buffer(1)]],     \
	                         device float *y [[buffer(2)]], constant EmbedParams &p [[buffer(3)]], THREAD_IDS) { \
		embed_impl<deq8_##name>(w, tokens, y, p, tgpig, tpitg, ntg);                                           \
	}

FOR_WEIGHT_TYPES(EMBED_KERNEL)

// The scale vector of rms_norm, element i, in its stored type.
inline float norm_f32(device const uint8_t *w, int i) { return ((device const float *)w)[i]; }
inline float norm_f16(device const uint8_t *w, int i) { return float(((device const half *)w)[i]); }
inline float norm_bf16(device const uint8_t *w, int i) {
	return as_type<float>(uint32_t(((device const ushort *)w)[i]) << 16);
}

// rms_norm_<type>: y = (x·(1/sqrt(mean(x²)+eps)))·w for each row of cols.
// A per-head norm is the same kernel over rows of one head (cols = the
// head's features, rows = tokens × heads): the heads of a row are
// contiguous and share the weight.
// One threadgroup per row: each thread sums the squares of its strided
// elements in f32, simd_sum reduces each simdgroup, and every thread adds the
// simdgroups' partial sums (threadgroup memory, one float per simdgroup) in
// the same order, so all use the same scale. devices/cpu sums in float64;
// the f32 sum differs from it by ~1e-7 relative.
template <float (*LOAD)(device const uint8_t *, int)>
inline void rms_norm_impl(device const float *x, device const uint8_t *w, device float *y, constant NormParams &p,
                          threadgroup float *sh, uint3 tgpig, uint3 tpitg, uint3 ntg, uint tiisg, uint sgitg) {
	device const float *xr = x + ulong(tgpig.x) * ulong(p.cols);
	device float *yr = y + ulong(tgpig.x) * ulong(p.cols);
	float s = 0.0f;
	for (int i = int(tpitg.x); i < p.cols; i += int(ntg.x)) s = fma(xr[i], xr[i], s);
	s = simd_sum(s);
	if (tiisg == 0) sh[sgitg] = s;
	threadgroup_barrier(mem_flags::mem_threadgroup);
	float sum = 0.0f;
	int nsg = int(ntg.x + 31) / 32;
	for (int g = 0; g < nsg; g++) sum += sh[g];
	float mean = sum / float(p.cols);
	float scale = 1.0f / precise::sqrt(mean + p.eps);
	for (int i = int(tpitg.x); i < p.cols; i += int(ntg.x)) yr[i] = (xr[i] * scale) * LOAD(w, i);
}

// Buffers: 0 input [rows, cols], 1 scale vector, 2 output; params at 3.
#define NORM_KERNEL(name)                                                                                      \
	kernel void rms_norm_##name(device const float *x [[buffer(0)]], device const uint8_t *w [[buffer(1)]],   \
	                            device float *y [[buffer(2)]], constant NormParams &p [[buffer(3)]],          \
	                            TG_MEM(float, sh), THREAD_IDS) {                                              \
		rms_norm_impl<norm_##name>(x, w, y, p, sh, tgpig, tpitg, ntg, tiisg, sgitg);                        \
	}

FOR_NORM_TYPES(NORM_KERNEL)

// rope: llama.cpp's rope, "normal" mode (pair j is features 2j, 2j+1 of
// the head) or NEOX mode (features j, j+dims/2). Thread (row, head, j)
// rotates pair j by θ = (pos+row)·scale^j, scale = base^(-2/dims) from the
// host; θ is stepped by repeated f32 multiplication, as devices/cpu does,
// so both see the same angle, and with frequency factors the stepped θ is
// divided by freqs[j] (once, not compounding), as devices/cpu and
// ggml_rope_cache_init do. The rotation has its multiply-adds fused as
// devices/cpu has them. Threads j ≥ dims/2 copy features 2j, 2j+1: in both
// modes those are the unrotated features dims..head_dim-1. Buffers: 0 input
// [rows, width], 1 output (may be the input); params at 2.
kernel void rope(device const float *x [[buffer(0)]], device float *y [[buffer(1)]],
                 constant RopeParams &p [[buffer(2)]], THREAD_IDS) {
	int hh = p.head_dim / 2, heads = p.width / p.head_dim, half_dims = p.dims / 2;
	int idx = int(tgpig.x * ntg.x + tpitg.x);
	if (idx >= p.rows * heads * hh) return;
	int j = idx % hh;
	int rh = idx / hh; // row·heads + head
	int row = rh / heads;
	ulong head = ulong(rh) * ulong(p.head_dim);
	if (j >= half_dims) {
		ulong off = head + ulong(2 * j);
		float x0 = x[off], x1 = x[off + 1];
		y[off] = x0;
		y[off + 1] = x1;
		return;
	}
	ulong o0 = head + ulong(p.neox ? j : 2 * j);
	ulong o1 = o0 + ulong(p.neox ? half_dims : 1);
	float x0 = x[o0], x1 = x[o1];
	float theta = float(p.pos + row);
	for (int i = 0; i < j; i++) theta *= p.scale;
	if (p.has_freqs) theta = theta / p.freqs[j];
	float s = precise::sin(theta), c = precise::cos(theta);
	y[o0] = fma(x0, c, -(x1 * s));
	y[o1] = fma(x0, s, x1 * c);
}

// add_bias_<type>: y[r, i] = x[r, i] + b[i] for a bias of cols elements in
// its stored type (f32, f16, bf16: each decodes exactly to f32, as
// devices/cpu decodes it at load), so the one f32 addition matches the
// CPU's bit for bit. Memory bound. Buffers: 0 input [n/cols, cols], 1 bias,
// 2 output (may be the input); params at 3.
template <float (*LOAD)(device const uint8_t *, int)>
inline void add_bias_impl(device const float *x, device const uint8_t *b, device float *y, constant BiasParams &p,
                          uint3 tgpig, uint3 tpitg, uint3 ntg) {
	int i = int(tgpig.x * ntg.x + tpitg.x);
	if (i < p.n) y[i] = x[i] + LOAD(b, i % p.cols);
}

#define BIAS_KERNEL(name)                                                                                      \
	kernel void add_bias_##name(device const float *x [[buffer(0)]], device const uint8_t *b [[buffer(1)]],   \
	                            device float *y [[buffer(2)]], constant BiasParams &p [[buffer(3)]], THREAD_IDS) { \
		add_bias_impl<norm_##name>(x, b, y, p, tgpig, tpitg, ntg);                                          \
	}

FOR_NORM_TYPES(BIAS_KERNEL)

// silu_mul: y = silu(g)·u = g/(1+e^−g)·u. Buffers: 0 g, 1 u, 2 y; params at 3.
kernel void silu_mul(device const float *g [[buffer(0)]], device const float *u [[buffer(1)]],
                     device float *y [[buffer(2)]], constant EltParams &p [[buffer(3)]], THREAD_IDS) {
	int i = int(tgpig.x * ntg.x + tpitg.x);
	if (i >= p.n) return;
	float v = g[i];
	y[i] = v / (1.0f + precise::exp(-v)) * u[i];
}

// add_f32: y = a + b. Buffers: 0 a, 1 b, 2 y; params at 3.
kernel void add_f32(device const float *a [[buffer(0)]], device const float *b [[buffer(1)]],
                    device float *y [[buffer(2)]], constant EltParams &p [[buffer(3)]], THREAD_IDS) {
	int i = int(tgpig.x * ntg.x + tpitg.x);
	if (i < p.n) y[i] = a[i] + b[i];
}

// copy_f32: y = x, n elements (last_row binds x at the last row's offset).
// Buffers: 0 x, 1 y; params at 2.
kernel void copy_f32(device const float *x [[buffer(0)]], device float *y [[buffer(1)]],
                     constant EltParams &p [[buffer(2)]], THREAD_IDS) {
	int i = int(tgpig.x * ntg.x + tpitg.x);
	if (i < p.n) y[i] = x[i];
}
