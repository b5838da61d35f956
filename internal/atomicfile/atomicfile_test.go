package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// only checks that dir holds exactly the names given: no temporary file
// left beside them.
func only(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(names, " ") {
		t.Errorf("%s holds %q, want %q", dir, got, names)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestWrite checks that a new file gets the mode asked for and a replaced
// one keeps its own, whatever mode is asked.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.json")
	for _, c := range []struct {
		name string
		data string
		perm os.FileMode
		want os.FileMode
	}{
		{"new", "first\n", 0o640, 0o640},
		{"replace keeps the mode", "second, longer\n", 0o600, 0o640},
		{"chmod by hand is kept", "third\n", 0o600, 0o644},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "chmod by hand is kept" {
				if err := os.Chmod(path, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := Write(path, []byte(c.data), c.perm); err != nil {
				t.Fatal(err)
			}
			if got := read(t, path); got != c.data {
				t.Errorf("read %q, want %q", got, c.data)
			}
			if got := mode(t, path); got != c.want {
				t.Errorf("mode %v, want %v", got, c.want)
			}
			only(t, dir, "out.json")
		})
	}
	t.Run("missing folder", func(t *testing.T) {
		if err := Write(filepath.Join(dir, "no", "out.json"), []byte("x"), 0o644); err == nil {
			t.Fatal("no error writing into a missing folder")
		}
	})
}

// TestRefusesDirectory checks that a directory at the path is refused with
// an error that names it, before any temporary file is made.
func TestRefusesDirectory(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	err := Write(path, []byte("x"), 0o644)
	if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), path+": it is a directory") {
		t.Errorf("Write over a directory: %v", err)
	}
	if fi, err := os.Lstat(path); err != nil || !fi.IsDir() {
		t.Errorf("the directory is gone: %v", err)
	}
	only(t, dir, "out")
}

// TestSymlink checks that a write through a symbolic link replaces the file
// it points to, keeping that file's mode and leaving the link a link, with
// the temporary file made beside the file (another folder here).
func TestSymlink(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(sub, "real.yaml")
	if err := os.WriteFile(real, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	// link -> mid -> sub/real.yaml: a chain, relative then absolute.
	link, mid := filepath.Join(dir, "link"), filepath.Join(dir, "mid")
	if err := os.Symlink("mid", link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, mid); err != nil {
		t.Fatal(err)
	}

	f, err := Create(link, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(f.Name()) != sub {
		t.Errorf("temporary file %s is not beside %s", f.Name(), real)
	}
	f.Write([]byte("new"))
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ link, to string }{{link, "mid"}, {mid, real}} {
		if to, err := os.Readlink(c.link); err != nil || to != c.to {
			t.Errorf("%s: Readlink gives %q, %v; want %q", c.link, to, err, c.to)
		}
	}
	if got := read(t, real); got != "new" {
		t.Errorf("%s holds %q, want the new contents", real, got)
	}
	if got := mode(t, real); got != 0o644 {
		t.Errorf("%s has mode %v, want 0644 kept", real, got)
	}
	only(t, dir, "link", "mid", "sub")
	only(t, sub, "real.yaml")

	t.Run("dangling", func(t *testing.T) {
		link := filepath.Join(dir, "dangling")
		if err := os.Symlink("sub/made.yaml", link); err != nil {
			t.Fatal(err)
		}
		if err := Write(link, []byte("made"), 0o644); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("the link was replaced: %v", err)
		}
		if got := read(t, filepath.Join(sub, "made.yaml")); got != "made" {
			t.Errorf("the link's target holds %q", got)
		}
	})
	t.Run("loop", func(t *testing.T) {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		os.Symlink("b", a)
		os.Symlink("a", b)
		if err := Write(a, []byte("x"), 0o644); err == nil || !strings.Contains(err.Error(), "symbolic links") {
			t.Errorf("Write through a loop of links: %v", err)
		}
	})
}

// TestAbort checks that Abort removes the temporary file and leaves the
// target as it was, and that the File is finished after it.
func TestAbort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Create(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.Name()); err != nil {
		t.Fatalf("no temporary file while writing: %v", err)
	}
	if err := f.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := f.Abort(); err != nil {
		t.Errorf("a second Abort: %v", err)
	}
	if err := f.Commit(); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	if _, err := f.Write([]byte("x")); err == nil {
		t.Error("Write after Abort succeeded")
	}
	if got := read(t, path); got != "old" {
		t.Errorf("target holds %q after Abort", got)
	}
	only(t, dir, "out")
}

// TestCleanup checks that Cleanup removes the temporary file of every File
// in progress, whose Commit then fails without touching its target, and not
// those already committed.
func TestCleanup(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old")
	if err := os.WriteFile(old, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := filepath.Join(dir, "done")
	fd, err := Create(done, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fd.Write([]byte("done"))
	if err := fd.Commit(); err != nil {
		t.Fatal(err)
	}
	var files []*File
	for _, p := range []string{old, filepath.Join(dir, "new")} {
		f, err := Create(p, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("partial"))
		files = append(files, f)
	}
	if n := Cleanup(); n != 2 {
		t.Errorf("Cleanup removed %d files, want 2", n)
	}
	only(t, dir, "done", "old")
	if err := files[0].Commit(); err == nil {
		t.Error("Commit after Cleanup succeeded")
	}
	if err := files[1].Abort(); err != nil {
		t.Errorf("Abort after Cleanup: %v", err)
	}
	if got := read(t, old); got != "old" {
		t.Errorf("target holds %q after Cleanup", got)
	}
	if got := read(t, done); got != "done" {
		t.Errorf("committed file holds %q after Cleanup", got)
	}
	if n := Cleanup(); n != 0 {
		t.Errorf("a second Cleanup removed %d files", n)
	}
	only(t, dir, "done", "old")
}

// TestCleanupConcurrent runs Cleanup while Files are made, written and
// committed on other goroutines (for the race detector), then checks that
// nothing temporary is left.
func TestCleanupConcurrent(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			p := filepath.Join(dir, string(rune('a'+i)))
			for range 50 {
				f, err := Create(p, 0o644)
				if err != nil {
					t.Error(err)
					return
				}
				f.Write([]byte("data"))
				if i%2 == 0 {
					f.Commit()
				} else {
					f.Abort()
				}
			}
		})
	}
	for range 50 {
		Cleanup()
	}
	wg.Wait()
	Cleanup()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left", e.Name())
		}
	}
}
