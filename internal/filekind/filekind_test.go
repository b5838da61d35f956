package filekind

import (
	"io/fs"
	"testing"
)

func TestOf(t *testing.T) {
	for _, c := range []struct {
		m    fs.FileMode
		want string
	}{
		{0o644, "a regular file"},
		{fs.ModeDir, "a directory"},
		{fs.ModeNamedPipe, "a named pipe (FIFO)"},
		{fs.ModeSocket, "a socket"},
		{fs.ModeDevice | fs.ModeCharDevice, "a character device"},
		{fs.ModeDevice, "a block device"},
		{fs.ModeSymlink, "a symbolic link"},
	} {
		if got := Of(c.m); got != c.want {
			t.Errorf("Of(%v) = %q, want %q", c.m, got, c.want)
		}
	}
}
