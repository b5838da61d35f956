package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// modelsDir finds ../shared/models: HYBRID_TEST_MODELS, or in CI a failure,
// or outside CI the copy beside the checkout, or a skip.
func modelsDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("HYBRID_TEST_MODELS"); d != "" {
		return d
	}
	if os.Getenv("CI") != "" {
		t.Fatal("HYBRID_TEST_MODELS is not set: CI must export the absolute path of ../shared/models")
	}
	d, _ := filepath.Abs("../../../shared/models")
	if _, err := os.Stat(d); err != nil {
		t.Skip("no test models: set HYBRID_TEST_MODELS to ../shared/models")
	}
	return d
}

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
func TestMatchesLlamaCpp(t *testing.T) {
	dir := modelsDir(t)
	refs, err := filepath.Glob(filepath.Join(dir, "reference", "*.json"))
	if err != nil || len(refs) == 0 {
		t.Fatalf("no reference outputs in %s/reference", dir)
	}
	for _, ref := range refs {
		base := filepath.Base(ref)
		model := base[:strings.Index(base, ".p")] + ".gguf"
		t.Run(base, func(t *testing.T) {
			t.Parallel()
			var want reference
			b, err := os.ReadFile(ref)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatalf("%s: %v", ref, err)
			}
			exact := !strings.Contains(model, "Q") // F32 and F16 files
			margin, logitTol := 0.1, 2e-2
			if exact {
				margin, logitTol = 0.02, 1e-4
			}
			var stdout, stderr bytes.Buffer
			code := Main([]string{"run", "--model", filepath.Join(dir, model), "--prompt", want.Prompt,
				"--temp", "0", "-n", "32", "--json", "--logits", "--threads", "1"}, &stdout, &stderr)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			var got runOut
			if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
				t.Fatalf("bad JSON: %v\n%s", err, stdout.String())
			}
			if !equal(got.PromptTokens, want.PromptTokens) {
				t.Fatalf("prompt tokens %v, llama.cpp %v", got.PromptTokens, want.PromptTokens)
			}
			compared := 0
			for i, s := range want.Steps {
				if i >= len(got.GeneratedTokens) {
					t.Fatalf("generated %d tokens, llama.cpp %d", len(got.GeneratedTokens), len(want.Steps))
				}
				g := got.GeneratedTokens[i]
				if s.Logit-s.SecondLogit < margin {
					if g != s.ID && g != s.Second {
						t.Fatalf("step %d (near-tie): got %d, want %d or %d", i, g, s.ID, s.Second)
					}
					break
				}
				if g != s.ID {
					t.Fatalf("step %d: got token %d, llama.cpp %d (margin %.4f); ours so far %v", i, g, s.ID, s.Logit-s.SecondLogit, got.GeneratedTokens[:i+1])
				}
				compared++
			}
			ref0 := want.Steps[0].Logits
			if len(got.FirstLogits) != len(ref0) {
				t.Fatalf("%d first logits, llama.cpp %d", len(got.FirstLogits), len(ref0))
			}
			var maxRef, maxDiff float64
			for i, r := range ref0 {
				if got.FirstLogits[i] == nil {
					t.Fatalf("logit %d is not finite", i)
				}
				maxRef = math.Max(maxRef, math.Abs(r))
				maxDiff = math.Max(maxDiff, math.Abs(*got.FirstLogits[i]-r))
			}
			if rel := maxDiff / maxRef; rel > logitTol {
				t.Fatalf("first logits differ by %.3g of their largest magnitude, limit %.0e", rel, logitTol)
			} else {
				t.Logf("%s: %d steps compared, first-logit error %.2g (limit %.0e)", model, compared, rel, logitTol)
			}
		})
	}
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
