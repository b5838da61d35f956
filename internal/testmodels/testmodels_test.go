package testmodels

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// recorder is a testing.TB that records how a helper stopped the test
// instead of stopping it (Fatalf and Skip end the goroutine, as the real
// ones do, so that the helper's code after them never runs).
type recorder struct {
	testing.TB
	failed, skipped bool
	msg             string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, format
	runtime.Goexit()
}
func (r *recorder) Skip(args ...any) {
	r.skipped = true
	runtime.Goexit()
}

// stop runs f with a recorder in its own goroutine and returns the recorder.
func stop(t *testing.T, f func(testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

func TestMissingFailsInCI(t *testing.T) {
	empty := t.TempDir()
	for _, tc := range []struct {
		name       string
		ci         string
		wantFailed bool
	}{
		{"in CI a missing directory fails", "1", true},
		{"outside CI it skips", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			t.Setenv(Env, filepath.Join(empty, "no-such-dir"))
			r := stop(t, func(tb testing.TB) { Dir(tb) })
			if r.failed != tc.wantFailed || r.skipped == tc.wantFailed {
				t.Fatalf("failed=%v skipped=%v, want failed=%v", r.failed, r.skipped, tc.wantFailed)
			}
		})
	}
}

func TestPathOfMissingFileFailsInCI(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(Env, dir)
	t.Setenv("CI", "1")
	if got := stop(t, func(tb testing.TB) { Dir(tb) }); got.failed || got.skipped {
		t.Fatalf("an existing directory stopped the test: %+v", got)
	}
	if got := stop(t, func(tb testing.TB) { Path(tb, "absent.gguf") }); !got.failed {
		t.Fatalf("a missing file in CI did not fail: %+v", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "m.gguf"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var p string
	if got := stop(t, func(tb testing.TB) { p = Path(tb, "m.gguf") }); got.failed || got.skipped || p != filepath.Join(dir, "m.gguf") {
		t.Fatalf("present file: %+v, path %q", got, p)
	}
}

func TestFindWalksUpToTheModule(t *testing.T) {
	t.Setenv(Env, "")
	root := t.TempDir()
	mod := filepath.Join(root, "main")
	deep := filepath.Join(mod, "a", "b")
	models := filepath.Join(root, "shared", "models")
	for _, d := range []string{deep, models} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(deep)
	if d, ok := Find(); !ok || d != models {
		t.Fatalf("Find() = %q, %v; want %q, true", d, ok, models)
	}
}
