package coreml

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeCompile stands in for compileModelAtURL: it makes a compiled-model
// directory in tmp from the source file, and counts its calls.
type fakeCompile struct {
	tmp   string
	calls int
	fail  error
}

func (f *fakeCompile) compile(src string) (string, error) {
	f.calls++
	if f.fail != nil {
		return "", f.fail
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	out, err := os.MkdirTemp(f.tmp, "compiled-*.mlmodelc")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(out, "weights"), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(out, "model.mil"), b, 0o644); err != nil {
		return "", err
	}
	return out, os.WriteFile(filepath.Join(out, "weights", "weight.bin"), []byte("w"), 0o644)
}

func TestCacheCompilesOnce(t *testing.T) {
	dir := t.TempDir()
	c := cache{dir: filepath.Join(dir, "cache")}
	fc := &fakeCompile{tmp: t.TempDir()}
	built := 0
	model := func() ([]byte, error) { built++; return []byte("model bytes"), nil }
	p, err := c.compiled("add-1x8-abc", model, fc.compile)
	if err != nil {
		t.Fatal(err)
	}
	if p != filepath.Join(c.dir, "add-1x8-abc.mlmodelc") {
		t.Fatalf("compiled model at %s", p)
	}
	if b, err := os.ReadFile(filepath.Join(p, "model.mil")); err != nil || string(b) != "model bytes" {
		t.Fatalf("compiled model holds %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "add-1x8-abc.mlmodel")); !os.IsNotExist(err) {
		t.Errorf("the .mlmodel source was left behind: %v", err)
	}
	// A hit neither builds nor compiles.
	if p2, err := c.compiled("add-1x8-abc", model, fc.compile); err != nil || p2 != p || built != 1 || fc.calls != 1 {
		t.Fatalf("second lookup: %s, %v, built %d, compiled %d", p2, err, built, fc.calls)
	}
	// Nothing but the compiled model is left in the cache directory.
	ents, _ := os.ReadDir(c.dir)
	if len(ents) != 1 {
		t.Fatalf("cache holds %v", ents)
	}
}

func TestCacheErrors(t *testing.T) {
	c := cache{dir: t.TempDir()}
	fc := &fakeCompile{tmp: t.TempDir(), fail: errors.New("Error compiling model: bad op")}
	_, err := c.compiled("k", func() ([]byte, error) { return []byte("x"), nil }, fc.compile)
	if err == nil || !strings.Contains(err.Error(), "bad op") || !strings.Contains(err.Error(), "k.mlmodel") {
		t.Fatalf("compile failure: %v", err)
	}
	_, err = c.compiled("k", func() ([]byte, error) { return nil, errors.New("no weight") }, fc.compile)
	if err == nil || !strings.Contains(err.Error(), "no weight") {
		t.Fatalf("build failure: %v", err)
	}
	if ents, _ := os.ReadDir(c.dir); len(ents) != 0 {
		t.Fatalf("failures left %v", ents)
	}
}

// TestInstallDirRace: when another process installed the key first, ours is
// dropped and theirs kept.
func TestInstallDirRace(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "k.mlmodelc")
	if err := os.MkdirAll(filepath.Join(dst, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "ours")
	os.MkdirAll(filepath.Join(src, "y"), 0o755)
	if err := installDir(src, dst); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dst, "x")); err != nil {
		t.Fatalf("the first install was replaced: %v", err)
	}
	if _, err := os.Stat(src); !os.IsNotExist(err) {
		t.Fatalf("ours was left behind: %v", err)
	}
}

// TestCopyTree covers installDir's path across file systems (which a test
// cannot force): the tree arrives whole.
func TestCopyTree(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(src, "a", "b"), 0o755)
	os.WriteFile(filepath.Join(src, "a", "b", "f"), []byte("deep"), 0o644)
	os.WriteFile(filepath.Join(src, "top"), []byte("top"), 0o644)
	if err := copyTree(src, dst); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"a/b/f": "deep", "top": "top"} {
		if b, err := os.ReadFile(filepath.Join(dst, p)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v", p, b, err)
		}
	}
	os.Symlink("top", filepath.Join(src, "link"))
	if err := copyTree(src, t.TempDir()); err == nil || !strings.Contains(err.Error(), "link") {
		t.Errorf("a symlink was copied: %v", err)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m.mlmodel")
	for _, s := range []string{"first", "second"} {
		if err := writeFileAtomic(p, []byte(s)); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(p); string(b) != s {
			t.Fatalf("file holds %q, want %q", b, s)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("temporary files left: %v", ents)
	}
	if err := writeFileAtomic(filepath.Join(dir, "missing", "m"), nil); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("write into a missing directory: %v", err)
	}
}

func TestCacheDir(t *testing.T) {
	t.Setenv(CacheDirEnv, "/somewhere/else")
	if d, err := cacheDir(); err != nil || d != "/somewhere/else" {
		t.Fatalf("with $%s: %s, %v", CacheDirEnv, d, err)
	}
	t.Setenv(CacheDirEnv, "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	t.Setenv("HOME", "/home/u")
	d, err := cacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if base, _ := os.UserCacheDir(); d != filepath.Join(base, "hybrid", "coreml") {
		t.Fatalf("cache dir %s, want under %s", d, base)
	}
}
