package configs

import (
	"fmt"
	"io"
	"io/fs"
	"os"

	"hybrid/internal/filekind"
)

// ReadFile reads a file of the format: a regular file of at most the
// format's size limit. Every config read from disk comes through here.
//
// What the path names (through any symbolic links) is looked at before it
// is opened: a directory, a named pipe, a device or a socket is refused
// with an *Error saying which (Issue NotRegular), since opening a FIFO
// blocks until a writer comes and /dev/zero never ends. A file over the
// limit is refused by its size (TooLarge) without reading it. The file is
// opened without blocking where the system allows (openFlags) and looked at
// again once open, in case the path was replaced in between, and at most
// one byte past the limit is read, in case the file grew.
func (f *Format) ReadFile(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := f.checkFile(path, info); err != nil {
		return nil, err
	}
	file, err := os.OpenFile(path, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	if info, err = file.Stat(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := f.checkFile(path, info); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(file, int64(f.limit())+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > f.limit() {
		return nil, f.fail(path, 0, Problem{Issue: TooLarge})
	}
	return b, nil
}

// checkFile refuses what is not a regular file, or is one over the limit.
func (f *Format) checkFile(path string, info fs.FileInfo) error {
	if m := info.Mode(); !m.IsRegular() {
		return f.fail(path, 0, Problem{Issue: NotRegular, Got: filekind.Of(m)})
	}
	if info.Size() > int64(f.limit()) {
		return f.fail(path, 0, Problem{Issue: TooLarge})
	}
	return nil
}
