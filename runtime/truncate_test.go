//go:build linux || darwin

package runtime

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"hybrid/devices/cpu/kernels"
	"hybrid/internal/testmodels"
	"hybrid/models/gguf"
)

// TestModelTruncatedWhileInUse truncates the model file under a running
// session. The next step is an error naming the change, and so is a step
// already under way when the weights' pages vanish (forward, without the
// check before it: the CPU kernels' reads fault and are recovered). Before,
// hybrid died of SIGBUS in a kernel.
func TestModelTruncatedWhileInUse(t *testing.T) {
	src, err := os.Open(testmodels.Path(t, "stories260K-Q8_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	path := filepath.Join(t.TempDir(), "m.gguf")
	dst, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()

	m, err := LoadModel(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := NewSession(m, SessionOptions{Policy: "cpu-only", Threads: 2, Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Exec.Forward([]int32{1, 2, 3}, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exec.forward([]int32{4}, 3); !errors.Is(err, kernels.ErrFault) {
		t.Fatalf("a step over vanished weights: %v, want a memory fault error", err)
	}
	_, err = s.Exec.Forward([]int32{4}, 3)
	if !errors.Is(err, gguf.ErrChanged) {
		t.Fatalf("the next step: %v, want an error wrapping gguf.ErrChanged", err)
	}
	t.Log(err)
}
