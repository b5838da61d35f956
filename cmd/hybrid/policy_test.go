package main

import (
	"hybrid/internal/testmodels"

	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlansMatchCPUOnly runs every shared model and prompt under several
// policies and device mixes: two real CPU devices with alternating layers
// (copies between separate buffers and worker pools), the per-op ablation,
// auto over CPU plus simulated H100 devices, and mac-hybrid on simulated M4
// Pro devices. Each must produce exactly cpu-only's greedy tokens, and the
// multi-device ones must have copied something.
func TestPlansMatchCPUOnly(t *testing.T) {
	dir := testmodels.Dir(t)
	refs, err := filepath.Glob(filepath.Join(dir, "reference", "*.p1.json"))
	if err != nil || len(refs) == 0 {
		t.Fatalf("no reference outputs in %s/reference", dir)
	}
	type out struct {
		GeneratedTokens []int32        `json:"generated_tokens"`
		Placement       map[string]int `json:"placement"`
		Transfers       struct {
			Count int   `json:"count"`
			Bytes int64 `json:"bytes"`
		} `json:"transfers"`
	}
	run := func(t *testing.T, args ...string) out {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := Main(append([]string{"run", "--temp", "0", "-n", "24", "--json", "--threads", "1"}, args...), &stdout, &stderr); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr.String())
		}
		var o out
		if err := json.Unmarshal(stdout.Bytes(), &o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	for _, ref := range refs {
		base := filepath.Base(ref)
		model := filepath.Join(dir, base[:strings.Index(base, ".p")]+".gguf")
		r := readReference(t, ref)
		t.Run(base, func(t *testing.T) {
			want := run(t, "--model", model, "--prompt", r.Prompt)
			for _, c := range [][]string{
				{"--policy", "cpu-split", "--cpus", "2"},
				{"--policy", "cpu-split", "--cpus", "2", "--transfers", "per-op"},
				{"--policy", "auto", "--hardware", "h100-sxm"},
				{"--policy", "mac-hybrid", "--hardware", "m4-pro"},
			} {
				got := run(t, append([]string{"--model", model, "--prompt", r.Prompt}, c...)...)
				if !equal(got.GeneratedTokens, want.GeneratedTokens) {
					t.Fatalf("%v: tokens %v, cpu-only %v", c, got.GeneratedTokens, want.GeneratedTokens)
				}
				if len(got.Placement) > 1 && got.Transfers.Count == 0 {
					t.Fatalf("%v: ops on %v but no copies", c, got.Placement)
				}
			}
		})
	}
}

// TestBadPoliciesFailCleanly: bad policy input is one line naming the file
// and line, exit code 1.
func TestBadPoliciesFailCleanly(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, text string
		has        []string
	}{
		{"unknown_key.yaml", "name: x\ndevices: [cpu]\nfavourite: metal\n", []string{"unknown_key.yaml:3:", "favourite"}},
		{"unknown_kind.yaml", "name: x\nrules:\n  - ops: [matmul]\n    device: cpu\n", []string{"unknown_kind.yaml:3:", "matmul"}},
		{"absent_device.yaml", "name: x\nrules:\n  - ops: [mat_mul]\n    device: cuda\n", []string{"absent_device.yaml:3:", "cuda", "not built"}},
		{"malformed.yaml", "name: x\ndevices: [cpu\n", []string{"malformed.yaml:"}},
		{"bad_layers.yaml", "name: x\nrules:\n  - layers: 5-2\n    device: cpu\n", []string{"bad_layers.yaml:3:", "5-2"}},
		{"cap_too_small.yaml", "name: x\ndevices: [cpu]\nmemory:\n  cpu: 1KiB\n", []string{"cap_too_small", "memory"}},
		{"empty.yaml", "", []string{"empty.yaml:1:"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			oneLineError(t, []string{"run", "--policy", write(c.name, c.text), "-n", "1"}, 1, c.has...)
		})
	}
	oneLineError(t, []string{"run", "--policy", "no-such-policy"}, 1, "no-such-policy")
	oneLineError(t, []string{"plan", "--hardware", "no-such-machine"}, 1, "no-such-machine")
}

// TestProfileFeedsThePlanner measures the built-in model on two CPU devices,
// writes the profile, and plans with it: the plan's estimates must then be
// measurements, not roofline guesses.
func TestProfileFeedsThePlanner(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "profile.yaml")
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"profile", "--cpus", "2", "--threads", "1", "--steps", "2", "--prefill", "8", "-o", prof}, &stdout, &stderr); code != 0 {
		t.Fatalf("profile: exit %d: %s", code, stderr.String())
	}
	stdout.Reset()
	if code := Main([]string{"plan", "--policy", "auto", "--cpus", "2", "--threads", "1", "--profile", prof, "--format", "json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, stderr.String())
	}
	var plan struct {
		PredictedMS float64 `json:"predicted_ms"`
		Ops         []struct {
			Source string `json:"source"`
		} `json:"ops"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &plan); err != nil {
		t.Fatal(err)
	}
	for i, op := range plan.Ops {
		if op.Source != "measured" {
			t.Fatalf("op %d's estimate is %q, not measured", i, op.Source)
		}
	}
	if plan.PredictedMS <= 0 {
		t.Fatal("no predicted time")
	}
}

// TestRunPrintsBothSteps: a run over several devices prints, for the
// prompt's prefill and for the decode steps, the predicted time of a step
// of its own plan next to the measured one.
func TestRunPrintsBothSteps(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"run", "--temp", "0", "-n", "4", "--threads", "1", "--policy", "cpu-split", "--cpus", "2",
		"--prompt", strings.Repeat("Lily and Tom went to the park. ", 6)}
	if code := Main(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stderr.String()
	for _, want := range []string{"prefill: 74 tokens in 1 step(s); the plan of a 74-token step predicts ", "decode: the plan predicts ", " ms over 3 tokens"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// TestPlanShowsBothSteps: `hybrid plan` prints the decode step's plan and a
// line for a prompt's step, planned for its own shape; machine formats get
// the one plan asked for.
func TestPlanShowsBothSteps(t *testing.T) {
	for _, c := range []struct {
		format string
		want   bool
	}{{"table", true}, {"markdown", true}, {"json", false}, {"csv", false}} {
		var stdout, stderr bytes.Buffer
		if code := Main([]string{"plan", "--format", c.format, "--threads", "1"}, &stdout, &stderr); code != 0 {
			t.Fatalf("%s: exit %d: %s", c.format, code, stderr.String())
		}
		got := strings.Contains(stdout.String(), "prefill step of 512 tokens (its own plan: --tokens 512): predicted ")
		if got != c.want {
			t.Errorf("%s: prefill line %v, want %v:\n%s", c.format, got, c.want, stdout.String())
		}
	}
}
