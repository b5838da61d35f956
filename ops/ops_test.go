package ops

import "testing"

func TestKindsTable(t *testing.T) {
	want := []struct {
		kind   Kind
		name   string
		inputs int
		weight bool
	}{
		{Embed, "embed", 0, true},
		{RMSNorm, "rms_norm", 1, true},
		{MatMul, "mat_mul", 1, true},
		{RoPE, "rope", 1, false},
		{Attention, "attention", 3, false},
		{SiLUMul, "silu_mul", 2, false},
		{Add, "add", 2, false},
		{LastRow, "last_row", 1, false},
		{AddBias, "add_bias", 1, true},
	}
	ks := Kinds()
	if len(ks) != len(want) {
		t.Fatalf("Kinds() = %v, want %d kinds", ks, len(want))
	}
	for i, w := range want {
		t.Run(w.name, func(t *testing.T) {
			k := ks[i]
			if k != w.kind || k.String() != w.name || k.Inputs() != w.inputs || k.NeedsWeight() != w.weight || !k.Known() {
				t.Errorf("kind %d: %q, %d inputs, weight %v, known %v; want %q, %d, %v", k, k, k.Inputs(), k.NeedsWeight(), k.Known(), w.name, w.inputs, w.weight)
			}
			if p, err := ParseKind(w.name); err != nil || p != w.kind {
				t.Errorf("ParseKind(%q) = %v, %v", w.name, p, err)
			}
		})
	}
	for _, k := range []Kind{0, AddBias + 1, 99} {
		if k.Known() || k.Inputs() != -1 || k.NeedsWeight() {
			t.Errorf("%s: known %v, %d inputs, weight %v", k, k.Known(), k.Inputs(), k.NeedsWeight())
		}
	}
	if s := Kind(99).String(); s != "kind(99)" {
		t.Errorf("Kind(99) is %q", s)
	}
	if _, err := ParseKind("matmul"); err == nil {
		t.Error(`ParseKind("matmul") succeeded`)
	}
}
