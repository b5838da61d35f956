package llama

import (
	"reflect"
	"strings"
	"testing"

	"hybrid/ops"
	"hybrid/quant"
)

func testConfig() (Config, map[string]quant.Type) {
	c := Config{Arch: "llama", Layers: 2, Dim: 64, Heads: 8, KVHeads: 4, HeadDim: 8, FFN: 172,
		RopeDims: 8, RopeBase: 10000, Eps: 1e-5, Context: 128, Vocab: 512, TiedOutput: true}
	types := map[string]quant.Type{}
	for _, w := range c.Weights() {
		types[w.Name] = quant.F32
	}
	return c, types
}

func TestBuildDecodeAndPrefillGraphs(t *testing.T) {
	c, types := testConfig()
	for _, tc := range []struct {
		name    string
		n, past int
		ops     int
	}{
		{"decode", 1, 10, 1 + 2*15 + 2},
		{"prefill", 7, 0, 1 + 2*15 + 4}, // the last block's FFN runs on the last row: two last_row ops
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Build(c, types, tc.n, tc.past, 128)
			if err != nil {
				t.Fatal(err)
			}
			if len(g.Ops) != tc.ops {
				t.Fatalf("%d ops, want %d", len(g.Ops), tc.ops)
			}
			out := g.Values[g.Output]
			if out.Rows != 1 || out.Cols != c.Vocab {
				t.Fatalf("output is %dx%d, want 1x%d", out.Rows, out.Cols, c.Vocab)
			}
			var matFlops int64
			for _, op := range g.Ops {
				if op.Cost.BytesWritten <= 0 {
					t.Errorf("%s writes no bytes", op)
				}
				if op.Kind == ops.MatMul {
					in := g.Values[op.In[0]]
					if want := 2 * int64(in.Rows) * int64(op.Weight.Rows) * int64(op.Weight.Cols); op.Cost.FLOPs != want {
						t.Errorf("%s: %d FLOPs, want %d", op, op.Cost.FLOPs, want)
					}
					matFlops += op.Cost.FLOPs
				}
			}
			// Per layer: q, k, v, o, gate, up, down; then the output projection on one row.
			kv := c.KVHeads * c.HeadDim
			perTok := int64(2 * (c.Dim*c.Dim*2 + 2*kv*c.Dim + 3*c.FFN*c.Dim))
			// The last block's FFN runs on the last token only.
			ffn := int64(2 * 3 * c.FFN * c.Dim)
			want := int64(tc.n)*perTok*int64(c.Layers) - int64(tc.n-1)*ffn + int64(2*c.Vocab*c.Dim)
			if matFlops != want {
				t.Fatalf("mat-mul FLOPs %d, want %d", matFlops, want)
			}
		})
	}
}

func TestBuildRejectsBadSteps(t *testing.T) {
	c, types := testConfig()
	if _, err := Build(c, types, 0, 0, 128); err == nil {
		t.Error("zero tokens accepted")
	}
	if _, err := Build(c, types, 10, 120, 128); err == nil || !strings.Contains(err.Error(), "context") {
		t.Errorf("overflowing context: %v", err)
	}
	delete(types, "blk.1.ffn_up.weight")
	if _, err := Build(c, types, 1, 0, 128); err == nil || !strings.Contains(err.Error(), "blk.1.ffn_up.weight") {
		t.Errorf("missing tensor not named: %v", err)
	}
}

type fakeMeta map[string]any

func (m fakeMeta) String(k string) (string, bool) { v, ok := m[k].(string); return v, ok }
func (m fakeMeta) Uint(k string) (uint64, bool)   { v, ok := m[k].(int); return uint64(v), ok }
func (m fakeMeta) Float(k string) (float64, bool) { v, ok := m[k].(float64); return v, ok }

func TestConfigFromNamesBadKeys(t *testing.T) {
	c, _ := testConfig()
	good := fakeMeta{"general.architecture": "llama", "llama.block_count": 2, "llama.embedding_length": 64,
		"llama.attention.head_count": 8, "llama.attention.head_count_kv": 4, "llama.feed_forward_length": 172,
		"llama.context_length": 128, "llama.rope.freq_base": 10000.0, "llama.attention.layer_norm_rms_epsilon": 1e-5}
	shapes := map[string]TensorShape{}
	for _, w := range c.Weights() {
		d := []uint64{uint64(w.Cols), uint64(w.Rows)}
		if w.Rows == 1 {
			d = d[:1]
		}
		shapes[w.Name] = TensorShape{Type: quant.F32, Dims: d}
	}
	got, err := ConfigFrom(good, shapes)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("config %+v, want %+v", got, c)
	}
	for name, tc := range map[string]struct {
		key  string
		val  any
		want string
	}{
		"arch":       {"general.architecture", "gpt2", "general.architecture"},
		"no layers":  {"llama.block_count", nil, "llama.block_count is missing"},
		"zero heads": {"llama.attention.head_count", 0, "llama.attention.head_count"},
		"gqa":        {"llama.attention.head_count_kv", 3, "head_count_kv"},
		"huge":       {"llama.embedding_length", 1 << 30, "llama.embedding_length"},
		"eps":        {"llama.attention.layer_norm_rms_epsilon", -1.0, "epsilon"},
	} {
		t.Run(name, func(t *testing.T) {
			md := fakeMeta{}
			for k, v := range good {
				md[k] = v
			}
			if tc.val == nil {
				delete(md, tc.key)
			} else {
				md[tc.key] = tc.val
			}
			if _, err := ConfigFrom(md, shapes); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
	bad := map[string]TensorShape{}
	for k, v := range shapes {
		bad[k] = v
	}
	bad["blk.0.attn_k.weight"] = TensorShape{Type: quant.F32, Dims: []uint64{64, 64}}
	if _, err := ConfigFrom(good, bad); err == nil || !strings.Contains(err.Error(), "blk.0.attn_k.weight") {
		t.Fatalf("wrong tensor dims not named: %v", err)
	}
}
