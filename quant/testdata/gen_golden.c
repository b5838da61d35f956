// gen_golden writes llamacpp.golden: llama.cpp's own quantizer and dequantizer
// outputs on fixed inputs, which golden_test.go checks this package against
// byte for byte. It is not part of the Go build. To regenerate, with a CPU
// build of llama.cpp at $LL (ggml-base built with its default, portable flags):
//
//   gcc -O2 -I$LL/ggml/include gen_golden.c -L$LL/build/bin -lggml-base -lm -o /tmp/gen_golden
//   LD_LIBRARY_PATH=$LL/build/bin /tmp/gen_golden > llamacpp.golden && gzip -9nf llamacpp.golden
//
// Layout (little-endian): "QGLD", u32 set count, then per input set: u32 name
// length, name, u32 element count, f32 values. Then u32 record count, and per
// record u32 type, u32 op, and
//   op 0 (quantize a set):       u32 set, u32 byte count, the blocks;
//   op 1 (dequantize op 0's):    u32 set, u64 FNV-1a of the f32 output bytes;
//   op 2 (dequantize raw bytes): u32 element count, u32 byte count, the bytes,
//                                the f32 output.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"

static uint64_t rng_state;

static uint64_t splitmix64(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform01(void) { return (splitmix64() >> 11) * 0x1.0p-53; }

static void put_u32(uint32_t v) { fwrite(&v, 4, 1, stdout); }

static void put_u64(uint64_t v) { fwrite(&v, 8, 1, stdout); }

static uint64_t fnv1a(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static const enum ggml_type types[] = {
    GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
    GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
    // Added later, after the others so that their random blocks stay the same.
    GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS,
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

#define N 2048

int main(void) {
    static float sets[6][N];
    static const char *names[6] = {"cos", "gauss", "uniform-scaled", "edge", "float-specials", "subblock-edge"};
    const int nsets = 6;

    // cos: test-quantize-fns.cpp's generate_data(0, n).
    for (int i = 0; i < N; i++) sets[0][i] = 0.1 + 2.0f * cosf(i + 0.0f);
    // gauss: Box-Muller from splitmix64, sigma 1.
    rng_state = 1;
    for (int i = 0; i < N; i++) {
        double u1 = uniform01() + 0x1.0p-60, u2 = uniform01();
        sets[1][i] = (float)(sqrt(-2 * log(u1)) * cos(2 * M_PI * u2));
    }
    // uniform-scaled: uniform in [-1, 1) times a per-256 scale from 1e-6 to 1e4,
    // exercising f16 subnormal and large block scales.
    for (int i = 0; i < N; i++) {
        double scale = pow(10.0, -6 + (i / 256) * 10.0 / 15);
        sets[2][i] = (float)((2 * uniform01() - 1) * scale);
    }
    // edge: crafted super-blocks of 256.
    for (int b = 0; b < N / 256; b++) {
        float *x = sets[3] + 256 * b;
        for (int i = 0; i < 256; i++) {
            float g = (float)(2 * uniform01() - 1);
            switch (b) {
            case 0: x[i] = 0; break;                                  // all zero
            case 1: x[i] = (i == 77) ? 1e4f : 0.01f * g; break;         // one huge value
            case 2: x[i] = (i % 32 == 5) ? -3.0f : (i % 64 < 32) ? g : ((float)(i % 17) - 8.5f) * 0.25f; break; // negative maxima, ties
            case 3: x[i] = 0.75f; break;                                // constant positive
            case 4: x[i] = -0.75f; break;                               // constant negative
            case 5: x[i] = 1e-20f * g; break;                           // below GROUP_MAX_EPS scale
            case 6: x[i] = (i % 32 < 16) ? 60000.0f * g : (float)(i % 16) - 8.0f; break; // near the f16 limit, exact Q4 levels
            default: x[i] = 1e-7f * g; break;                           // f16-subnormal scales
            }
        }
    }
    // float-specials: values for F16/BF16 rounding (quantized types skip this set).
    {
        float *x = sets[4];
        int k = 0;
        const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 65504.0f, 65519.99f, 65520.0f, 65536.0f,
                            1e-8f, 2.98e-8f, 2.9802322e-8f, 5.96e-8f, 6.1035156e-5f, 6.1e-5f, 1e-40f, -1e-45f,
                            3.4028235e38f, 1.0009765625f, 1.00048828125f, 1.00146484375f};
        for (unsigned j = 0; j < sizeof(sp) / sizeof(sp[0]); j++) x[k++] = sp[j];
        for (; k < N; k++) {
            uint32_t bits = (uint32_t)splitmix64();
            if (k % 2) bits = (bits & 0x87FFFFFF) | 0x30000000; // near the f16 range
            memcpy(&x[k], &bits, 4);
        }
    }
    // subblock-edge: cases that the 16- and 32-element sub-blocks of Q2_K,
    // Q3_K and the IQ4 types meet, from a stream of its own so that the
    // random blocks below stay as they were before it was added.
    {
        uint64_t saved = rng_state;
        rng_state = 0x5eed;
        static const float iq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
        for (int b = 0; b < N / 256; b++) {
            float *x = sets[5] + 256 * b;
            for (int i = 0; i < 256; i++) {
                float g = (float)(2 * uniform01() - 1);
                switch (b) {
                case 0: // one kind of sub-block of 16 after another
                    switch ((i / 16) % 8) {
                    case 0: x[i] = 0; break;                                // zero
                    case 1: x[i] = g; break;
                    case 2: x[i] = 0.5f + fabsf(g); break;                  // all positive: min clamps to 0
                    case 3: x[i] = -0.5f - fabsf(g); break;                 // all negative
                    case 4: x[i] = 0.3f; break;                             // constant
                    case 5: x[i] = 1e-3f * g; break;                        // scale rounds to 0
                    case 6: x[i] = (i % 16 == 3) ? 20.0f : g; break;        // outlier
                    default: x[i] = (float)(i % 4 - 2) * 0.5f; break;       // exact levels
                    }
                    break;
                case 1: x[i] = (i == 200) ? 1e4f : 1e-3f * g; break;      // one huge value
                case 2: x[i] = ((i / 32) % 2) ? g : 0.0f; break;          // zero blocks of 32
                case 3: x[i] = (i % 32 == 9) ? -3.0f : 0.01f * (float)(i % 32); break; // negative maxima
                case 4: x[i] = 60000.0f * g; break;                         // near the f16 limit
                case 5: x[i] = 1e-5f * g; break;                            // f16-subnormal scales
                case 6: x[i] = iq4[(i * 5) % 16] * 0.01f * (float)(1 + i / 32); break; // IQ4 levels exactly
                default: x[i] = (i < 128) ? -1000.0f : 1000.0f + 0.25f * (float)(i % 4); break; // large constant
                }
            }
        }
        rng_state = saved;
    }

    fwrite("QGLD", 1, 4, stdout);
    put_u32(nsets);
    for (int si = 0; si < nsets; si++) {
        put_u32((uint32_t)strlen(names[si]));
        fwrite(names[si], 1, strlen(names[si]), stdout);
        put_u32(N);
        fwrite(sets[si], 4, N, stdout);
    }
    long count_pos = ftell(stdout);
    uint32_t count = 0;
    put_u32(0);

    static uint8_t q[4 * N];
    static float y[N];
    for (unsigned ti = 0; ti < NTYPES; ti++) {
        enum ggml_type t = types[ti];
        const struct ggml_type_traits *tr = ggml_get_type_traits(t);
        size_t bytes = ggml_row_size(t, N);
        for (int si = 0; si < nsets; si++) {
            if (si == 4 && t != GGML_TYPE_F16 && t != GGML_TYPE_BF16) continue;
            ggml_quantize_chunk(t, sets[si], q, 0, 1, N, NULL);
            put_u32(t); put_u32(0); put_u32(si); put_u32((uint32_t)bytes);
            fwrite(q, 1, bytes, stdout);
            count++;
            if (si == 4) continue;
            tr->to_float(q, y, N);
            put_u32(t); put_u32(1); put_u32(si); put_u64(fnv1a(y, sizeof(y)));
            count++;
        }
        // Random blocks with finite f16 scales: every quant bit pattern.
        for (size_t i = 0; i < bytes; i++) q[i] = (uint8_t)splitmix64();
        size_t bb = tr->type_size;
        int fields[2] = {-1, -1};
        switch (t) {
        case GGML_TYPE_Q4_0: case GGML_TYPE_Q5_0: case GGML_TYPE_Q8_0: fields[0] = 0; break;
        case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_1: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K:
            fields[0] = 0; fields[1] = 2; break;
        case GGML_TYPE_Q6_K: fields[0] = 208; break;
        case GGML_TYPE_Q2_K: fields[0] = 80; fields[1] = 82; break;
        case GGML_TYPE_Q3_K: fields[0] = 108; break;
        case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ4_XS: fields[0] = 0; break;
        default: break;
        }
        for (size_t b = 0; b + bb <= bytes; b += bb) {
            for (int f = 0; f < 2; f++) {
                if (fields[f] < 0) continue;
                uint8_t *hi = q + b + fields[f] + 1;
                if ((*hi & 0x7C) == 0x7C) *hi &= ~0x40; // exponent 31 -> 15
            }
        }
        if (t == GGML_TYPE_F16 || t == GGML_TYPE_BF16) {
            // Keep NaNs out: their payloads are tested separately.
            for (size_t i = 0; i < bytes; i += 2) {
                if (t == GGML_TYPE_F16 && (q[i + 1] & 0x7C) == 0x7C) q[i + 1] &= ~0x40;
                if (t == GGML_TYPE_BF16 && (q[i + 1] & 0x7F) == 0x7F && (q[i] & 0x80)) q[i + 1] &= ~0x40;
            }
        }
        tr->to_float(q, y, N);
        put_u32(t); put_u32(2); put_u32(N); put_u32((uint32_t)bytes);
        fwrite(q, 1, bytes, stdout);
        fwrite(y, 4, N, stdout);
        count++;
    }
    fseek(stdout, count_pos, SEEK_SET);
    put_u32(count);
    return 0;
}
