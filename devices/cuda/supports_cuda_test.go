//go:build cuda

package cuda

import (
	"errors"
	"strings"
	"testing"

	"hybrid/devices"
	"hybrid/ops"
)

// TestSupportsRopeFreqs checks that the kernels' rope, which has no
// frequency factors, refuses an op that carries them, naming it. Supports
// reads only the op, so no GPU is needed.
func TestSupportsRopeFreqs(t *testing.T) {
	d := &Device{name: "cuda:0"}
	op := &ops.Op{Kind: ops.RoPE, Name: "blk.0.rope_k", Rope: ops.RopeParams{HeadDim: 4, Dims: 4, Base: 5e5, Freqs: []float32{1, 32}}}
	if err := d.Supports(op); !errors.Is(err, devices.ErrUnsupported) || !strings.Contains(err.Error(), "blk.0.rope_k") || !strings.Contains(err.Error(), "frequency factors") {
		t.Fatalf("got %v, want a refusal naming the op and its factors", err)
	}
	op.Rope.Freqs = nil
	if err := d.Supports(op); err != nil {
		t.Fatalf("a rope without factors: %v", err)
	}
}
