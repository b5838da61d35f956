// Package testmodels finds the shared test models (../shared/models beside
// the project: small real GGUF files, llama.cpp's reference outputs, the
// tokenizer vocabularies) for tests in every package. It is the one place
// that knows where they live and what a test does when they are missing:
// outside CI it skips, in CI (the CI variable set) it fails, so that a green
// CI run always means the files were checked.
package testmodels

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Env is the variable that names the models' directory; .ci/run exports it.
const Env = "HYBRID_TEST_MODELS"

// Find returns the directory of the shared test models: $HYBRID_TEST_MODELS,
// else shared/models beside the module's root (found by walking up from the
// working directory to go.mod). ok is false with the directory tried, or an
// empty one, when there is none.
func Find() (dir string, ok bool) {
	if d := os.Getenv(Env); d != "" {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d, true
		}
		return d, false
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for d := wd; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			cand := filepath.Join(filepath.Dir(d), "shared", "models")
			if st, err := os.Stat(cand); err == nil && st.IsDir() {
				return cand, true
			}
			return cand, false
		}
		up := filepath.Dir(d)
		if up == d {
			return "", false
		}
		d = up
	}
}

// Dir returns the models' directory for test t. When it is missing, t is
// skipped, or failed in CI.
func Dir(t testing.TB) string {
	t.Helper()
	d, ok := Find()
	if !ok {
		Missing(t, fmt.Sprintf("the shared test models are not at %q: set %s to ../shared/models", d, Env))
	}
	return d
}

// Path returns the path of file name in the models' directory; a missing
// file skips t, or fails it in CI.
func Path(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(Dir(t), name)
	if _, err := os.Stat(p); err != nil {
		Missing(t, fmt.Sprintf("test model %s: %v", name, err))
	}
	return p
}

// Missing stops t for a missing test input: a failure in CI, where every
// input must be present, else a skip that says what is missing.
func Missing(t testing.TB, what string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s (CI is set, so missing test inputs are a failure)", what)
	}
	t.Skip(what)
}

// InCI reports whether the tests run in CI, where nothing may be skipped
// for want of the shared files.
func InCI() bool { return os.Getenv("CI") != "" }
