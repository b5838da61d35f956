package runtime

import (
	"testing"

	_ "hybrid/devices/cpu" // the CPU backend registers itself
)

// TestComparePolicies compares cpu-only with cpu-split over two CPU devices
// on the built-in model: one row each, in order; cpu-only keeps every op on
// one device and copies nothing, cpu-split uses both and copies values
// between them every token.
func TestComparePolicies(t *testing.T) {
	m, err := LoadModel("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c, err := ComparePolicies(m, CompareOptions{Policies: []string{"cpu-only", "cpu-split"}, Threads: 1, CPUs: 2,
		Prompt: 4, Gen: 2, Reps: 1})
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != m.Path || c.Prompt != 4 || c.Gen != 2 || c.Reps != 1 || c.Hardware != "" {
		t.Errorf("document: %+v", c)
	}
	if len(c.Policies) != 2 {
		t.Fatalf("%d rows, want 2: %+v", len(c.Policies), c.Policies)
	}
	g, err := m.Graph(1, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		policy  string
		devices int
		copies  bool
	}{
		{"cpu-only", 1, false},
		{"cpu-split", 2, true},
	} {
		r := c.Policies[i]
		t.Run(want.policy, func(t *testing.T) {
			if r.Policy != want.policy || r.Conversions != "boundary" || r.Simulated || r.FP16Ops != 0 || r.ConvertMS != 0 {
				t.Errorf("row: %+v", r)
			}
			n := 0
			for _, k := range r.Placement {
				n += k
			}
			if len(r.Placement) != want.devices || n != len(g.Ops) {
				t.Errorf("placement %v: want %d ops on %d devices", r.Placement, len(g.Ops), want.devices)
			}
			if got := r.CopiesPerToken > 0; got != want.copies || (r.BytesPerToken > 0) != want.copies {
				t.Errorf("%g copies, %g bytes per token; want copies: %v", r.CopiesPerToken, r.BytesPerToken, want.copies)
			}
			if r.PredictedMS <= 0 || r.AccountedMS <= 0 || r.WallMS <= 0 || r.PrefillTokS <= 0 || r.DecodeTokS <= 0 ||
				r.AccountedPrefillTokS <= 0 || r.AccountedDecodeTokS <= 0 {
				t.Errorf("a time or speed is not positive: %+v", r)
			}
		})
	}
}
