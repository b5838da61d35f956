//go:build cuda

package cuda

import (
	"errors"
	"strings"
	"testing"

	"hybrid/devices"
	"hybrid/ops"
	"hybrid/quant"
)

// TestSupports checks what Supports accepts and refuses of what Qwen2,
// Qwen3 and Llama 3.1+ need (per-head norms, biases, NEOX ropes, ropes with
// frequency factors, the low-bit weight types), and that a refusal names the
// op. Supports reads only the op, so no GPU is needed.
func TestSupports(t *testing.T) {
	d := &Device{name: "cuda:0"}
	one := func(n int) *ops.Weight { return &ops.Weight{Name: "w", Type: quant.F32, Rows: 1, Cols: n} }
	mat := func(typ quant.Type) *ops.Weight { return &ops.Weight{Name: "m", Type: typ, Rows: 8, Cols: 512} }
	rope := ops.RopeParams{HeadDim: 4, Dims: 4, Base: 5e5}
	freqs, neox := rope, rope
	freqs.Freqs = []float32{1, 32}
	neox.Neox = true
	short := freqs
	short.Freqs = []float32{1}
	odd := ops.RopeParams{HeadDim: 5, Dims: 4, Base: 1e4}
	for _, c := range []struct {
		name string
		op   ops.Op
		ok   bool
		why  string // in the refusal
	}{
		{"rope with factors", ops.Op{Kind: ops.RoPE, Rope: freqs}, true, ""},
		{"neox rope", ops.Op{Kind: ops.RoPE, Rope: neox}, true, ""},
		{"per-head norm", ops.Op{Kind: ops.RMSNorm, PerHead: true, Weight: one(128)}, true, ""},
		{"add_bias", ops.Op{Kind: ops.AddBias, Weight: one(896)}, true, ""},
		{"Q2_K", ops.Op{Kind: ops.MatMul, Weight: mat(quant.Q2_K)}, true, ""},
		{"Q3_K", ops.Op{Kind: ops.MatMul, Weight: mat(quant.Q3_K)}, true, ""},
		{"IQ4_NL", ops.Op{Kind: ops.Embed, Weight: mat(quant.IQ4_NL)}, true, ""},
		{"IQ4_XS", ops.Op{Kind: ops.MatMul, Weight: mat(quant.IQ4_XS)}, true, ""},
		{"factors short", ops.Op{Kind: ops.RoPE, Rope: short}, false, "frequency factors"},
		{"odd head", ops.Op{Kind: ops.RoPE, Rope: odd}, false, "odd head size"},
		{"bias of two rows", ops.Op{Kind: ops.AddBias, Weight: &ops.Weight{Name: "b", Type: quant.F32, Rows: 2, Cols: 8}}, false, "one-row weight"},
		{"Q8_K", ops.Op{Kind: ops.MatMul, Weight: mat(quant.Q8_K)}, false, "Q8_K"},
	} {
		t.Run(c.name, func(t *testing.T) {
			op := c.op
			op.Name = "blk.0.op"
			err := d.Supports(&op)
			if c.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, devices.ErrUnsupported) || !strings.Contains(err.Error(), "blk.0.op") || !strings.Contains(err.Error(), c.why) {
				t.Fatalf("got %v, want a refusal naming the op and %q", err, c.why)
			}
		})
	}
}
