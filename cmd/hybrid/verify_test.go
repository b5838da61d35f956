package main

import (
	"hybrid/internal/testmodels"

	"bytes"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
)

// TestVerifyOnCPU runs `hybrid verify` on Linux the way a Mac user runs it
// for Metal, with a second CPU device in its place: every op check, then
// greedy generation on every shared model under cpu-split (two real CPU
// devices), and under auto and mac-hybrid over the simulated M4 Pro, each
// against cpu-only.
func TestVerifyOnCPU(t *testing.T) {
	dir := testmodels.Dir(t)
	models, _ := filepath.Glob(filepath.Join(dir, "*.gguf"))
	if len(models) == 0 {
		t.Fatalf("no models in %s", dir)
	}
	for _, c := range []struct {
		name string
		args []string
		note string // in every generation row's note
	}{
		{"cpu-split", []string{"--policies", "cpu-split"}, "cpu:1 "},
		{"auto on m4-pro", []string{"--policies", "auto", "--hardware", "m4-pro"}, "sim:"},
		{"mac-hybrid on m4-pro", []string{"--policies", "mac-hybrid", "--hardware", "m4-pro"}, "sim:metal "},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"verify", "--device", "cpu:1", "--models", dir, "--threads", "1", "-n", "16"}, c.args...)
			if code := Main(args, &stdout, &stderr); code != 0 {
				t.Fatalf("%v: exit %d: %s\n%s", args, code, stderr.String(), stdout.String())
			}
			out := stdout.String()
			if !strings.Contains(out, "verifying cpu:1") || !strings.Contains(out, " 0 failed") {
				t.Fatalf("output:\n%s", out)
			}
			for _, kind := range []string{"embed", "rms_norm", "mat_mul Q4_K", "rope", "attention", "silu_mul", "add", "last_row"} {
				if !strings.Contains(out, "| op       | "+kind) {
					t.Errorf("no %s check in the table", kind)
				}
			}
			for _, m := range models {
				row := ""
				for _, l := range strings.Split(out, "\n") {
					if strings.Contains(l, "| generate | "+filepath.Base(m)+" ") {
						row = l
					}
				}
				if !strings.Contains(row, "| pass ") || !strings.Contains(row, "16 of 16 tokens as cpu-only") || !strings.Contains(row, c.note) {
					t.Errorf("%s: generation row %q", filepath.Base(m), row)
				}
			}
		})
	}
}

// TestVerifyFails: a check that fails makes the exit code 1 with one line
// saying how many failed; a device that is absent is one line saying why.
func TestVerifyFails(t *testing.T) {
	// cuda-only cannot be placed without a CUDA GPU: its generation check
	// fails, the op checks pass.
	if goruntime.GOOS == "linux" {
		var stdout, stderr bytes.Buffer
		code := Main([]string{"verify", "--device", "cpu:1", "--models", "", "--policies", "cpu-split,cuda-only", "--threads", "1", "-n", "4"}, &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "1 of ") || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
			t.Fatalf("exit %d, stderr %q", code, stderr.String())
		}
		if !strings.Contains(stdout.String(), "| FAIL ") || !strings.Contains(stdout.String(), "cuda") {
			t.Fatalf("no failed cuda-only row:\n%s", stdout.String())
		}
	}
	if goruntime.GOOS != "darwin" {
		oneLineError(t, []string{"verify", "--device", "metal", "--models", ""}, 1, "metal", "not darwin")
	}
	oneLineError(t, []string{"verify", "--device", "tpu:0", "--models", ""}, 1, "tpu:0", "cpu")
	oneLineError(t, []string{"verify", "--device", "cpu", "--models", t.TempDir()}, 1, "no *.gguf")
	oneLineError(t, []string{"verify", "stray"}, 2)
}
