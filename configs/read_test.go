//go:build linux || darwin

package configs

import (
	"errors"
	"testing"
	"time"

	"hybrid/internal/testfiles"
)

// TestReadFileRefusesSpecialFiles: what is not a regular file is refused
// before it is opened or read, naming the file and what it is; a file over
// the limit is refused by its size. On the code before ReadFile looked
// first, the FIFO blocked (the test fails on its deadline) and the
// directory was a read error that named no kind.
func TestReadFileRefusesSpecialFiles(t *testing.T) {
	sp := testfiles.Make(t, ".yaml", "name: a\n")
	fifo, zero, sub, big := sp.FIFO, sp.ZeroLink, sp.Dir, sp.Big
	for _, c := range []struct {
		name, path string
		issue      Issue
		msg        string
	}{
		{"fifo", fifo, NotRegular, "a named pipe (FIFO), not a regular file: a test file must be one"},
		{"dev zero", "/dev/zero", NotRegular, "a character device, not a regular file: a test file must be one"},
		{"link to dev zero", zero, NotRegular, "a character device, not a regular file: a test file must be one"},
		{"directory", sub, NotRegular, "a directory, not a regular file: a test file must be one"},
		{"2 MB file", big, TooLarge, "larger than 1 MiB, the most a test file may be"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := readWithin(t, &testFormat, c.path)
			var e *Error
			if !errors.As(err, &e) || e.Issue != c.issue || e.Path != c.path || e.Line != 0 || e.Msg != c.msg {
				t.Fatalf("error %v; want %s: %s", err, c.path, c.msg)
			}
			if err.Error() != c.path+": "+c.msg {
				t.Fatalf("%q does not begin with the file", err)
			}
		})
	}
}

// readWithin reads path with f, failing the test if that takes over ten
// seconds (a FIFO opened for reading waits for a writer).
func readWithin(t *testing.T, f *Format, path string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := f.ReadFile(path)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("reading %s did not return in 10 s", path)
		return nil
	}
}
