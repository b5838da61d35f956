//go:build unix

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runMainEnv, set to 1, makes the test binary run the command's main (with
// its signal handling) on its arguments instead of the tests.
const runMainEnv = "HYBRID_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// TestInterruptedSynthLeavesNothing runs the real hybrid synth (this test
// binary running main) on a model big enough to take seconds, interrupts it
// once its temporary file beside the output has grown, and checks that the
// temporary file is gone, the existing output untouched, and the exit code
// the shell's for that signal.
func TestInterruptedSynthLeavesNothing(t *testing.T) {
	for _, c := range []struct {
		sig  syscall.Signal
		code int
	}{
		{syscall.SIGINT, 130},
		{syscall.SIGTERM, 143},
	} {
		t.Run(c.sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "model.gguf")
			if err := os.WriteFile(out, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			// tinyllama-1.1b in Q8_0 is 1.2 GB: seconds to write, where
			// the signal comes once 8 MB of it are on disk.
			cmd := exec.Command(os.Args[0], "synth", "--preset", "tinyllama-1.1b", "--type", "Q8_0", "--threads", "1", "-o", out)
			cmd.Env = append(os.Environ(), runMainEnv+"=1")
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stderr, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()

			var err error
			deadline := time.After(2 * time.Minute)
		wait:
			for {
				select {
				case err = <-exited:
					t.Fatalf("synth ended before it was interrupted (%v): %s", err, stderr.Bytes())
				case <-deadline:
					cmd.Process.Kill()
					<-exited
					t.Fatal("no temporary file appeared beside the output in 2 minutes")
				case <-time.After(2 * time.Millisecond):
					if partial(dir) >= 8<<20 {
						break wait
					}
				}
			}
			if err := cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err = <-exited:
			case <-time.After(time.Minute):
				cmd.Process.Kill()
				<-exited
				t.Fatalf("synth still running a minute after %v", c.sig)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != c.code {
				t.Errorf("synth ended with %v after %v, want exit code %d", err, c.sig, c.code)
			}
			if got := stderr.String(); !strings.Contains(got, "hybrid: interrupted; removed the partial output\n") {
				t.Errorf("stderr does not say the partial output was removed:\n%s", got)
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if e.Name() != "model.gguf" {
					t.Errorf("%s left beside the output", e.Name())
				}
			}
			if b, _ := os.ReadFile(out); string(b) != "old" {
				t.Errorf("the existing output changed: %.20q", b)
			}
		})
	}
}

// partial returns the size of the largest file in dir other than the
// output: the temporary file being written.
func partial(dir string) int64 {
	var n int64
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && e.Name() != "model.gguf" {
			n = max(n, fi.Size())
		}
	}
	return n
}
