// gen_matmul writes llamacpp-matmul.golden: llama.cpp's own CPU mat-mul
// results (ggml_mul_mat through the CPU backend, one thread) for weights of
// the types whose kernels must sum in llama.cpp's order, which
// llamaorder_test.go checks the kernels against bit for bit. It is not part
// of the Go build. The results depend on the CPU llama.cpp was built for
// (GGML_NATIVE): these are from an AVX-512 (Zen 5) build, where llama.cpp
// repacks Q2_K and IQ4_NL weights whose row count is a multiple of 8
// (CPU_REPACK buffer, as llama-cli and llama-bench load them) and multiplies
// Q3_K and IQ4_XS with vec_dot. To regenerate, with that build at $LL:
//
//   gcc -O2 -I$LL/ggml/include gen_matmul.c -L$LL/build/bin -lggml -lggml-base -lggml-cpu -lm -o /tmp/gen_matmul
//   LD_LIBRARY_PATH=$LL/build/bin /tmp/gen_matmul > llamacpp-matmul.golden && gzip -9nf llamacpp-matmul.golden
//
// Layout (little-endian): "QMAT", u32 case count, then per case: u32 type,
// u32 rows, u32 cols, u32 inputs n, u32 repacked (1: the weight sat in the
// CPU_REPACK buffer), the rows×cols weight in its file layout, the n×cols f32
// inputs, the n×rows f32 outputs (input-major).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

static uint64_t rng_state = 7;

static uint64_t splitmix64(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform01(void) { return (splitmix64() >> 11) * 0x1.0p-53; }

static float gauss(void) {
    double u1 = uniform01() + 0x1.0p-60, u2 = uniform01();
    return (float)(sqrt(-2 * log(u1)) * cos(2 * M_PI * u2));
}

static void put_u32(uint32_t v) { fwrite(&v, 4, 1, stdout); }

static ggml_backend_t backend;
static ggml_backend_buffer_type_t repack_buft;

// matmul sets y (n×rows) to w (rows×cols of type t) times each row of x
// (n×cols) as the CPU backend computes it, the weight in the repack buffer
// if repack is set. It returns whether the weight was repacked.
static int matmul(enum ggml_type t, const void *w, int rows, int cols, const float *x, int n, float *y, int repack) {
    struct ggml_init_params wp = {ggml_tensor_overhead() * 2, NULL, true};
    struct ggml_context *wctx = ggml_init(wp);
    struct ggml_tensor *W = ggml_new_tensor_2d(wctx, t, cols, rows);
    ggml_backend_buffer_type_t buft = repack ? repack_buft : ggml_backend_cpu_buffer_type();
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft);
    int repacked = repack && W->extra != NULL;
    if (repack && !repacked) {
        fprintf(stderr, "%s %dx%d: no repacked layout on this CPU\n", ggml_type_name(t), rows, cols);
        exit(1);
    }
    ggml_backend_tensor_set(W, w, 0, ggml_nbytes(W));

    struct ggml_init_params p = {ggml_tensor_overhead() * 4 + ggml_graph_overhead(), NULL, true};
    struct ggml_context *ctx = ggml_init(p);
    struct ggml_tensor *X = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, cols, n);
    struct ggml_tensor *Y = ggml_mul_mat(ctx, W, X);
    struct ggml_cgraph *gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, Y);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
    ggml_backend_tensor_set(X, x, 0, ggml_nbytes(X));
    if (ggml_backend_graph_compute(backend, gf) != GGML_STATUS_SUCCESS) {
        fprintf(stderr, "compute failed\n");
        exit(1);
    }
    ggml_backend_tensor_get(Y, y, 0, ggml_nbytes(Y));
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    ggml_backend_buffer_free(wbuf);
    ggml_free(wctx);
    return repacked;
}

// weights fills w with rows×cols of type t: even rows quantized from
// Gaussian floats (sigma 0.05), odd rows random bytes with finite f16 scales
// in [0.001, 0.021), which reach the corners a quantizer rarely writes.
static void weights(enum ggml_type t, uint8_t *w, int rows, int cols) {
    size_t rb = ggml_row_size(t, cols), bb = ggml_type_size(t);
    float *f = malloc(sizeof(float) * cols);
    int fields[2] = {-1, -1};
    switch (t) {
    case GGML_TYPE_Q2_K: fields[0] = 80; fields[1] = 82; break;
    case GGML_TYPE_Q3_K: fields[0] = 108; break;
    default: fields[0] = 0; break; // IQ4_NL, IQ4_XS
    }
    for (int r = 0; r < rows; r++) {
        uint8_t *row = w + r * rb;
        if (r % 2 == 0) {
            for (int i = 0; i < cols; i++) f[i] = 0.05f * gauss();
            ggml_quantize_chunk(t, f, row, 0, 1, cols, NULL);
            continue;
        }
        for (size_t i = 0; i < rb; i++) row[i] = (uint8_t)splitmix64();
        for (size_t b = 0; b < rb; b += bb) {
            for (int k = 0; k < 2; k++) {
                if (fields[k] < 0) continue;
                ggml_fp16_t h = ggml_fp32_to_fp16((float)(uniform01() * 0.02 + 0.001));
                memcpy(row + b + fields[k], &h, 2);
            }
        }
    }
    free(f);
}

int main(void) {
    ggml_cpu_init();
    backend = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(backend, 1);
    ggml_backend_dev_t dev = ggml_backend_get_device(backend);
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    ggml_backend_dev_get_extra_bufts_t extra =
        (ggml_backend_dev_get_extra_bufts_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    for (ggml_backend_buffer_type_t *b = extra ? extra(dev) : NULL; b && *b; b++) {
        if (strcmp(ggml_backend_buft_name(*b), "CPU_REPACK") == 0) repack_buft = *b;
    }
    if (!repack_buft) {
        fprintf(stderr, "this llama.cpp build has no CPU_REPACK buffer\n");
        return 1;
    }

    static const struct {
        enum ggml_type t;
        int repack;
        int cols[2];
    } types[] = {
        {GGML_TYPE_Q2_K, 1, {256, 1024}},
        {GGML_TYPE_Q3_K, 0, {256, 1024}},
        {GGML_TYPE_IQ4_NL, 1, {96, 1024}},
        {GGML_TYPE_IQ4_XS, 0, {256, 1024}},
    };
    static const int rows[2] = {16, 24};
    // 1: a decode step; 6: four inputs through a repacked type's GEMM, two
    // through its GEMV.
    static const int ns[2] = {1, 6};

    fwrite("QMAT", 1, 4, stdout);
    put_u32(sizeof(types) / sizeof(types[0]) * 2 * 2);
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        for (int s = 0; s < 2; s++) {
            enum ggml_type t = types[ti].t;
            int r = rows[s], c = types[ti].cols[s];
            size_t wb = ggml_row_size(t, c) * r;
            uint8_t *w = malloc(wb);
            weights(t, w, r, c);
            for (int k = 0; k < 2; k++) {
                int n = ns[k];
                float *x = malloc(sizeof(float) * n * c), *y = malloc(sizeof(float) * n * r);
                for (int i = 0; i < n * c; i++) x[i] = gauss();
                x[(int)(uniform01() * n * c)] = 20; // an outlier, as activations have
                int repacked = matmul(t, w, r, c, x, n, y, types[ti].repack);
                put_u32(t); put_u32(r); put_u32(c); put_u32(n); put_u32(repacked);
                fwrite(w, 1, wb, stdout);
                fwrite(x, 4, n * c, stdout);
                fwrite(y, 4, n * r, stdout);
                free(x);
                free(y);
            }
            free(w);
        }
    }
    return 0;
}
