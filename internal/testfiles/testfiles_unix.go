//go:build linux || darwin

// Package testfiles makes the hostile inputs that tests of file readers
// need: a FIFO (opening one blocks), a link to /dev/zero (endless), a
// directory, and a file over a size limit, each named like a real input.
package testfiles

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Special are paths of files a reader of regular files must refuse.
type Special struct {
	FIFO     string // a named pipe
	ZeroLink string // a symbolic link to /dev/zero
	Dir      string // a directory
	Big      string // a regular file: head, then comment lines past 2 MiB
}

// Make creates them in a temporary directory of t, named with ext (".yaml")
// as the inputs they stand for; Big is head followed by 2 MiB of a comment
// line, so that it would parse if it were read.
func Make(t testing.TB, ext string, head string) Special {
	t.Helper()
	dir := t.TempDir()
	s := Special{FIFO: filepath.Join(dir, "fifo"+ext), ZeroLink: filepath.Join(dir, "zero"+ext),
		Dir: filepath.Join(dir, "dir"+ext), Big: filepath.Join(dir, "big"+ext)}
	if err := syscall.Mkfifo(s.FIFO, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", s.ZeroLink); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(s.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 0, len(head)+2<<20+8)
	big = append(append(big, head...), "# "...)
	for len(big) < len(head)+2<<20 {
		big = append(big, 'x')
	}
	if err := os.WriteFile(s.Big, append(big, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}
