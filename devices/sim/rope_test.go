package sim

import (
	"errors"
	"strings"
	"testing"

	"hybrid/devices"
	"hybrid/ops"
)

// TestRopeFreqsStayOnCPU checks that a simulated CUDA device refuses a rope
// with frequency factors, as the real one does, naming the op, while the
// simulated host CPU runs it.
func TestRopeFreqsStayOnCPU(t *testing.T) {
	hw, err := LoadHardware("h100-sxm")
	if err != nil {
		t.Fatal(err)
	}
	op := &ops.Op{Kind: ops.RoPE, Name: "blk.0.rope_q", Rope: ops.RopeParams{HeadDim: 4, Dims: 4, Base: 5e5, Freqs: []float32{1, 32}}}
	plain := &ops.Op{Kind: ops.RoPE, Name: "blk.0.rope_q", Rope: ops.RopeParams{HeadDim: 4, Dims: 4, Base: 5e5}}
	for _, d := range Open(hw, 1) {
		err := d.Supports(op)
		switch d.Info().Kind {
		case "cpu":
			if err != nil {
				t.Errorf("%s: %v", d.Name(), err)
			}
		default:
			if !errors.Is(err, devices.ErrUnsupported) || !strings.Contains(err.Error(), "blk.0.rope_q") || !strings.Contains(err.Error(), "frequency factors") {
				t.Errorf("%s: got %v, want a refusal naming the op and its factors", d.Name(), err)
			}
		}
		if err := d.Supports(plain); err != nil {
			t.Errorf("%s refused a rope without factors: %v", d.Name(), err)
		}
		d.Close()
	}
}
