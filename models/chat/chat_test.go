package chat

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hybrid/internal/testmodels"
)

var update = flag.Bool("update", false, "regenerate testdata/golden with llama.cpp ($LLAMACPP_DIR, default ~/.cache/hybrid-llamacpp/llama.cpp)")

// fixedNow is the clock of every golden render; testdata/llamacpp_render.cpp
// pins llama.cpp's clock to the same instant.
var fixedNow = time.Date(2024, 7, 26, 12, 0, 0, 0, time.UTC)

// dateString pins the date_string and datetime variables llama.cpp always
// defines (from its clock, which the kwargs override).
const dateString = "26 Jul 2024"

// templates are the real templates in ../shared/models/templates, with the
// BOS and EOS token text of their models, and "chatml": the default of a
// model without a template (ChatML here, llama.cpp's "chatml" there).
var templates = []struct{ name, bos, eos string }{
	{"chatml", "", ""},
	{"HuggingFaceTB-SmolLM3-3B", "", "<|im_end|>"},
	{"Qwen-Qwen2.5-7B-Instruct", "", "<|im_end|>"},
	{"Qwen-Qwen3-0.6B", "", "<|im_end|>"},
	{"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"},
	{"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"},
	{"google-gemma-2-2b-it", "<bos>", "<eos>"},
	{"ibm-granite-granite-3.3-2B-Instruct", "", "<|end_of_text|>"},
	{"meta-llama-Llama-3.1-8B-Instruct", "<|begin_of_text|>", "<|eot_id|>"},
	{"meta-llama-Llama-3.2-3B-Instruct", "<|begin_of_text|>", "<|eot_id|>"},
	{"microsoft-Phi-3.5-mini-instruct", "<s>", "<|endoftext|>"},
	{"mistralai-Mistral-Nemo-Instruct-2407", "<s>", "</s>"},
	{"unsloth-mistral-Devstral-Small-2507", "<s>", "</s>"},
}

var conversations = []struct {
	name string
	msgs []Message
}{
	{"system-user", []Message{{"system", "You are terse."}, {"user", "Hello!"}}},
	{"user", []Message{{"user", "What is 2+2?"}}},
	{"multi-turn", []Message{
		{"user", "Hi there"}, {"assistant", "Hello! How can I help?"}, {"user", "What is 2+2?"}}},
	{"system-multi-turn", []Message{
		{"system", "Answer in French."}, {"user", "Hi"}, {"assistant", "Bonjour !"},
		{"user", "  Spaces \n around\n"}}},
	{"reasoning", []Message{
		{"user", "Why?"}, {"assistant", "<think>\nBecause.\n</think>\n\nIt is so."}, {"user", "Thanks"}}},
	{"assistant-first", []Message{{"assistant", "I start."}, {"user", "Hi"}}},
}

func goldenOptions(bos, eos string, gen bool) Options {
	return Options{
		AddGenerationPrompt: gen,
		BOSToken:            bos,
		EOSToken:            eos,
		Now:                 func() time.Time { return fixedNow },
		// What llama.cpp's server always passes (see llamacpp_render.cpp).
		Extra: map[string]any{"date_string": dateString, "datetime": dateString, "enable_thinking": true},
	}
}

// TestGolden renders every template for every conversation, with and without
// the generation prompt, and compares with llama.cpp's rendering byte for
// byte. A .err golden holds llama.cpp's error; then Render must fail too,
// with the same raise_exception message.
func TestGolden(t *testing.T) {
	dir := filepath.Join(testmodels.Dir(t), "templates")
	var render string
	if *update {
		render = buildLlamaCpp(t)
	}
	for _, tc := range templates {
		path := filepath.Join(dir, tc.name+".jinja")
		if tc.name == "chatml" {
			path = filepath.Join(t.TempDir(), "chatml")
			if err := os.WriteFile(path, []byte("chatml"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		src, err := os.ReadFile(path)
		if err != nil {
			testmodels.Missing(t, err.Error())
		}
		if tc.name == "chatml" {
			src = []byte(ChatML)
		}
		tmpl, err := Parse(string(src))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		for _, conv := range conversations {
			for _, gen := range []bool{true, false} {
				name := fmt.Sprintf("%s/%s-gen=%v", tc.name, conv.name, gen)
				base := filepath.Join("testdata", "golden", tc.name, fmt.Sprintf("%s-gen=%v", conv.name, gen))
				if render != "" {
					regenerate(t, render, path, base, tc.bos, tc.eos, gen, conv.msgs)
				}
				t.Run(name, func(t *testing.T) {
					got, err := tmpl.Render(conv.msgs, goldenOptions(tc.bos, tc.eos, gen))
					if want, rerr := os.ReadFile(base + ".err"); rerr == nil {
						var re *RaiseError
						if !errors.As(err, &re) {
							t.Fatalf("llama.cpp failed (%s), we rendered %q, err %v", want, got, err)
						}
						if !strings.Contains(string(want), "Jinja Exception: "+re.Message) {
							t.Errorf("raised %q, llama.cpp: %s", re.Message, want)
						}
						return
					}
					want, rerr := os.ReadFile(base + ".txt")
					if rerr != nil {
						t.Fatalf("no golden: %v (run go test -update with llama.cpp)", rerr)
					}
					if err != nil {
						t.Fatalf("llama.cpp rendered %q, we failed: %v", want, err)
					}
					if got != string(want) {
						t.Errorf("differs from llama.cpp\n got: %q\nwant: %q", got, want)
					}
				})
			}
		}
	}
}

// buildLlamaCpp compiles testdata/llamacpp_render.cpp against llama.cpp's
// common library, or skips the regeneration (not the comparison) when
// llama.cpp or a C++ compiler is absent.
func buildLlamaCpp(t *testing.T) string {
	t.Helper()
	root := os.Getenv("LLAMACPP_DIR")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".cache", "hybrid-llamacpp", "llama.cpp")
	}
	lib := filepath.Join(root, "build", "bin")
	if _, err := os.Stat(filepath.Join(lib, "libllama-common.so")); err != nil {
		t.Logf("-update: no llama.cpp build at %s (%v): comparing with the goldens as they are", root, err)
		return ""
	}
	bin := filepath.Join(t.TempDir(), "llamacpp_render")
	cmd := exec.Command("g++", "-std=c++17", "-O1", "-o", bin, filepath.Join("testdata", "llamacpp_render.cpp"),
		"-I"+filepath.Join(root, "common"), "-I"+filepath.Join(root, "include"),
		"-I"+filepath.Join(root, "ggml", "include"), "-I"+filepath.Join(root, "vendor"),
		"-L"+lib, "-lllama-common", "-lllama", "-lggml", "-lggml-base", "-Wl,-rpath,"+lib)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Logf("-update: cannot build llamacpp_render (%v): %s; comparing with the goldens as they are", err, out)
		return ""
	}
	return bin
}

func regenerate(t *testing.T, bin, tmplPath, base, bos, eos string, gen bool, msgs []Message) {
	t.Helper()
	args := []string{tmplPath, bos, eos, "0", dateString}
	if gen {
		args[3] = "1"
	}
	for _, m := range msgs {
		args = append(args, m.Role, m.Content)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Remove(base + ".txt")
	os.Remove(base + ".err")
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		// llama.cpp logs before the error; keep the last line, its message.
		lines := strings.Split(msg, "\n")
		msg = lines[len(lines)-1]
		if err := os.WriteFile(base+".err", []byte(msg+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.WriteFile(base+".txt", out, 0o644); err != nil {
		t.Fatal(err)
	}
}
