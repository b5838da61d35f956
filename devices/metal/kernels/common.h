// common.h: what every Metal kernel of hybrid shares: the parameter structs
// (each mirrored, field for field, by a Go struct in dispatch.go), the
// constants the dispatch plan and the kernels must agree on, and the decoders
// of GGUF weight blocks.
//
// Source (kernels.go) is this header followed by every *.metal file, each
// with its include of this header blanked, so newLibraryWithSource sees
// one self-contained unit. The same text compiles as C++17 under
// harness/msl_shim.h, which is how it is tested on Linux: keep to what the
// shim maps (see its header comment), and give every kernel the parameters
// buffers..., one constant params struct, optionally TG_MEM, then THREAD_IDS.
#ifndef HYBRID_METAL_COMMON_H
#define HYBRID_METAL_COMMON_H
#include <metal_stdlib>
#include <metal_simdgroup>
#include <metal_simdgroup_matrix>
using namespace metal;

// TG_MEM declares a kernel's threadgroup memory argument (the Dispatch's
// Shared bytes, bound at threadgroup index 0). The C++ shim defines its own.
#ifndef TG_MEM
#define TG_MEM(T, name) threadgroup T *name [[threadgroup(0)]]
#endif

// THREAD_IDS ends every kernel's parameter list, always the same five in the
// same order, so the harness can call any kernel the same way.
#define THREAD_IDS                                                                        \
	uint3 tgpig [[threadgroup_position_in_grid]], uint3 tpitg [[thread_position_in_threadgroup]], \
	    uint3 ntg [[threads_per_threadgroup]], uint tiisg [[thread_index_in_simdgroup]],            \
	    uint sgitg [[simdgroup_index_in_threadgroup]]

// ---- Constants shared with dispatch.go (the test checks they agree) ----

// Mat-vec: MV_NSG simdgroups per threadgroup, MV_NR weight rows each.
#define MV_NR 4
#define MV_NSG 2
// Mat-mat: a threadgroup of MM_NSG simdgroups computes an MM_BM (weight
// rows) × MM_BN (tokens) tile of the output, MM_BK columns of k at a time.
#define MM_BM 64
#define MM_BN 32
#define MM_BK 32
#define MM_NSG 4
// Attention: ATT_NSG simdgroups per (query row, head); head sizes up to
// 32·ATT_MAXT.
#define ATT_NSG 4
#define ATT_MAXT 8

// ---- Parameter structs: little-endian, 4-byte fields, padded to 16 bytes ----

// MatParams: matvec_<type>, matmul_<type>. Go: matParams.
struct MatParams {
	int32_t m;         // weight rows = output columns
	int32_t k;         // weight columns = input columns
	int32_t n;         // input rows (tokens)
	int32_t row_bytes; // bytes of one weight row
};

// EmbedParams: embed_<type>. Go: embedParams.
struct EmbedParams {
	int32_t cols;      // embedding width
	int32_t row_bytes; // bytes of one table row
	int32_t vocab;     // table rows
	int32_t n;         // tokens
};

// NormParams: rms_norm_<type>. Go: normParams.
struct NormParams {
	int32_t cols;
	int32_t rows;
	float eps;
	int32_t pad0;
};

// Rope: the most rotated pairs per head whose frequency factors RopeParams
// carries (dims ≤ 256, the attention kernel's largest head).
#define ROPE_MAX_PAIRS 128

// RopeParams: rope. Go: ropeParams. The frequency factors travel in the
// params (setBytes, 544 bytes: under Metal's 4 KiB for it), so that the
// op needs no buffer of its own.
struct RopeParams {
	int32_t rows;     // tokens; row i is at position pos+i
	int32_t width;    // features per row (heads × head_dim)
	int32_t head_dim;
	int32_t dims;     // rotated features per head
	int32_t pos;
	float scale;      // base^(-2/dims), computed on the host as devices/cpu does
	int32_t neox;     // 1: pair j is (j, j+dims/2); 0: (2j, 2j+1)
	int32_t has_freqs; // 1: pair j's angle is divided by freqs[j]
	float freqs[ROPE_MAX_PAIRS]; // dims/2 frequency factors (zeros past them)
};

// BiasParams: add_bias_<type>. Go: biasParams.
struct BiasParams {
	int32_t n;    // elements of the input
	int32_t cols; // bias length = row width
	int32_t pad0;
	int32_t pad1;
};

// AttnParams: kv_store, attention. Go: attnParams.
struct AttnParams {
	int32_t heads;
	int32_t kv_heads;
	int32_t head_dim;
	int32_t pos;   // position of the step's first token
	int32_t n;     // the step's tokens
	int32_t ctx;   // cache length in positions
	float scale;   // 1/sqrt(head_dim)
	int32_t pad0;
};

// EltParams: add_f32, silu_mul, copy_f32. Go: eltParams.
struct EltParams {
	int32_t n; // elements
	int32_t pad0;
	int32_t pad1;
	int32_t pad2;
};

// ---- GGUF block decoders ----
//
// deq8_<type>(row, c, w, e0, e1) decodes piece c of a weight row: eight
// weights, w[0..3] being elements e0..e0+3 and w[4..7] elements e1..e1+3 of
// the row (e1 = e0+4 where the eight are consecutive; Q4_0-style blocks keep
// an element's partner nibble 16 further on). Four consecutive pieces make one
// 32-element block or sub-block, so the lanes of a simdgroup that take
// consecutive pieces read consecutive bytes. Each decoder performs the
// operations of models/quant's Dequantize in the same order (one rounding per
// product, the offset subtracted after), so that embeddings agree with
// devices/cpu bit for bit where the compiler does not fuse a multiply-add.
//
// Rows start at a multiple of their row bytes from the buffer's start; blocks
// are only 2-byte aligned (18, 22, 34, 210 bytes), so multi-byte fields are
// read as halves or assembled from bytes.

#define DEQ_FN(name) void (*name)(device const uint8_t *, int, thread float *, thread int &, thread int &)

inline float f16_at(device const uint8_t *p) { return float(*(device const half *)p); }

inline uint32_t u32_at(device const uint8_t *p) {
	return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

inline void deq8_f32(device const uint8_t *row, int c, thread float *w, thread int &e0, thread int &e1) {
	device const float *p = (device const float *)row + 8 * c;
	for (int i = 0; i < 8; i++) w[i] = p[i];
	e0 = 8 * c;
	e1 = e0 + 4;
}

inline void deq8_f16(device const uint8_t *row, int c, thread float *w, thread int &e0, thread int &e1) {
	device const half *p = (device const half *)row + 8 * c;
	for (int i = 0; i < 8; i++) w[i] = float(p[i]);
	e0 = 8 * c;
	e1 = e0 + 4;
}

inline void deq8_bf16(device const uint8_t *row, int c, thread float *w, thread int &e0, thread int &e1) {
	device const ushort *p = (device const ushort *)row + 8 * c;
	for (int i = 0; i < 8; i++) w[i] = as_type<float>(uint32_t(p[i]) << 16);
	e0 = 8 * c;
	e1 = e0 + 4;
}

// Q4_0 (18 bytes / 32): f16 d, 16 bytes whose low nibbles are elements 0..15
// and high nibbles 16..31; (q-8)·d. Piece s of a block: bytes 4s..4s+3.
inline void deq8_q4_0(device const uint8_t *row, int c, thread float *w, thread int &e0, thread int &e1) {
	device const uint8_t *b = row + 18 * (c >> 2);
	int s = c & 3;
	float d = f16_at(b);
	device const uint8_t *q = b + 2 + 4 * s;
	for (int i = 0; i < 4; i++) {
		w[i] = float(int(q[i] & 15) - 8) * d;
		w[i + 4] = float(int(q[i] >> 4) - 8) * d;
	}
	e0 = 32 * (c >> 2) + 4 * s;
	e1 = e0 + 16;
}

// Q4_1 (20 bytes / 32): f16 d, f16 m, nibbles as Q4_0; q·d + m.
inline void deq8_q4_1(device const uint8_t *row, int c, thread float *w, thread int &e0, thread int &e1) {
	device const uint8_t *b = row + 20 * (c >> 2);
	int s = c & 3;
	float d = f16_at(b), m = f16_at(b + 2);
	device const uint8_t *q = b + 4 + 4 * s;
	for (int i = 0; i < 4; i++) {
		w[i] = float(q[i] & 15) * d + m;
		w[i + 4] = float(q[i] >> 4) * d + m;
	}
	e0 = 32 * (c >> 2) + 4 * s;
	e1 = e0 + 16;
}

// Q5_0 (22 bytes / 32): f16 d, u32 qh (bit j: fifth bit of element j),
// nibbles as Q4_0; (q-16)·d.
inline void deq8_q5_0(device const uint8_t *row, int c, thread float *w, thread int &e0, thread int &e1) {
	device const uint8_t *b = row + 22 * (c >> 2);
	int s = c & 3;
	float d = f16_at(b);
	uint32_t qh = u32_at(b + 2);
	device const uint8_t *q = b + 6 + 4 * s;
	for (int i = 0; i < 4; i++) {
		int j = 4 * s + i;
		int lo = int(q[i] & 15) | int((qh >> j) & 1) << 4;
		int hi = int(q[i] >> 4) | int((qh >> (j + 16)) & 1) << 4;
		w[i] = float(lo - 16) * d;
		w[i + 4] = float(hi - 16) * d;
	}
	e0 = 32 * (c >> 2) + 4 * s;
	e1 = e0 + 16;
}

// Q5_1 (24 bytes / 32): f16 d, f16 m, u32 qh, nibbles; q·d + m.
inline void deq8_q5_1(device const uint8_t *row, int c, thread float *w, thread int &e0, thread int &e1) {
	device const uint8_t *b = row + 24 * (c >> 2);
	int s = c & 3;
	float d = f16_at(b), m = f16_at(b + 2);
	uint32_t qh = u32_at(b + 4);
	device const uint8_t *q = b + 8 + 4 * s;
	for (int i = 0; i < 4; i++) {
		int j = 4 * s + i;
		uint32_t lo = uint32_t(q[i] & 15) | ((qh >> j) & 1) << 4;
		uint32_t hi = uint32_t(q[i] >> 4) | ((qh >> (j + 16)) & 1) << 4;
		w[i] = float(lo) * d + m;
		w[i + 4] = float(hi) * d + m;
	}
	e0 = 32 * (c >> 2) + 4 * s;
	e1 = e0 + 16;
}

// Q8_0 (34 bytes / 32): f16 d, 32 int8; q·d. Piece s: quants 8s..8s+7.
inline void deq8_q8_0(device const uint8_t *row, int c, thread float *w, thread int &e0, thread int &e1) {
	device const uint8_t *b = row + 34 * (c >> 2);
	int s = c & 3;
	float d = f16_at(b);
	device const int8_t *q = (device const int8_t *)(b + 2 + 8 * s);
	for (int i = 0; i < 8; i++) w[i] = float(q[i]) * d;
	e0 = 8 * c;
	e1 = e0 + 4;
}

// scale_min_k4 unpacks sub-block j's 6-bit scale and min from the 12 packed
// bytes of a Q4_K or Q5_K super-block (quant.ScaleMinK4).
inline void scale_min_k4(int j, device const uint8_t *s, thread int &sc, thread int &m) {
	if (j < 4) {
		sc = s[j] & 63;
		m = s[j + 4] & 63;
	} else {
		sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
		m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
	}
}

// Q4_K (144 bytes / 256): f16 d, f16 dmin, 12 bytes of scales, 128 bytes of
// nibbles. Sub-block j (32 elements: pieces 4j..4j+3 of the super-block) is
// the low (even j) or high (odd j) nibbles of bytes 32(j/2)..+31;
// (d·sc)·q − dmin·m.
inline void deq8_q4_k(device const uint8_t *row, int c, thread float *w, thread int &e0, thread int &e1) {
	device const uint8_t *b = row + 144 * (c >> 5);
	int j = (c >> 2) & 7, s = c & 3, sc, m;
	scale_min_k4(j, b + 4, sc, m);
	float d1 = f16_at(b) * float(sc), m1 = f16_at(b + 2) * float(m);
	device const uint8_t *q = b + 16 + 32 * (j >> 1) + 8 * s;
	int sh = 4 * (j & 1);
	for (int i = 0; i < 8; i++) w[i] = d1 * float((q[i] >> sh) & 15) - m1;
	e0 = 8 * c;
	e1 = e0 + 4;
}

// Q5_K (176 bytes / 256): f16 d, f16 dmin, 12 bytes of scales, 32 bytes qh
// (bit j of byte l: fifth bit of element l of sub-block j), 128 bytes of
// nibbles as Q4_K.
inline void deq8_q5_k(device const uint8_t *row, int c, thread float *w, thread int &e0, thread int &e1) {
	device const uint8_t *b = row + 176 * (c >> 5);
	int j = (c >> 2) & 7, s = c & 3, sc, m;
	scale_min_k4(j, b + 4, sc, m);
	float d1 = f16_at(b) * float(sc), m1 = f16_at(b + 2) * float(m);
	device const uint8_t *qh = b + 16 + 8 * s;
	device const uint8_t *q = b + 48 + 32 * (j >> 1) + 8 * s;
	int sh = 4 * (j & 1);
	for (int i = 0; i < 8; i++) {
		int v = ((q[i] >> sh) & 15) | ((qh[i] >> j) & 1) << 4;
		w[i] = d1 * float(v) - m1;
	}
	e0 = 8 * c;
	e1 = e0 + 4;
}

// Q6_K (210 bytes / 256): 128 bytes ql, 64 bytes qh, 16 int8 scales, f16 d.
// The 32-element chunk r = (c/4)%8 of a super-block is half h = r/4, quarter
// k = r%4: its element l takes nibble k/2 of ql[64h + 32(k%2) + l], bits
// 2k..2k+1 of qh[32h + l], and scale 8h + 2k + l/16; (d·scale)·(q−32).
inline void deq8_q6_k(device const uint8_t *row, int c, thread float *w, thread int &e0, thread int &e1) {
	device const uint8_t *b = row + 210 * (c >> 5);
	int r = (c >> 2) & 7, h = r >> 2, k = r & 3, s = c & 3;
	float d = f16_at(b + 208);
	device const uint8_t *ql = b + 64 * h + 32 * (k & 1) + 8 * s;
	device const uint8_t *qh = b + 128 + 32 * h + 8 * s;
	float sd = d * float(((device const int8_t *)b)[192 + 8 * h + 2 * k + (s >> 1)]);
	int shl = 4 * (k >> 1), shh = 2 * k;
	for (int i = 0; i < 8; i++) {
		int q = int(((ql[i] >> shl) & 15) | ((qh[i] >> shh) & 3) << 4) - 32;
		w[i] = sd * float(q);
	}
	e0 = 8 * c;
	e1 = e0 + 4;
}

// FOR_WEIGHT_TYPES(X) calls X(name) for every weight type the mat-mul and
// embedding kernels are instantiated for; the names match quant.Type's
// String in lower case.
#define FOR_WEIGHT_TYPES(X) \
	X(f32) X(f16) X(bf16) X(q4_0) X(q4_1) X(q5_0) X(q5_1) X(q8_0) X(q4_k) X(q5_k) X(q6_k)

// FOR_NORM_TYPES(X): the weight types rms_norm reads its scale vector in,
// and add_bias its bias.
#define FOR_NORM_TYPES(X) X(f32) X(f16) X(bf16)

#endif // HYBRID_METAL_COMMON_H
