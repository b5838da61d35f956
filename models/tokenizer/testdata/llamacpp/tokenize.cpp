// tokenize.cpp asks llama.cpp's own tokenizer (libllama) for the ids and
// pieces this package's BPE tests compare against. It is not part of the Go
// build; build it against a llama.cpp checkout and its build directory:
//
//	L=~/.cache/hybrid-llamacpp/llama.cpp
//	g++ -O2 -std=c++17 -I$L/include -I$L/ggml/include tokenize.cpp \
//	    -L$L/build/bin -lllama -lggml -lggml-base -Wl,-rpath,$L/build/bin -o llamacpp-tokenize
//
// Usage:
//
//	llamacpp-tokenize VOCAB.gguf [--add-special] [--parse-special] < cases
//	llamacpp-tokenize VOCAB.gguf --info
//	llamacpp-tokenize VOCAB.gguf --special
//	llamacpp-tokenize VOCAB.gguf --map-order
//
// The first form reads cases from standard input, each framed as its length
// in bytes in decimal, a newline, the raw bytes and a newline (so any bytes,
// newlines and invalid UTF-8 included, travel unchanged), and prints one line
// per case: the ids llama_tokenize returns, separated by spaces, or
// "ERROR what" if llama.cpp threw.
//
// The second form prints the vocabulary as llama.cpp sees it after loading:
// a header line "bos B eos E eot T add_bos 0|1 add_eos 0|1", then one line per
// token: "id attr eog piece piece_special" with both pieces in hex ("-" when
// empty), from llama_token_to_piece with special false and true.
//
// The third form prints the special ids llama.cpp chose, one "name id" a
// line (bos, eos, eot, fim_pre, fim_suf, fim_mid, fim_pad, fim_rep,
// fim_sep; -1 for none), then "eog" and the ids llama_vocab_is_eog holds
// for, in increasing order.
//
// The fourth prints the token ids, one a line, in the order a
// std::unordered_map<std::string, llama_token> filled as llama.cpp fills
// its token_to_id (token_to_id[text] = id, for id 0, 1, ...) iterates them
// with the C++ library this program is built with: the order in which
// llama.cpp's load meets tokens when it looks for special tokens by text.
//
// The file is loaded with vocab_only, as llama-tokenize does: no weights.
#include "llama.h"

#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <unordered_map>
#include <vector>

static void quiet(ggml_log_level, const char *, void *) {}

static std::string piece(const llama_vocab * vocab, llama_token id, bool special) {
    std::vector<char> buf(64);
    int n = llama_token_to_piece(vocab, id, buf.data(), (int) buf.size(), 0, special);
    if (n < 0) {
        buf.resize(-n);
        n = llama_token_to_piece(vocab, id, buf.data(), (int) buf.size(), 0, special);
    }
    return std::string(buf.data(), n);
}

static std::string hex(const std::string & s) {
    if (s.empty()) {
        return "-";
    }
    std::string out;
    char b[3];
    for (unsigned char c : s) {
        snprintf(b, sizeof b, "%02x", c);
        out += b;
    }
    return out;
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s VOCAB.gguf [--add-special] [--parse-special] | --info | --special | --map-order\n", argv[0]);
        return 2;
    }
    bool add_special = false, parse_special = false, info = false, special = false, map_order = false;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--add-special")) {
            add_special = true;
        } else if (!strcmp(argv[i], "--parse-special")) {
            parse_special = true;
        } else if (!strcmp(argv[i], "--info")) {
            info = true;
        } else if (!strcmp(argv[i], "--special")) {
            special = true;
        } else if (!strcmp(argv[i], "--map-order")) {
            map_order = true;
        } else {
            fprintf(stderr, "unknown flag %s\n", argv[i]);
            return 2;
        }
    }
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);

    if (info) {
        printf("bos %d eos %d eot %d add_bos %d add_eos %d\n", llama_vocab_bos(vocab), llama_vocab_eos(vocab),
               llama_vocab_eot(vocab), llama_vocab_get_add_bos(vocab), llama_vocab_get_add_eos(vocab));
        const int n = llama_vocab_n_tokens(vocab);
        for (int id = 0; id < n; id++) {
            printf("%d %d %d %s %s\n", id, (int) llama_vocab_get_attr(vocab, id), llama_vocab_is_eog(vocab, id),
                   hex(piece(vocab, id, false)).c_str(), hex(piece(vocab, id, true)).c_str());
        }
        llama_model_free(model);
        return 0;
    }

    if (special) {
        const std::pair<const char *, llama_token> ids[] = {
            {"bos", llama_vocab_bos(vocab)},         {"eos", llama_vocab_eos(vocab)},
            {"eot", llama_vocab_eot(vocab)},         {"fim_pre", llama_vocab_fim_pre(vocab)},
            {"fim_suf", llama_vocab_fim_suf(vocab)}, {"fim_mid", llama_vocab_fim_mid(vocab)},
            {"fim_pad", llama_vocab_fim_pad(vocab)}, {"fim_rep", llama_vocab_fim_rep(vocab)},
            {"fim_sep", llama_vocab_fim_sep(vocab)},
        };
        for (const auto & id : ids) {
            printf("%s %d\n", id.first, id.second);
        }
        printf("eog");
        for (int id = 0; id < llama_vocab_n_tokens(vocab); id++) {
            if (llama_vocab_is_eog(vocab, id)) {
                printf(" %d", id);
            }
        }
        printf("\n");
        llama_model_free(model);
        return 0;
    }

    if (map_order) {
        std::unordered_map<std::string, llama_token> token_to_id;
        for (int id = 0; id < llama_vocab_n_tokens(vocab); id++) {
            token_to_id[llama_vocab_get_text(vocab, id)] = id;
        }
        for (const auto & t : token_to_id) {
            printf("%d\n", t.second);
        }
        llama_model_free(model);
        return 0;
    }

    std::string line;
    while (std::getline(std::cin, line)) {
        if (line.empty()) {
            continue;
        }
        const size_t len = std::stoul(line);
        std::string text(len, '\0');
        std::cin.read(&text[0], (std::streamsize) len);
        std::cin.get(); // the newline after the bytes
        try {
            std::vector<llama_token> ids(len + 8);
            int n = llama_tokenize(vocab, text.data(), (int) len, ids.data(), (int) ids.size(), add_special, parse_special);
            if (n < 0) {
                ids.resize(-n);
                n = llama_tokenize(vocab, text.data(), (int) len, ids.data(), (int) ids.size(), add_special, parse_special);
            }
            for (int i = 0; i < n; i++) {
                printf(i ? " %d" : "%d", ids[i]);
            }
            printf("\n");
        } catch (const std::exception & e) {
            printf("ERROR %s\n", e.what());
        }
        fflush(stdout);
    }
    llama_model_free(model);
    return 0;
}
