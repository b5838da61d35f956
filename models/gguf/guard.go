package gguf

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"
)

// ErrChanged is wrapped by the errors of a mapped file that was truncated or
// rewritten while open: its tensor data can no longer be trusted, and a read
// past a truncated end would fault.
var ErrChanged = errors.New("model file changed while in use")

// ErrFault is wrapped when reading mapped memory faulted (SIGBUS): the file
// under the mapping lost the page read, almost always because it was
// truncated.
var ErrFault = errors.New("memory fault reading the mapped model file")

// origin is what a mapped file was when it was opened.
type origin struct {
	fd      *os.File
	size    int64
	modTime time.Time
}

// Check reports whether the file under f's mapping is still what was
// mapped: the same size and modification time. It returns nil for a file
// parsed from memory. It is one fstat, cheap enough to call before every
// step.
func (f *File) Check() error {
	if f.origin == nil || f.origin.fd == nil {
		return nil
	}
	st, err := f.origin.fd.Stat()
	if err != nil {
		return fmt.Errorf("gguf: %s: %w: %v", f.Path, ErrChanged, err)
	}
	switch {
	case st.Size() < f.origin.size:
		return fmt.Errorf("gguf: %s: %w: it was truncated from %d to %d bytes", f.Path, ErrChanged, f.origin.size, st.Size())
	case st.Size() != f.origin.size || !st.ModTime().Equal(f.origin.modTime):
		return fmt.Errorf("gguf: %s: %w: it was rewritten in place (size %d, modified %s)", f.Path, ErrChanged, st.Size(), st.ModTime().Format(time.RFC3339))
	}
	return nil
}

// Guard runs fn, which reads f's mapped tensor data on this goroutine, and
// turns a memory fault in it into an error (Check's, when the file changed)
// instead of a crash of the whole process.
func (f *File) Guard(fn func()) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if !IsFault(r) {
				panic(r)
			}
			err = f.faultErr()
		}
	}()
	fn()
	return nil
}

// faultErr is the error for a fault reading f's data.
func (f *File) faultErr() error {
	if err := f.Check(); err != nil {
		return err
	}
	return fmt.Errorf("gguf: %s: %w", f.Path, ErrFault)
}

// IsFault reports whether a recovered panic value is a memory fault that
// debug.SetPanicOnFault turned into a panic.
func IsFault(r any) bool {
	_, ok := r.(interface{ Addr() uintptr })
	return ok
}
