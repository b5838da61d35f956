package llama

import (
	"strings"
	"testing"

	"hybrid/ops"
	"hybrid/quant"
)

// qwenMeta is goodMeta's model under another architecture's keys.
func qwenMeta(arch string) fakeMeta {
	md := fakeMeta{"general.architecture": arch}
	for k, v := range goodMeta() {
		if k != "general.architecture" {
			md[arch+strings.TrimPrefix(k, "llama")] = v
		}
	}
	return md
}

// TestQwenConfigs checks what qwen2 and qwen3 files change: the NEOX rope,
// Q/K/V biases read where the file has them, qwen3's per-head norms of Q
// and K (required), and the graph each gives.
func TestQwenConfigs(t *testing.T) {
	base, _ := testConfig()
	for _, tc := range []struct {
		arch   string
		biases bool
		qkNorm bool
	}{
		{"qwen2", true, false},
		{"qwen2", false, false},
		{"qwen3", false, true},
		{"qwen3", true, true},
		{"llama", true, false},
	} {
		name := tc.arch
		if tc.biases {
			name += " with biases"
		}
		t.Run(name, func(t *testing.T) {
			want := base
			want.Arch, want.RopeNeox, want.QKNorm = tc.arch, tc.arch != "llama", tc.qkNorm
			if tc.biases {
				want.Biases = map[string]bool{}
				for _, l := range []string{"0", "1"} {
					for _, p := range []string{"attn_q", "attn_k", "attn_v"} {
						want.Biases["blk."+l+"."+p+".bias"] = true
					}
				}
			}
			shapes := shapesOf(want)
			md := goodMeta()
			if tc.arch != "llama" {
				md = qwenMeta(tc.arch)
			}
			got, err := ConfigFrom(md, shapes)
			if err != nil {
				t.Fatal(err)
			}
			if got.RopeNeox != want.RopeNeox || got.QKNorm != want.QKNorm || len(got.Biases) != len(want.Biases) {
				t.Fatalf("neox %v, qk norm %v, %d biases; want %v, %v, %d", got.RopeNeox, got.QKNorm, len(got.Biases), want.RopeNeox, want.QKNorm, len(want.Biases))
			}
			types := map[string]quant.Type{}
			for n := range shapes {
				types[n] = quant.F32
			}
			g, err := Build(got, types, 3, 0, 128)
			if err != nil {
				t.Fatal(err)
			}
			// Layer 0's attention inputs, in order, by kind.
			var seq []string
			for _, op := range g.Ops {
				if op.Layer != 0 || op.Kind == ops.Attention {
					if op.Kind == ops.Attention {
						break
					}
					continue
				}
				s := op.Name
				switch {
				case op.Kind == ops.RoPE && op.Rope.Neox:
					s += "(neox)"
				case op.Kind == ops.RMSNorm && op.PerHead:
					s += "(per head)"
				}
				seq = append(seq, s)
			}
			var wantSeq []string
			rope := ""
			if tc.arch != "llama" {
				rope = "(neox)"
			}
			wantSeq = append(wantSeq, "blk.0.attn_norm")
			for _, p := range []string{"attn_q", "attn_k", "attn_v"} {
				wantSeq = append(wantSeq, "blk.0."+p)
				if tc.biases {
					wantSeq = append(wantSeq, "blk.0."+p+"_bias")
				}
			}
			if tc.qkNorm {
				wantSeq = append(wantSeq, "blk.0.attn_q_norm(per head)", "blk.0.attn_k_norm(per head)")
			}
			wantSeq = append(wantSeq, "blk.0.rope_q"+rope, "blk.0.rope_k"+rope)
			if strings.Join(seq, " ") != strings.Join(wantSeq, " ") {
				t.Errorf("layer 0 before attention:\n  %s\nwant\n  %s", strings.Join(seq, " "), strings.Join(wantSeq, " "))
			}
		})
	}
}

// TestQwenRefusals checks the files hybrid refuses by name.
func TestQwenRefusals(t *testing.T) {
	base, _ := testConfig()
	q3 := base
	q3.Arch, q3.RopeNeox, q3.QKNorm = "qwen3", true, true
	for name, tc := range map[string]struct {
		md     fakeMeta
		shapes map[string]TensorShape
		want   string
	}{
		"unknown architecture": {fakeMeta{"general.architecture": "gemma3"}, shapesOf(base), `"gemma3"; hybrid runs llama, qwen2, qwen3`},
		"qwen3 without q norm": {qwenMeta("qwen3"), without(shapesOf(q3), "blk.1.attn_q_norm.weight"), "blk.1.attn_q_norm.weight is missing"},
		"q norm of the wrong size": {qwenMeta("qwen3"), with(shapesOf(q3), "blk.0.attn_k_norm.weight", []uint64{64}),
			"blk.0.attn_k_norm.weight has dims [64], want [8]"},
		"bias of the wrong size": {goodMeta(), with(shapesOf(base), "blk.0.attn_k.bias", []uint64{64}), "blk.0.attn_k.bias has dims [64], want [32]"},
		"fused qkv":              {goodMeta(), with(shapesOf(base), "blk.0.attn_qkv.weight", []uint64{64, 128}), "attn_qkv.weight: fused"},
		"experts":                {withKey(goodMeta(), "llama.expert_count", 8), shapesOf(base), "llama.expert_count is 8: mixture-of-experts"},
		"partial rope on qwen2":  {withKey(qwenMeta("qwen2"), "qwen2.rope.dimension_count", 4), shapesOf(base), "qwen2.rope.dimension_count 4 is not the head size 8"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ConfigFrom(tc.md, tc.shapes)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func without(s map[string]TensorShape, name string) map[string]TensorShape {
	delete(s, name)
	return s
}

func with(s map[string]TensorShape, name string, dims []uint64) map[string]TensorShape {
	s[name] = TensorShape{Type: quant.F32, Dims: dims}
	return s
}

func withKey(md fakeMeta, key string, v any) fakeMeta {
	md[key] = v
	return md
}
