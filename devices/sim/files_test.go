//go:build linux || darwin

package sim

import (
	"errors"
	"strings"
	"testing"
	"time"

	"hybrid/configs"
	"hybrid/internal/testfiles"
)

// TestLoadHardwareRefusesSpecialFiles: a hardware profile path that is not
// a regular file is refused before it is read, naming the file and what it
// is. Before, LoadHardware read with os.ReadFile: /dev/zero (or a link to
// it) ran out of memory and a FIFO blocked forever.
func TestLoadHardwareRefusesSpecialFiles(t *testing.T) {
	sp := testfiles.Make(t, ".yaml", good)
	fifo, zero, sub, big := sp.FIFO, sp.ZeroLink, sp.Dir, sp.Big
	for _, c := range []struct {
		name, path string
		issue      configs.Issue
		has        string
	}{
		{"fifo", fifo, configs.NotRegular, "a named pipe (FIFO), not a regular file"},
		{"dev zero", "/dev/zero", configs.NotRegular, "a character device, not a regular file"},
		{"link to dev zero", zero, configs.NotRegular, "a character device, not a regular file"},
		{"directory", sub, configs.NotRegular, "a directory, not a regular file"},
		{"2 MB file", big, configs.TooLarge, "larger than 1 MiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := LoadHardware(c.path)
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("LoadHardware(%s) did not return in 10 s", c.path)
			}
			var e *configs.Error
			if !errors.As(err, &e) || e.Issue != c.issue || e.Path != c.path || e.Line != 0 ||
				!strings.Contains(err.Error(), c.path+": "+c.has) {
				t.Fatalf("error %v; want %s: %s", err, c.path, c.has)
			}
		})
	}
}
