//go:build linux || darwin

package gguf

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"syscall"

	"hybrid/internal/filekind"
)

// Open memory-maps the GGUF file at path, read-only, and parses it. Tensor
// data stays in the mapping, paged in as it is read; Close unmaps it. A file
// truncated or rewritten while it is open is noticed: Check says so, and
// readers that Guard their reads (or recover faults as the CPU device's
// kernels do) get an error wrapping ErrChanged instead of a crash. Only a
// regular file is opened: a FIFO or a device is refused before any read.
func Open(path string) (*File, error) {
	if st, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf: %s: %s, not a regular file", path, filekind.Of(st.Mode()))
	}
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	keep := false
	defer func() {
		if !keep {
			fd.Close()
		}
	}()
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
	var f *File
	perr := guardRead(path, func() { f, err = Parse(data, path) })
	if err = errors.Join(perr, err); err != nil {
		syscall.Munmap(data)
		return nil, err
	}
	f.release = func() error { return syscall.Munmap(data) }
	f.origin = &origin{fd: fd, size: size, modTime: st.ModTime()}
	keep = true
	return f, nil
}

// guardRead runs fn, which reads a fresh mapping, and turns a memory fault
// in it into an error.
func guardRead(path string, fn func()) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if !IsFault(r) {
				panic(r)
			}
			err = fmt.Errorf("gguf: %s: %w: a read of its mapping faulted while parsing it", path, ErrChanged)
		}
	}()
	fn()
	return nil
}
