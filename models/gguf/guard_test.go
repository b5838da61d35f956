//go:build linux || darwin

package gguf

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"hybrid/internal/testmodels"
)

// copyModel copies a shared model to a temporary file the test may truncate.
func copyModel(t *testing.T, name string) string {
	t.Helper()
	src, err := os.Open(testmodels.Path(t, name))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst := filepath.Join(t.TempDir(), name)
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, src); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestTruncatedFileIsAnError truncates a mapped model under the open File:
// Check says it changed, and a read of its tensor data under Guard returns
// that error instead of the SIGBUS that crashed hybrid before.
func TestTruncatedFileIsAnError(t *testing.T) {
	path := copyModel(t, "stories260K.gguf")
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Check(); err != nil {
		t.Fatalf("an unchanged file: %v", err)
	}
	last := &f.Tensors[len(f.Tensors)-1]
	for _, ti := range f.Tensors {
		if ti.Offset > last.Offset {
			last = &ti
		}
	}
	data := f.TensorData(last)
	st, _ := os.Stat(path)
	if err := os.Truncate(path, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); !errors.Is(err, ErrChanged) {
		t.Fatalf("Check after truncation: %v, want ErrChanged", err)
	}
	var sum byte
	err = f.Guard(func() {
		for i := 0; i < len(data); i += 512 {
			sum ^= data[i]
		}
	})
	if !errors.Is(err, ErrChanged) {
		t.Fatalf("reading past the new end under Guard: %v, want an error wrapping ErrChanged", err)
	}
	t.Log(err)
}

// TestOpenRefusesSpecialFiles checks that a FIFO is refused before it is
// opened (opening one blocks until a writer comes), as is a directory.
func TestOpenRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.gguf")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, p := range []string{fifo, dir} {
		if _, err := Open(p); err == nil {
			t.Fatalf("%s: opened", p)
		}
	}
}
