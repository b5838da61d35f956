//go:build unix

package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRefusesSpecial checks that a FIFO or a device at the path, or a link
// to one, is refused with an error naming the path and what it is, and
// stays what it was, with no temporary file made beside it.
func TestRefusesSpecial(t *testing.T) {
	for _, c := range []struct {
		name, kind string
		make       func(path string) error
		root       bool
	}{
		{"fifo", "a named pipe", func(p string) error { return syscall.Mkfifo(p, 0o644) }, false},
		// A node of /dev/null's numbers (1, 3 on Linux; the test checks the
		// kind, not the device) made in the test's own folder.
		{"char device", "a character device", func(p string) error {
			return syscall.Mknod(p, syscall.S_IFCHR|0o644, 1<<8|3)
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.root && os.Geteuid() != 0 {
				t.Skip("making a device node needs root")
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "out")
			if err := c.make(path); err != nil {
				t.Skipf("cannot make %s: %v", c.kind, err)
			}
			link := filepath.Join(dir, "link")
			if err := os.Symlink("out", link); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{path, link} {
				err := Write(p, []byte("x"), 0o644)
				if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "it is "+c.kind) {
					t.Errorf("Write to %s: %v", p, err)
				}
			}
			fi, err := os.Lstat(path)
			if err != nil || fi.Mode().Type() != want(c.kind) {
				t.Errorf("%s is no longer %s: %v, %v", path, c.kind, fi.Mode(), err)
			}
			only(t, dir, "link", "out")
		})
	}
}

func want(kind string) os.FileMode {
	if kind == "a named pipe" {
		return os.ModeNamedPipe
	}
	return os.ModeDevice | os.ModeCharDevice
}

// TestDevNull checks that /dev/null itself is refused. Only root can replace
// it, so only root can see the check matter. Create alone is called, never
// Commit: if it wrongly succeeds, the test aborts the write and /dev/null is
// left alone.
func TestDevNull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root could replace /dev/null")
	}
	f, err := Create("/dev/null", 0o644)
	if err == nil {
		f.Abort()
		t.Fatal("Create(/dev/null) succeeded")
	}
	if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "/dev/null: it is a character device") {
		t.Errorf("Create(/dev/null): %v", err)
	}
	if fi, err := os.Lstat("/dev/null"); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("/dev/null is no longer a character device: %v, %v", fi.Mode(), err)
	}
	ents, _ := os.ReadDir("/dev")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".null.tmp") {
			t.Errorf("temporary file /dev/%s made", e.Name())
		}
	}
}

// TestUmask checks that a new file gets the mode asked for less the umask,
// as os.WriteFile's would, and a replaced file keeps its mode whatever the
// umask.
func TestUmask(t *testing.T) {
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	if err := Write(path, []byte("x"), 0o666); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, path); got != 0o640 {
		t.Errorf("new file has mode %v, want 0666 less umask 027: 0640", got)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("y"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, path); got != 0o666 {
		t.Errorf("replaced file has mode %v, want 0666 kept", got)
	}
}
