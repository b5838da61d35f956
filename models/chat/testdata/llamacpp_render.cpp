// llamacpp_render renders a chat template the way llama.cpp's server does
// (common_chat_templates_init + common_chat_templates_apply, use_jinja) and
// prints the prompt to stdout. chat_test.go builds and runs it with -update.
//
// usage: TZ=UTC llamacpp_render TEMPLATE_FILE BOS EOS ADD_GEN_PROMPT(0|1) DATE_STRING [ROLE CONTENT]...
#include "chat.h"

#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>

// The clock strftime_now reads in llama.cpp's jinja (std::time): pinned to
// 2024-07-26 12:00:00 UTC, the Now of chat_test.go. This definition
// interposes libc's time() for libllama-common.so too. Run with TZ=UTC.
extern "C" time_t time(time_t * t) {
    const time_t fixed = 1721995200;
    if (t) {
        *t = fixed;
    }
    return fixed;
}

int main(int argc, char ** argv) {
    if (argc < 6 || (argc - 6) % 2 != 0) {
        std::fprintf(stderr, "usage: %s TEMPLATE BOS EOS ADD_GEN_PROMPT DATE_STRING [ROLE CONTENT]...\n", argv[0]);
        return 2;
    }
    std::ifstream     f(argv[1], std::ios::binary);
    std::stringstream src;
    src << f.rdbuf();
    try {
        auto tmpls = common_chat_templates_init(nullptr, src.str(), argv[2], argv[3]);
        common_chat_templates_inputs in;
        in.use_jinja             = true;
        in.add_generation_prompt = std::string(argv[4]) == "1";
        // llama.cpp always defines date_string and datetime from the clock; pin them.
        in.chat_template_kwargs["date_string"] = std::string("\"") + argv[5] + "\"";
        in.chat_template_kwargs["datetime"]    = std::string("\"") + argv[5] + "\"";
        for (int i = 6; i + 1 < argc; i += 2) {
            common_chat_msg m;
            m.role    = argv[i];
            m.content = argv[i + 1];
            in.messages.push_back(m);
        }
        auto out = common_chat_templates_apply(tmpls.get(), in);
        std::fwrite(out.prompt.data(), 1, out.prompt.size(), stdout);
    } catch (const std::exception & e) {
        std::fprintf(stderr, "llamacpp_render: %s\n", e.what());
        return 1;
    }
    return 0;
}
