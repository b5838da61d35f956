package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mainOf runs Main with args and in as standard input, and returns its exit
// code and output; a panic fails the test rather than the whole binary.
func mainOf(t *testing.T, in io.Reader, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	if in != nil {
		old := stdin
		stdin = in
		defer func() { stdin = old }()
	}
	var out, errOut bytes.Buffer
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("%v: panic: %v", args, p)
			}
		}()
		code = Main(args, &out, &errOut)
	}()
	return code, out.String(), errOut.String()
}

// TestEveryInputBounded runs each command with flag values out of range,
// with a bad prompt file and with metadata of the wrong type. A bad flag
// value is a usage error (exit 2), a bad file a failed run (exit 1); either
// way one line on stderr that names the flag or the file, and no panic.
// Before these bounds, each of these ran out of memory, panicked, exited 1
// for a usage error, or ran as if nothing were wrong.
func TestEveryInputBounded(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "profile.yaml")
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	prompt := write("prompt.txt", []byte("Once upon a time"))
	latin1 := write("latin1.txt", []byte("Once upon a caf\xe9"))
	big := filepath.Join(dir, "big.txt")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, maxPromptBytes+1); err != nil { // sparse: no 16 MiB written
		t.Fatal(err)
	}
	headsF32 := rewrite(t, setKV("llama.attention.head_count", float32(8)), nil)
	ctxF32 := rewrite(t, setKV("llama.context_length", float32(2048)), nil)
	tokU32 := rewrite(t, setKV("tokenizer.ggml.model", uint32(1)), nil)
	bosStr := rewrite(t, setKV("tokenizer.ggml.bos_token_id", "one"), nil)
	archU32 := rewrite(t, setKV("general.architecture", uint32(1)), nil)

	for _, c := range []struct {
		name string
		args []string
		in   io.Reader // standard input, for --file -
		code int
		has  []string
	}{
		// The context: negative, past any bound (these two were an out-of-
		// memory and a makeslice panic), past the model's 2048 positions
		// without --ctx-override, past the hard limit with it.
		{"run ctx -1", []string{"run", "--ctx", "-1", "-n", "1"}, nil, 2, []string{"--ctx -1"}},
		{"run ctx 2^40", []string{"run", "--ctx", "1099511627776", "-n", "1"}, nil, 2, []string{"--ctx 1099511627776", "1048576"}},
		{"run ctx max int", []string{"run", "--ctx", "9223372036854775807", "-n", "1"}, nil, 2, []string{"--ctx 9223372036854775807"}},
		{"run ctx past the model's", []string{"run", "--ctx", "4096", "-n", "1"}, nil, 2, []string{"--ctx 4096", "2048", "--ctx-override"}},
		{"run ctx past the hard limit", []string{"run", "--ctx", "1048577", "--ctx-override", "-n", "1"}, nil, 2, []string{"--ctx 1048577", "1048576"}},
		{"plan ctx past the model's", []string{"plan", "--ctx", "3000"}, nil, 2, []string{"--ctx 3000", "2048"}},
		{"profile ctx -1", []string{"profile", "--ctx", "-1", "-o", prof}, nil, 2, []string{"--ctx -1"}},
		{"profile ctx past the model's", []string{"profile", "--ctx", "4096", "--steps", "1", "--prefill", "0", "--threads", "1", "-o", prof}, nil, 2, []string{"--ctx 4096", "2048"}},

		// Threads and CPU devices.
		{"run threads -5", []string{"run", "--threads", "-5", "-n", "1"}, nil, 2, []string{"--threads -5"}},
		{"run threads 1025", []string{"run", "--threads", "1025", "-n", "1"}, nil, 2, []string{"--threads 1025", "1024"}},
		{"run cpus -1", []string{"run", "--cpus", "-1", "-n", "1"}, nil, 2, []string{"--cpus -1"}},
		{"run cpus 17", []string{"run", "--cpus", "17", "-n", "1"}, nil, 2, []string{"--cpus 17", "16"}},
		{"plan threads -1", []string{"plan", "--threads", "-1"}, nil, 2, []string{"--threads -1"}},
		{"devices cpus 17", []string{"devices", "--cpus", "17"}, nil, 2, []string{"--cpus 17"}},
		{"devices threads 1025", []string{"devices", "--threads", "1025"}, nil, 2, []string{"--threads 1025"}},
		{"profile threads -2", []string{"profile", "--threads", "-2", "--steps", "1", "--prefill", "0", "-o", prof}, nil, 2, []string{"--threads -2"}},
		{"bench threads -1", []string{"bench", "--threads", "-1", "-p", "1", "-n", "1", "-r", "1"}, nil, 2, []string{"--threads -1"}},
		{"verify threads 1025", []string{"verify", "--threads", "1025", "--models", ""}, nil, 2, []string{"--threads 1025"}},
		{"verify n 0", []string{"verify", "-n", "0", "--models", ""}, nil, 2, []string{"-n 0"}},
		{"synth threads -1", []string{"synth", "--preset", "stories15m", "--threads", "-1", "-o", filepath.Join(dir, "s.gguf")}, nil, 2, []string{"--threads -1"}},

		// profile --steps 0 and -1 divided by zero.
		{"profile steps 0", []string{"profile", "--steps", "0", "-o", prof}, nil, 2, []string{"--steps 0"}},
		{"profile steps -1", []string{"profile", "--steps", "-1", "-o", prof}, nil, 2, []string{"--steps -1"}},
		{"profile steps 1001", []string{"profile", "--steps", "1001", "--prefill", "0", "--threads", "1", "-o", prof}, nil, 2, []string{"--steps 1001", "1000"}},
		{"profile prefill -1", []string{"profile", "--prefill", "-1", "--steps", "1", "--threads", "1", "-o", prof}, nil, 2, []string{"--prefill -1"}},

		// bench sizes: by the model's context, and the repetitions.
		{"bench p -1", []string{"bench", "-p", "-1", "-n", "1", "-r", "1"}, nil, 2, []string{"-p -1"}},
		{"bench ops without decode", []string{"bench", "-p", "1", "-n", "0", "-r", "1", "--ops"}, nil, 2, []string{"--ops", "-n"}},
		{"bench ops of two policies", []string{"bench", "-p", "1", "-n", "1", "-r", "1", "--ops", "--policies", "cpu-only,cpu-split"}, nil, 2, []string{"--ops takes one policy"}},
		{"bench n -1", []string{"bench", "-p", "1", "-n", "-1", "-r", "1"}, nil, 2, []string{"-n -1"}},
		{"bench p past the model's", []string{"bench", "-p", "4096", "-n", "0", "-r", "1", "--threads", "1"}, nil, 2, []string{"-p 4096", "2048"}},
		{"bench r 0", []string{"bench", "-p", "1", "-n", "1", "-r", "0"}, nil, 2, []string{"-r 0"}},
		{"bench ubatch past MaxBatch", []string{"bench", "-p", "1", "-n", "1", "-r", "1", "--ubatch", "513"}, nil, 2, []string{"--ubatch 513", "1..512"}},
		{"bench ubatch -2", []string{"bench", "-p", "1", "-n", "1", "-r", "1", "--ubatch", "-2"}, nil, 2, []string{"--ubatch -2"}},
		{"bench d with two policies", []string{"bench", "-p", "0", "-n", "1", "-d", "8", "-r", "1", "--policies", "auto,cpu-only"}, nil, 2, []string{"-d takes one policy"}},
		{"bench r 1001", []string{"bench", "-p", "1", "-n", "0", "-r", "1001", "--threads", "1"}, nil, 2, []string{"-r 1001", "1000"}},
		{"bench cpuprofile in a missing folder", []string{"bench", "-p", "1", "-n", "1", "-r", "1", "--threads", "1", "--cpuprofile", "/nonexistent/dir/x.prof"}, nil, 1, []string{"--cpuprofile"}},

		// membw: the buffer is allocated whole, so its size is bounded.
		{"membw size 5", []string{"membw", "--size", "5"}, nil, 2, []string{"--size 5", "64"}},
		{"membw size huge", []string{"membw", "--size", "1000000"}, nil, 2, []string{"--size 1000000"}},
		{"membw r 0", []string{"membw", "-r", "0"}, nil, 2, []string{"-r 0"}},
		{"membw threads -1", []string{"membw", "--threads", "-1"}, nil, 2, []string{"--threads -1"}},

		// Flags that do not go together, or values a flag does not take.
		{"run logits without json", []string{"run", "--logits", "-n", "1"}, nil, 2, []string{"--logits", "--json"}},
		{"run transfers", []string{"run", "--transfers", "sometimes", "-n", "1"}, nil, 2, []string{"--transfers", "sometimes"}},
		{"run n -1", []string{"run", "-n", "-1"}, nil, 2, []string{"-n -1"}},
		{"plan tokens 0", []string{"plan", "--tokens", "0"}, nil, 2, []string{"--tokens 0"}},
		{"bench json-out without policies", []string{"bench", "--json-out", filepath.Join(dir, "b.json")}, nil, 2, []string{"--json-out", "--policies"}},

		// The prompt from a file.
		{"run prompt and file", []string{"run", "--prompt", "hi", "--file", prompt, "-n", "1"}, nil, 2, []string{"--prompt", "--file", "use one"}},
		{"run file missing", []string{"run", "--file", filepath.Join(dir, "nope.txt"), "-n", "1"}, nil, 1, []string{"--file", "nope.txt", "no such file"}},
		{"run file a directory", []string{"run", "--file", dir, "-n", "1"}, nil, 1, []string{"--file " + dir, "a directory, not a regular file"}},
		{"run file too big", []string{"run", "--file", big, "-n", "1"}, nil, 1, []string{"--file " + big, "16777217 bytes", "16 MiB"}},
		{"run file not UTF-8", []string{"run", "--file", latin1, "-n", "1"}, nil, 1, []string{"--file " + latin1, "not valid UTF-8", "byte 15"}},
		{"run stdin too big", []string{"run", "--file", "-", "-n", "1"}, io.LimitReader(zeros{}, maxPromptBytes+1), 1, []string{"--file standard input", "16 MiB"}},
		{"run stdin not UTF-8", []string{"run", "--file", "-", "-n", "1"}, strings.NewReader("\xff"), 1, []string{"--file standard input", "not valid UTF-8", "byte 0"}},

		// Metadata of the wrong type: the type found and the type wanted,
		// not "missing" or a silent default; the file named once.
		{"head_count f32", []string{"run", "--model", headsF32, "-n", "1"}, nil, 1, []string{headsF32 + ": ", "llama.attention.head_count is float32, want an unsigned integer"}},
		{"context_length f32", []string{"run", "--model", ctxF32, "-n", "1"}, nil, 1, []string{ctxF32 + ": ", "llama.context_length is float32, want an unsigned integer"}},
		{"profile -o a directory", []string{"profile", "-o", dir}, nil, 1, []string{"-o: refusing to replace " + dir, "a directory"}},
		{"tokenizer model uint32", []string{"run", "--model", tokU32, "-n", "1"}, nil, 1, []string{tokU32 + ": ", "tokenizer.ggml.model is uint32, want string"}},
		{"bos id a string", []string{"run", "--model", bosStr, "-n", "1"}, nil, 1, []string{bosStr + ": ", "tokenizer.ggml.bos_token_id"}},
		{"architecture uint32", []string{"run", "--model", archU32, "-n", "1"}, nil, 1, []string{archU32 + ": ", "general.architecture is uint32, want string"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := mainOf(t, c.in, c.args...)
			if code != c.code {
				t.Fatalf("%v: exit %d, want %d; stderr: %s", c.args, code, c.code, stderr)
			}
			if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
				t.Fatalf("%v: stack trace on stderr:\n%s", c.args, stderr)
			}
			if n := strings.Count(strings.TrimRight(stderr, "\n"), "\n"); n != 0 || stderr == "" {
				t.Fatalf("%v: stderr is not one line:\n%s", c.args, stderr)
			}
			for _, h := range c.has {
				if !strings.Contains(stderr, h) {
					t.Errorf("%v: stderr %q does not mention %q", c.args, strings.TrimSpace(stderr), h)
				}
			}
			for _, h := range c.has {
				// A file's path at most once: the errors of one file
				// used to name it up to three times.
				if strings.HasSuffix(h, ".gguf: ") && strings.Count(stderr, strings.TrimSuffix(h, ": ")) != 1 {
					t.Errorf("%v: stderr names the file more than once: %s", c.args, stderr)
				}
			}
		})
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestPromptFromFile checks that --file and --file - give the prompt that
// --prompt would, and that --ctx-override allows a context past the model's.
func TestPromptFromFile(t *testing.T) {
	text := "Once upon a time, there was a cat"
	path := filepath.Join(t.TempDir(), "prompt.txt")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	type out struct {
		Prompt          string  `json:"prompt"`
		PromptTokens    []int32 `json:"prompt_tokens"`
		GeneratedTokens []int32 `json:"generated_tokens"`
		Context         int     `json:"context"`
	}
	run := func(in io.Reader, args ...string) out {
		t.Helper()
		args = append([]string{"run", "--temp", "0", "-n", "4", "--json", "--threads", "1"}, args...)
		code, stdout, stderr := mainOf(t, in, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var o out
		if err := json.Unmarshal([]byte(stdout), &o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	want := run(nil, "--prompt", text)
	for _, got := range []out{run(nil, "--file", path), run(strings.NewReader(text), "--file", "-")} {
		if got.Prompt != text || !equal(got.PromptTokens, want.PromptTokens) || !equal(got.GeneratedTokens, want.GeneratedTokens) {
			t.Errorf("from a file: %+v, from --prompt: %+v", got, want)
		}
	}
	if got := run(nil, "--ctx", "4096", "--ctx-override"); got.Context != 4096 {
		t.Errorf("--ctx 4096 --ctx-override ran with a context of %d", got.Context)
	}
}
