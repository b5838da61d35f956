//go:build linux || darwin

package planner

import (
	"errors"
	"strings"
	"testing"
	"time"

	"hybrid/configs"
	"hybrid/internal/testfiles"
)

// TestLoadRefusesSpecialFiles: a policy or cost profile path that is not a
// regular file is refused before it is opened, naming the file and what it
// is, and one over 1 MiB by its size. Before, a FIFO blocked LoadPolicy and
// LoadProfile forever, and /dev/zero or a directory was a read error that
// did not say what the path was.
func TestLoadRefusesSpecialFiles(t *testing.T) {
	sp := testfiles.Make(t, ".yaml", "name: big\n")
	fifo, zero, sub, big := sp.FIFO, sp.ZeroLink, sp.Dir, sp.Big
	loaders := []struct {
		name string
		load func(string) error
		what string
	}{
		{"policy", func(p string) error { _, err := LoadPolicy(p); return err }, "policy file"},
		{"profile", func(p string) error { _, err := LoadProfile(p); return err }, "cost profile"},
	}
	for _, l := range loaders {
		for _, c := range []struct {
			name, path string
			issue      configs.Issue
			msg        string
		}{
			{"fifo", fifo, configs.NotRegular, "a named pipe (FIFO), not a regular file: a " + l.what + " must be one"},
			{"dev zero", "/dev/zero", configs.NotRegular, "a character device, not a regular file: a " + l.what + " must be one"},
			{"link to dev zero", zero, configs.NotRegular, "a character device, not a regular file: a " + l.what + " must be one"},
			{"directory", sub, configs.NotRegular, "a directory, not a regular file: a " + l.what + " must be one"},
			{"2 MB file", big, configs.TooLarge, "larger than 1 MiB, the most a " + l.what + " may be"},
		} {
			t.Run(l.name+" "+c.name, func(t *testing.T) {
				done := make(chan error, 1)
				start := time.Now()
				go func() { done <- l.load(c.path) }()
				var err error
				select {
				case err = <-done:
				case <-time.After(10 * time.Second):
					t.Fatalf("loading %s did not return in 10 s", c.path)
				}
				var e *configs.Error
				if !errors.As(err, &e) || e.Issue != c.issue || e.Path != c.path || e.Line != 0 || e.Msg != c.msg ||
					!strings.Contains(err.Error(), c.path+": "+c.msg) {
					t.Fatalf("error %v; want %s: %s", err, c.path, c.msg)
				}
				// Refused by its size, not read: generous for a busy machine.
				if d := time.Since(start); d > 3*time.Second {
					t.Errorf("took %v", d)
				}
			})
		}
	}
}
