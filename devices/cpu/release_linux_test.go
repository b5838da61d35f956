package cpu

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestReleaseFileMapping checks that a shared file mapping is recognised and
// reads back the same after release drops its pages.
func TestReleaseFileMapping(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w")
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i*13 + 5)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), 0, len(data), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	b := m[100 : len(m)-100]
	if !sharedFileMapping(b) {
		t.Fatal("a shared file mapping was not recognised")
	}
	release(b)
	for i, v := range m {
		if v != data[i] {
			t.Fatalf("byte %d reads %d after release, want %d", i, v, data[i])
		}
	}
}
