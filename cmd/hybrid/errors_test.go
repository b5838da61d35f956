package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hybrid/models/builtin"
	"hybrid/models/gguf"
)

// oneLineError checks that the command failed with exit code want and printed
// exactly one line to stderr that contains every string in has, and no
// stack trace.
func oneLineError(t *testing.T, args []string, want int, has ...string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main(args, &stdout, &stderr)
	msg := stderr.String()
	if code != want {
		t.Fatalf("%v: exit %d, want %d; stderr: %s", args, code, want, msg)
	}
	if strings.Contains(msg, "goroutine ") || strings.Contains(msg, "panic") {
		t.Fatalf("%v: stack trace on stderr:\n%s", args, msg)
	}
	if want == 1 && strings.Count(strings.TrimRight(msg, "\n"), "\n") != 0 {
		t.Fatalf("%v: error is not one line:\n%s", args, msg)
	}
	for _, h := range has {
		if !strings.Contains(msg, h) {
			t.Fatalf("%v: error %q does not mention %q", args, strings.TrimSpace(msg), h)
		}
	}
}

// TestBadGGUFFilesFailCleanly runs `hybrid run` on every hand-made bad file of
// the GGUF reader's corpus: each must fail with exit code 1 and one line that
// names the file.
func TestBadGGUFFilesFailCleanly(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "models", "gguf", "testdata", "bad", "*.gguf"))
	if err != nil || len(files) < 40 {
		t.Fatalf("bad-file corpus missing (%d files): %v", len(files), err)
	}
	seen := map[string]string{}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			oneLineError(t, []string{"run", "--model", f, "-n", "1"}, 1, filepath.Base(f))
			var stderr bytes.Buffer
			Main([]string{"run", "--model", f, "-n", "1"}, &bytes.Buffer{}, &stderr)
			// Each file gets its own error, not one generic message.
			msg := strings.ReplaceAll(stderr.String(), filepath.Base(f), "FILE")
			if other, dup := seen[msg]; dup {
				t.Errorf("same error as %s: %s", other, msg)
			}
			seen[msg] = filepath.Base(f)
		})
	}
}

// rewrite writes the built-in model with its metadata changed by edit and
// the tensors kept by keep, and returns the new file's path.
func rewrite(t *testing.T, edit func([]gguf.KV) []gguf.KV, keep func(string) bool) string {
	t.Helper()
	f, err := gguf.Parse(builtin.Model(), builtin.Name)
	if err != nil {
		t.Fatal(err)
	}
	var infos []gguf.TensorInfo
	var datas [][]byte
	for i := range f.Tensors {
		ti := f.Tensors[i]
		if keep != nil && !keep(ti.Name) {
			continue
		}
		infos = append(infos, ti)
		datas = append(datas, f.TensorData(&f.Tensors[i]))
	}
	kvs := append([]gguf.KV(nil), f.KV...)
	if edit != nil {
		kvs = edit(kvs)
	}
	path := filepath.Join(t.TempDir(), "model.gguf")
	w, err := gguf.Create(path, kvs, infos)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range datas {
		if err := w.WriteTensor(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func setKV(key string, v any) func([]gguf.KV) []gguf.KV {
	return func(kvs []gguf.KV) []gguf.KV {
		for i := range kvs {
			if kvs[i].Key == key {
				kvs[i].Value = v
			}
		}
		return kvs
	}
}

// TestBadModelsAndArgumentsFailCleanly covers valid GGUF files that are not
// models hybrid can run, and bad command lines.
func TestBadModelsAndArgumentsFailCleanly(t *testing.T) {
	gpt2 := rewrite(t, setKV("tokenizer.ggml.model", "gpt2"), nil)
	oneLineError(t, []string{"run", "--model", gpt2}, 1, "gpt2", "tokenizer.ggml.model")

	falcon := rewrite(t, setKV("general.architecture", "falcon"), nil)
	oneLineError(t, []string{"run", "--model", falcon}, 1, "falcon", "general.architecture")

	noFFN := rewrite(t, nil, func(name string) bool { return name != "blk.2.ffn_down.weight" })
	oneLineError(t, []string{"run", "--model", noFFN}, 1, "blk.2.ffn_down.weight")

	missing := filepath.Join(t.TempDir(), "nope.gguf")
	oneLineError(t, []string{"run", "--model", missing}, 1, "nope.gguf")

	long := strings.Repeat("Once upon a time, ", 200)
	oneLineError(t, []string{"run", "--prompt", long, "--ctx", "64"}, 1, "context")

	oneLineError(t, []string{"run", "--no-such-flag"}, 2)
	oneLineError(t, []string{"run", "--temp", "-1"}, 1, "temperature")
	out := filepath.Join(t.TempDir(), "x.gguf")
	oneLineError(t, []string{"synth", "--preset", "gpt-5", "-o", out}, 1, "gpt-5")
	oneLineError(t, []string{"synth", "--preset", "stories15m", "--type", "Q3_K_L", "-o", out}, 1, "Q3_K_L")
	oneLineError(t, []string{"frobnicate"}, 2)
	if _, err := os.Stat(out); err == nil {
		t.Fatal("a failed synth left a file")
	}
}
