//go:build linux || darwin

package gguf

import (
	"fmt"
	"math"
	"os"
	"syscall"
)

// Open memory-maps the GGUF file at path, read-only, and parses it. Tensor
// data stays in the mapping, paged in as it is read; Close unmaps it. The
// file must not be truncated while it is open: reading a page past its new
// end would fault.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fd.Close() // the mapping outlives the descriptor
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf: %s: not a regular file", path)
	}
	size := st.Size()
	if size == 0 {
		return Parse(nil, path) // mmap refuses length 0; Parse says why the file is bad
	}
	if size > math.MaxInt {
		return nil, fmt.Errorf("gguf: %s: %d bytes is too large to map on this platform", path, size)
	}
	data, err := syscall.Mmap(int(fd.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: mmap: %w", path, err)
	}
	f, err := Parse(data, path)
	if err != nil {
		syscall.Munmap(data)
		return nil, err
	}
	f.release = func() error { return syscall.Munmap(data) }
	return f, nil
}
