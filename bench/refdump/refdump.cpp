// refdump: llama.cpp's greedy run of a GGUF model on a prompt, written as the
// reference JSON that hybrid's tests compare against (the format of
// ../shared/models/reference: prompt, prompt_tokens, steps with id, logit,
// second, second_logit, and the first step's whole logits).
//
// Built against libllama by bench/refdump/build.sh; used by bench/crosscheck.sh
// on synthetic models. Not part of the Go build or the tests.
//
//   refdump MODEL PROMPT [N] [THREADS] [CTX] [FA=auto|on|off] > ref.json
#include "llama.h"

#include <cmath>
#include <cstring>
#include <cstdint>
#include "ggml.h"
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

static void quiet(enum ggml_log_level, const char *, void *) {}

// REFDUMP_TENSORS=1 prints every graph tensor's name and f32 values (hex bits)
// to stderr, for finding the first op where two implementations part.
static bool dump(struct ggml_tensor * t, bool ask, void *) {
    if (ask) return t->type == GGML_TYPE_F32;
    const float * d = (const float *) t->data;
    long n = ggml_nelements(t);
    fprintf(stderr, "T %s %ld", t->name, n);
    for (long i = 0; i < n; i++) { uint32_t u; memcpy(&u, d + i, 4); fprintf(stderr, " %08x", u); }
    fprintf(stderr, "\n");
    return true;
}

static void json_string(const std::string & s) {
    putchar('"');
    for (unsigned char c : s) {
        switch (c) {
            case '"': fputs("\\\"", stdout); break;
            case '\\': fputs("\\\\", stdout); break;
            case '\n': fputs("\\n", stdout); break;
            default:
                if (c < 0x20) printf("\\u%04x", c); else putchar(c);
        }
    }
    putchar('"');
}

int main(int argc, char ** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: refdump MODEL PROMPT [N=32] [THREADS=1] [CTX=1024] [FA=auto|on|off]\n");
        return 2;
    }
    const char * path = argv[1];
    std::string prompt = argv[2];
    int n_gen = argc > 3 ? atoi(argv[3]) : 32;
    int threads = argc > 4 ? atoi(argv[4]) : 1;
    int n_ctx = argc > 5 ? atoi(argv[5]) : 1024;
    std::string fa = argc > 6 ? argv[6] : "auto";

    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    // REFDUMP_NO_REPACK=1 keeps weights in their file layout (no CPU repack).
    if (getenv("REFDUMP_NO_REPACK")) mp.use_extra_bufts = false;
    llama_model * model = llama_model_load_from_file(path, mp);
    if (!model) { fprintf(stderr, "refdump: cannot load %s\n", path); return 1; }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx;
    // REFDUMP_UBATCH=N splits the prompt into micro-batches of N tokens.
    if (const char * ub = getenv("REFDUMP_UBATCH")) cp.n_ubatch = atoi(ub);
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.flash_attn_type = fa == "on" ? LLAMA_FLASH_ATTN_TYPE_ENABLED : fa == "off" ? LLAMA_FLASH_ATTN_TYPE_DISABLED : LLAMA_FLASH_ATTN_TYPE_AUTO;
    if (getenv("REFDUMP_TENSORS")) { cp.cb_eval = dump; cp.cb_eval_user_data = nullptr; }
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "refdump: cannot make a context\n"); return 1; }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    std::vector<llama_token> toks(prompt.size() + 8);
    int n = llama_tokenize(vocab, prompt.c_str(), prompt.size(), toks.data(), toks.size(), true, false);
    if (n < 0) { fprintf(stderr, "refdump: tokenize failed\n"); return 1; }
    toks.resize(n);

    printf("{\"prompt\":");
    json_string(prompt);
    printf(",\"prompt_tokens\":[");
    for (int i = 0; i < n; i++) printf(i ? ",%d" : "%d", toks[i]);
    printf("],\"steps\":[");

    llama_batch batch = llama_batch_get_one(toks.data(), n);
    llama_token next;
    for (int step = 0; step < n_gen; step++) {
        if (llama_decode(ctx, batch) != 0) { fprintf(stderr, "refdump: decode failed\n"); return 1; }
        const float * lg = llama_get_logits_ith(ctx, -1);
        int best = 0, second = -1;
        for (int i = 1; i < n_vocab; i++) {
            if (lg[i] > lg[best]) { second = best; best = i; }
            else if (second < 0 || lg[i] > lg[second]) second = i;
        }
        printf("%s{\"id\":%d,\"logit\":%.9g,\"second\":%d,\"second_logit\":%.9g", step ? "," : "", best, lg[best], second, lg[second]);
        if (step == 0) {
            printf(",\"logits\":[");
            for (int i = 0; i < n_vocab; i++) printf(i ? ",%.9g" : "%.9g", lg[i]);
            printf("]");
        }
        printf("}");
        if (llama_vocab_is_eog(vocab, best)) break;
        next = best;
        batch = llama_batch_get_one(&next, 1);
    }
    printf("]}\n");
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
