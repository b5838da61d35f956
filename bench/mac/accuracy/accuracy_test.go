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

// Bounds on the first step's max |Δlogit| / max|logit| against cpu-only on
// the simulated M4 Pro. Float files (F32, F16) see the fp16 rounding alone:
// 3.0e-4 to 8.5e-4 measured for mac-hybrid, 8.2e-4 to 2.2e-3 for ane-max; the
// bounds are about 2.3 times the largest. In quantized files the CPU
// quantizes each mat-mul's input to 8-bit blocks, where a value rounded to
// fp16 can land on the other side of an 8-bit step; their errors are 8.8e-3
// to 1.4e-2, and the bound is the tolerance the shared references allow
// between llama.cpp and hybrid for such files (../shared/models/README.md).
const (
	boundFloat     = 2e-3
	boundFloatMax  = 5e-3 // ane-max: the mat-muls in fp16 too
	boundQuantized = 2e-2
)

// TestFP16ErrorIsBounded measures mac-hybrid and metal-only (and ane-max on
// the built-in model) against cpu-only: metal-only computes in f32 on the
// simulated GPU and must be exact; mac-hybrid runs silu·mul on the simulated
// Neural Engine in fp16 and must differ from cpu-only (or the rounding is
// not happening) by no more than the bound.
func TestFP16ErrorIsBounded(t *testing.T) {
	type job struct {
		model    string
		prompts  []string
		policies []string
		quant    bool
	}
	jobs := []job{{"", defaultPrompts, []string{"metal-only", "mac-hybrid", filepath.Join("..", "ane-max.yaml")}, false}}
	if dir, ok := testmodels.Find(); ok {
		files, err := filepath.Glob(filepath.Join(dir, "*.gguf"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no models in %s", dir)
		}
		for _, f := range files {
			ps, err := referencePrompts(dir, f)
			if err != nil {
				t.Fatal(err)
			}
			jobs = append(jobs, job{f, ps, []string{"metal-only", "mac-hybrid"}, strings.Contains(filepath.Base(f), "-Q")})
		}
	} else {
		if testmodels.InCI() {
			t.Fatalf("the shared test models are missing (%s): CI must have them", dir)
		}
		t.Log("no shared test models: the built-in model only")
	}
	for _, j := range jobs {
		runs, err := Measure(j.model, j.prompts, j.policies, "m4-pro", 16, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			name := r.Model + " / " + r.Prompt + " / " + r.Policy
			bound := boundFloat
			switch {
			case j.quant:
				bound = boundQuantized
			case strings.HasSuffix(r.Policy, "ane-max.yaml"):
				bound = boundFloatMax
			}
			switch {
			case r.Policy == "metal-only":
				if r.FP16Ops != 0 || r.MaxRel != 0 || r.Diverge != -1 || r.Same != r.Generated {
					t.Errorf("%s: f32 simulated GPU differs from cpu-only: %+v", name, r)
				}
			case r.FP16Ops == 0:
				t.Errorf("%s: no op on the fp16 device (placement %v)", name, r.Placement)
			case r.MaxRel == 0:
				t.Errorf("%s: %d ops in fp16 and the logits equal cpu-only's to the bit: nothing was rounded", name, r.FP16Ops)
			case r.MaxRel > bound || r.MeanRel > r.MaxRel:
				t.Errorf("%s: first-step logit error max %.3g (mean %.3g), bound %.0e", name, r.MaxRel, r.MeanRel, bound)
			}
			t.Logf("%s: %d fp16 ops, error max %.2e mean %.2e, %d/%d tokens identical", name, r.FP16Ops, r.MaxRel, r.MeanRel, r.Same, r.Generated)
		}
	}
}

func TestCompare(t *testing.T) {
	ref := &generation{first: []float32{1, -4, 2}, tokens: []int32{5, 6, 7, 8}, margins: []float64{1, 2, 0.01, 3}}
	for _, c := range []struct {
		name          string
		got           []int32
		first         []float32
		same, diverge int
		margin        float64
		maxRel, mean  float64
	}{
		{"identical", []int32{5, 6, 7, 8}, []float32{1, -4, 2}, 4, -1, 0, 0, 0},
		{"diverges at a near-tie", []int32{5, 6, 9, 8}, []float32{1, -4, 2.5}, 2, 2, 0.01, 0.5 / 4, 0.5 / 3 / 4},
		{"stops early", []int32{5, 6}, []float32{0, -4, 2}, 2, 2, 0.01, 1.0 / 4, 1.0 / 3 / 4},
		{"goes on longer", []int32{5, 6, 7, 8, 1}, []float32{1, -3, 2}, 4, 4, 0, 1.0 / 4, 1.0 / 3 / 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := compare(&generation{first: c.first, tokens: c.got}, ref)
			if r.Same != c.same || r.Diverge != c.diverge || r.Margin != c.margin || r.Generated != 4 {
				t.Errorf("same %d diverge %d margin %g generated %d, want %d %d %g 4", r.Same, r.Diverge, r.Margin, r.Generated, c.same, c.diverge, c.margin)
			}
			if r.MaxRel != c.maxRel || r.MeanRel != c.mean {
				t.Errorf("error max %g mean %g, want %g %g", r.MaxRel, r.MeanRel, c.maxRel, c.mean)
			}
		})
	}
}

// TestCommand runs the command on the built-in model and reads its JSON.
func TestCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "acc.json")
	var stdout bytes.Buffer
	if err := run([]string{"-n", "4", "-threads", "1", "-json", out}, &stdout); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "| builtin:stories260K.gguf | Once upon a time | mac-hybrid | 5 of 78 |") {
		t.Errorf("table:\n%s", stdout.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Runs []Run `json:"runs"`
	}
	if err := json.Unmarshal(b, &res); err != nil || len(res.Runs) != 4 {
		t.Fatalf("JSON: %v, %d runs, want 4\n%s", err, len(res.Runs), b)
	}
	for _, bad := range [][]string{{"-n", "0"}, {"-policies", " , "}, {"-models", t.TempDir()}, {"stray"}, {"-policies", "no-such-policy"}} {
		if err := run(bad, &stdout); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
