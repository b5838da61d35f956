package sim

import (
	"errors"
	"strings"
	"testing"

	"hybrid/devices"
	"hybrid/ops"
)

// TestSimulatedKernelLimits checks that simulated devices run what the real
// kernels run (ropes with factors and in the NEOX pairing, per-head norms,
// biases) and refuse, naming the op, what they do not: the Metal rope's
// params hold at most 128 frequency factors.
func TestSimulatedKernelLimits(t *testing.T) {
	factors := func(n int) []float32 {
		f := make([]float32, n)
		for i := range f {
			f[i] = 1
		}
		return f
	}
	wide := &ops.Op{Kind: ops.RoPE, Name: "blk.0.rope_q", Rope: ops.RopeParams{HeadDim: 512, Dims: 512, Base: 5e5, Freqs: factors(256)}}
	run := []*ops.Op{
		{Kind: ops.RoPE, Name: "blk.0.rope_q", Rope: ops.RopeParams{HeadDim: 4, Dims: 4, Base: 5e5, Freqs: []float32{1, 32}}},
		{Kind: ops.RoPE, Name: "blk.0.rope_k", Rope: ops.RopeParams{HeadDim: 4, Dims: 4, Base: 1e6, Neox: true}},
		{Kind: ops.RMSNorm, Name: "blk.0.attn_q_norm", PerHead: true, Weight: &ops.Weight{Name: "n", Rows: 1, Cols: 4}},
		{Kind: ops.AddBias, Name: "blk.0.attn_q_bias", Weight: &ops.Weight{Name: "b", Rows: 1, Cols: 8}},
	}
	for _, name := range []string{"h100-sxm", "m4-pro"} {
		hw, err := LoadHardware(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range Open(hw, 1) {
			for _, op := range run {
				if d.Info().Kind == "coreml" && op.Kind == ops.RoPE {
					continue // the profile decides
				}
				if err := d.Supports(op); err != nil {
					t.Errorf("%s refused %s: %v", d.Name(), op, err)
				}
			}
			err := d.Supports(wide)
			if d.Info().Kind == "metal" {
				if !errors.Is(err, devices.ErrUnsupported) || !strings.Contains(err.Error(), "blk.0.rope_q") || !strings.Contains(err.Error(), "more than 128 frequency factors") {
					t.Errorf("%s: got %v, want a refusal naming the op and its factors", d.Name(), err)
				}
			} else if d.Info().Kind != "coreml" && err != nil {
				t.Errorf("%s refused 256 factors: %v", d.Name(), err)
			}
			d.Close()
		}
	}
}
