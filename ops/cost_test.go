package ops

import "testing"

// TestCostOf checks each kind's cost on testGraph (2 tokens after 3, width 8,
// f16 weights but an f32 norm) against numbers worked out by hand.
func TestCostOf(t *testing.T) {
	g := testGraph()
	const act = 2 * 8 * 4 // one [2,8] f32 value in bytes
	for _, c := range []struct {
		op   string
		want Cost
	}{
		// The two tokens' rows of the f16 table; one FLOP an element.
		{"emb", Cost{FLOPs: 16, BytesRead: 2 * 8 * 2, BytesWritten: act}},
		// Square, sum, scale, multiply: 4 FLOPs an element; reads the f32 [8] weight.
		{"norm", Cost{FLOPs: 4 * 16, BytesRead: act + 8*4, BytesWritten: act}},
		// 2·rows·out·k FLOPs; reads the whole f16 8×8 weight.
		{"q", Cost{FLOPs: 2 * 2 * 8 * 8, BytesRead: act + 8*8*2, BytesWritten: act}},
		{"k", Cost{FLOPs: 2 * 2 * 4 * 8, BytesRead: act + 4*8*2, BytesWritten: 2 * 4 * 4}},
		// 3 FLOPs an element.
		{"rq", Cost{FLOPs: 3 * 16, BytesRead: act, BytesWritten: act}},
		// q [2,8], k and v [2,4] in; reads the f16 K and V of the 3+2 positions
		// up to the last token (2·2·5·4 bytes) and writes those of its 2
		// (2·2·2·4); 2 rows × 2 heads × (3 + 3/2 = 4) keys on average ×
		// (4·headDim + 5) FLOPs.
		{"attn", Cost{FLOPs: 2 * 2 * 4 * (4*4 + 5), BytesRead: act + 2*act/2 + 2*2*5*4, BytesWritten: act + 2*2*2*4}},
		// 5 FLOPs an element.
		{"gate", Cost{FLOPs: 5 * 16, BytesRead: 2 * act, BytesWritten: act}},
		{"res", Cost{FLOPs: 16, BytesRead: 2 * act, BytesWritten: act}},
		// Reads only the row it copies.
		{"last", Cost{FLOPs: 0, BytesRead: 8 * 4, BytesWritten: 8 * 4}},
		// One add an element; reads its row and the f32 [8] bias.
		{"bias", Cost{FLOPs: 8, BytesRead: 8*4 + 8*4, BytesWritten: 8 * 4}},
	} {
		t.Run(c.op, func(t *testing.T) {
			if got := CostOf(g, byName(g, c.op)); got != c.want {
				t.Errorf("%+v, want %+v", got, c.want)
			}
		})
	}
	// The hand numbers above cover every kind.
	seen := map[Kind]bool{}
	for _, name := range []string{"emb", "norm", "q", "rq", "attn", "gate", "res", "last", "bias"} {
		seen[byName(g, name).Kind] = true
	}
	if len(seen) != len(Kinds()) {
		t.Errorf("costs checked for %d kinds of %d", len(seen), len(Kinds()))
	}
}

// TestCostOfAttentionDecode checks the KV cache is charged in f16 and the
// attended span grows with the past.
func TestCostOfAttentionDecode(t *testing.T) {
	g := alone(Op{Kind: Attention, Name: "attn", Attn: AttnParams{Heads: 8, KVHeads: 2, HeadDim: 16, Context: 256}},
		shape{1, 128}, shape{1, 128}, shape{1, 32}, shape{1, 32})
	g.Past = 99
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	got := CostOf(g, byName(g, "attn"))
	kvRow := int64(2 * 16) // KV heads × head dim
	want := Cost{
		FLOPs:        1 * 8 * 100 * (4*16 + 5),
		BytesRead:    (128+32+32)*4 + 2*2*100*kvRow, // q, k, v, then K and V of 100 positions at 2 bytes
		BytesWritten: 128*4 + 2*2*1*kvRow,
	}
	if got != want {
		t.Errorf("%+v, want %+v", got, want)
	}
}
