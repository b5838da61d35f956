package main

import (
	"hybrid/internal/testmodels"

	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type refStep struct {
	ID          int32     `json:"id"`
	Logit       float64   `json:"logit"`
	Second      int32     `json:"second"`
	SecondLogit float64   `json:"second_logit"`
	Logits      []float64 `json:"logits"`
}

type reference struct {
	Prompt       string    `json:"prompt"`
	PromptTokens []int32   `json:"prompt_tokens"`
	Steps        []refStep `json:"steps"`
}

type runOut struct {
	PromptTokens    []int32    `json:"prompt_tokens"`
	GeneratedTokens []int32    `json:"generated_tokens"`
	Text            string     `json:"text"`
	FirstLogits     []*float64 `json:"first_logits"`
}

// TestMatchesLlamaCpp runs `hybrid run --temp 0 -n 32 --json --logits` on every
// shared model and prompt and applies the rule of ../shared/models/README.md:
// identical prompt tokens; identical greedy tokens up to the first near-tie
// (margin < 0.02 for F32/F16, 0.1 for quantized files), where either of the two
// is right; first-step logits within 1e-4 (F32/F16) or 2e-2 (quantized) of the
// reference's largest magnitude.
//
// The rule is applied in full twice: to the shared reference, and to the same
// runs of llama.cpp built on x86-64 (testdata/llamacpp-x86, see its README).
// Where llama.cpp on x86-64 itself misses the shared reference's logit limit
// (the F16 file: the shared reference's f16 arithmetic differs), the shared
// reference's logit check allows llama.cpp's own miss on top of the limit;
// the tokens must still match it.
func TestMatchesLlamaCpp(t *testing.T) {
	dir := testmodels.Dir(t)
	refs, err := filepath.Glob(filepath.Join(dir, "reference", "*.json"))
	if err != nil || len(refs) == 0 {
		t.Fatalf("no reference outputs in %s/reference", dir)
	}
	for _, ref := range refs {
		base := filepath.Base(ref)
		model := base[:strings.Index(base, ".p")] + ".gguf"
		t.Run(base, func(t *testing.T) {
			t.Parallel()
			shared := readReference(t, ref)
			x86 := readReference(t, filepath.Join("testdata", "llamacpp-x86", base))
			exact := !strings.Contains(model, "Q") // F32 and F16 files
			margin, logitTol := 0.1, 2e-2
			if exact {
				margin, logitTol = 0.02, 1e-4
			}
			var stdout, stderr bytes.Buffer
			code := Main([]string{"run", "--model", filepath.Join(dir, model), "--prompt", shared.Prompt,
				"--temp", "0", "-n", "32", "--json", "--logits", "--threads", "1"}, &stdout, &stderr)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			var got runOut
			if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
				t.Fatalf("bad JSON: %v\n%s", err, stdout.String())
			}
			ours := make([]float64, len(got.FirstLogits))
			for i, v := range got.FirstLogits {
				if v == nil {
					t.Fatalf("logit %d is not finite", i)
				}
				ours[i] = *v
			}

			// llama.cpp on x86-64: the whole rule.
			n, rel := checkRun(t, "llama.cpp x86-64", got, ours, x86, margin)
			if rel > logitTol {
				t.Errorf("llama.cpp x86-64: first logits differ by %.3g of their largest magnitude, limit %.0e", rel, logitTol)
			}
			t.Logf("%s vs llama.cpp x86-64: %d steps compared, first-logit error %.2g (limit %.0e)", model, n, rel, logitTol)

			// The shared reference: the whole rule, with llama.cpp's own miss
			// allowed where it has one.
			n, rel = checkRun(t, "shared reference", got, ours, shared, margin)
			limit := logitTol
			if peer := logitError(x86.Steps[0].Logits, shared.Steps[0].Logits); peer > logitTol {
				limit = peer + logitTol
				t.Logf("llama.cpp x86-64 itself misses the shared reference by %.2g; allowing %.2g", peer, limit)
			}
			if rel > limit {
				t.Errorf("shared reference: first logits differ by %.3g of their largest magnitude, limit %.2g", rel, limit)
			}
			t.Logf("%s vs shared reference: %d steps compared, first-logit error %.2g", model, n, rel)
		})
	}
}

func readReference(t *testing.T, path string) reference {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r reference
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(r.Steps) == 0 || len(r.Steps[0].Logits) == 0 {
		t.Fatalf("%s: no first-step logits", path)
	}
	return r
}

// checkRun applies rules 1 and 2 (failing the test) and returns the number of
// steps compared and the first-logit error of rule 3.
func checkRun(t *testing.T, name string, got runOut, ours []float64, want reference, margin float64) (int, float64) {
	t.Helper()
	if !equal(got.PromptTokens, want.PromptTokens) {
		t.Fatalf("%s: prompt tokens %v, llama.cpp %v", name, got.PromptTokens, want.PromptTokens)
	}
	compared := 0
	for i, s := range want.Steps {
		if i >= len(got.GeneratedTokens) {
			t.Fatalf("%s: generated %d tokens, llama.cpp %d", name, len(got.GeneratedTokens), len(want.Steps))
		}
		g := got.GeneratedTokens[i]
		if s.Logit-s.SecondLogit < margin {
			if g != s.ID && g != s.Second {
				t.Fatalf("%s: step %d (near-tie): got %d, want %d or %d", name, i, g, s.ID, s.Second)
			}
			break
		}
		if g != s.ID {
			t.Fatalf("%s: step %d: got token %d, llama.cpp %d (margin %.4f); ours so far %v", name, i, g, s.ID, s.Logit-s.SecondLogit, got.GeneratedTokens[:i+1])
		}
		compared++
	}
	if len(ours) != len(want.Steps[0].Logits) {
		t.Fatalf("%s: %d first logits, llama.cpp %d", name, len(ours), len(want.Steps[0].Logits))
	}
	return compared, logitError(ours, want.Steps[0].Logits)
}

// logitError is max|a-ref| / max|ref|.
func logitError(a, ref []float64) float64 {
	var maxRef, maxDiff float64
	for i, r := range ref {
		maxRef = math.Max(maxRef, math.Abs(r))
		maxDiff = math.Max(maxDiff, math.Abs(a[i]-r))
	}
	return maxDiff / maxRef
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
