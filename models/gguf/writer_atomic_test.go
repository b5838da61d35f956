//go:build unix

package gguf

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"hybrid/internal/atomicfile"
)

// writeAll writes the test tensors through Create to path and closes.
func writeAll(t *testing.T, path string) error {
	t.Helper()
	w, err := Create(path, writerKVs, writerTensors)
	if err != nil {
		return err
	}
	for _, d := range writerData {
		if err := w.WriteTensor(d); err != nil {
			t.Fatal(err)
		}
	}
	return w.Close()
}

// entries lists dir's names.
func entries(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

// TestCreateRefusesSpecial checks that Create refuses a path that is a FIFO,
// a directory, or a link to a FIFO, naming it, and leaves it as it was with
// no temporary file beside it. (As root a character device is refused the
// same way: internal/atomicfile tests that.)
func TestCreateRefusesSpecial(t *testing.T) {
	dir := t.TempDir()
	fifo, sub, link := filepath.Join(dir, "fifo"), filepath.Join(dir, "sub"), filepath.Join(dir, "link")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("fifo", link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, kind string }{
		{fifo, "a named pipe"},
		{sub, "a directory"},
		{link, "a named pipe"},
	} {
		t.Run(filepath.Base(c.path), func(t *testing.T) {
			_, err := Create(c.path, writerKVs, writerTensors)
			if !errors.Is(err, atomicfile.ErrNotRegular) || !strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), "it is "+c.kind) {
				t.Errorf("Create(%s): %v", c.path, err)
			}
		})
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode().Type() != os.ModeNamedPipe {
		t.Errorf("the FIFO changed: %v", err)
	}
	if got := entries(t, dir); got != "fifo link sub" {
		t.Errorf("the folder holds %s, want fifo link sub", got)
	}
}

// TestCreateThroughSymlink checks that Create through a symbolic link
// replaces the file it names, which keeps its mode, and leaves the link.
func TestCreateThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	real, link := filepath.Join(dir, "real.gguf"), filepath.Join(dir, "model.gguf")
	if err := os.WriteFile(real, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.gguf", link); err != nil {
		t.Fatal(err)
	}
	if err := writeAll(t, link); err != nil {
		t.Fatal(err)
	}
	if to, err := os.Readlink(link); err != nil || to != "real.gguf" {
		t.Errorf("the link now gives %q, %v", to, err)
	}
	got, _ := os.ReadFile(real)
	if !bytes.Equal(got, writeMem(t, writerKVs, writerTensors, writerData)) {
		t.Error("the link's target does not hold the new file")
	}
	if fi, err := os.Stat(real); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the target's mode is %v (%v), want 0600 kept", fi.Mode().Perm(), err)
	}
	if got := entries(t, dir); got != "model.gguf real.gguf" {
		t.Errorf("the folder holds %s", got)
	}
}

// TestCreateUmask checks that a new file is 0644 less the umask, as any new
// file is.
func TestCreateUmask(t *testing.T) {
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := writeAll(t, path); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v (%v), want 0644 less umask 027: 0640", fi.Mode().Perm(), err)
	}
}

// TestCreateCleanup checks that atomicfile.Cleanup, which the hybrid command
// calls when interrupted, removes a Writer's temporary file mid-write, and
// that the Writer then fails to close without touching the destination.
func TestCreateCleanup(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.gguf")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := Create(path, writerKVs, writerTensors)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteTensor(writerData[0])
	if got := entries(t, dir); !strings.Contains(got, ".model.gguf.tmp") {
		t.Fatalf("no temporary file while writing: %s", got)
	}
	if n := atomicfile.Cleanup(); n != 1 {
		t.Errorf("Cleanup removed %d files, want 1", n)
	}
	if got := entries(t, dir); got != "model.gguf" {
		t.Errorf("after Cleanup the folder holds %s", got)
	}
	for _, d := range writerData[1:] {
		w.WriteTensor(d)
	}
	if err := w.Close(); err == nil {
		t.Error("Close after Cleanup succeeded")
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("the destination changed: %.20q", b)
	}
	if got := entries(t, dir); got != "model.gguf" {
		t.Errorf("after Close the folder holds %s", got)
	}
}
