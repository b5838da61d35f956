package cpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"hybrid/devices/cpu/kernels"
	"hybrid/ops"
	"hybrid/quant"
)

// attnCase is a run of steps of one attention layer: a prefill of steps[0]
// tokens, then one of steps[1] tokens after it, and so on.
type attnCase struct {
	heads, kvHeads, hd int
	steps              []int
}

// attnInputs makes a case's q, k and v per step, q scaled by qs so that the
// softmax is peaked enough for the running maximum to move.
func attnInputs(r *rand.Rand, c attnCase, qs float32) (q, k, v [][]float32) {
	qw, kw := c.heads*c.hd, c.kvHeads*c.hd
	for _, n := range c.steps {
		qi := randVec(r, n*qw)
		for i := range qi {
			qi[i] *= qs
		}
		q = append(q, qi)
		k = append(k, randVec(r, n*kw))
		v = append(v, randVec(r, n*kw))
	}
	return q, k, v
}

// runAttn runs a case's steps through the device and returns each step's
// output.
func runAttn(t *testing.T, d *Device, c attnCase, q, k, v [][]float32) [][]float32 {
	t.Helper()
	ctx := 0
	for _, n := range c.steps {
		ctx += n
	}
	a := ops.AttnParams{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd, Context: ctx}
	op := &ops.Op{Kind: ops.Attention, Name: "attn", Layer: 0, Attn: a}
	var outs [][]float32
	pos := 0
	for s, n := range c.steps {
		out := make([]float32, n*c.heads*c.hd)
		if err := d.attention(op, ops.Step{Tokens: make([]int32, n), Pos: pos}, q[s], k[s], v[s], out); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, out)
		pos += n
	}
	return outs
}

// TestTiledAttentionMatchesDefinition checks the tiled path (steps of
// faTileQ tokens or more, including ones that start inside a key tile and
// ones with no grouping or a head of 128) against softmax attention in
// float64 over the f16-rounded cache. Everything past the cache is f32: sums
// of a few hundred terms stay well within 1e-5.
func TestTiledAttentionMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range []attnCase{
		{heads: 8, kvHeads: 2, hd: 64, steps: []int{150, 70, 1, 64}},
		{heads: 2, kvHeads: 2, hd: 128, steps: []int{65, 100}},
		{heads: 4, kvHeads: 1, hd: 32, steps: []int{3, 200}},
	} {
		d := New("cpu", 2)
		q, k, v := attnInputs(r, c, 3)
		outs := runAttn(t, d, c, q, k, v)
		d.Close()
		qw, kw := c.heads*c.hd, c.kvHeads*c.hd
		var ks, vs []float32
		pos := 0
		for s, n := range c.steps {
			ks = append(ks, roundF16(k[s])...)
			vs = append(vs, roundF16(v[s])...)
			if n < faTileQ {
				pos += n
				continue // the one-row path: TestAttentionMatchesDefinition
			}
			want := make([]float64, n*qw)
			for i := range n {
				for h := range c.heads {
					kh := h / (c.heads / c.kvHeads) * c.hd
					qi := q[s][i*qw+h*c.hd : i*qw+(h+1)*c.hd]
					span := pos + i + 1
					sc := make([]float64, span)
					m := math.Inf(-1)
					for j := range sc {
						for e, x := range qi {
							sc[j] += float64(x) * float64(ks[j*kw+kh+e])
						}
						sc[j] /= math.Sqrt(float64(c.hd))
						m = math.Max(m, sc[j])
					}
					var sum float64
					for j := range sc {
						sc[j] = math.Exp(sc[j] - m)
						sum += sc[j]
					}
					for j, p := range sc {
						for e := range c.hd {
							want[i*qw+h*c.hd+e] += p / sum * float64(vs[j*kw+kh+e])
						}
					}
				}
			}
			closeTo(t, "tiled attention", outs[s], want, 1e-5)
			pos += n
		}
	}
}

// ggmlAttnProgram runs ggml's flash_attn_ext on one step read from a file
// (int32 head dim, tokens, heads, KV heads, position, cells, threads; then q
// as f32 in the step's layout, and the cache's keys and values as f16) with
// llama.cpp's causal mask, and writes its f32 output.
const ggmlAttnProgram = `
#include <math.h>
#include <stdio.h>
#include "ggml.h"
#include "ggml-cpu.h"
int main(int argc, char **argv) {
	FILE *f = fopen(argv[1], "rb");
	int p[7];
	if (!f || fread(p, 4, 7, f) != 7) return 1;
	int hd = p[0], n = p[1], heads = p[2], kvh = p[3], pos = p[4], nkv = p[5], th = p[6];
	struct ggml_init_params ip = { (size_t)1 << 28, NULL, false };
	struct ggml_context *ctx = ggml_init(ip);
	struct ggml_tensor *q = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, hd, heads, n);
	struct ggml_tensor *k = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, hd, kvh, nkv);
	struct ggml_tensor *v = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, hd, kvh, nkv);
	struct ggml_tensor *m = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, nkv, n);
	if (fread(q->data, 4, (size_t)n*heads*hd, f) != (size_t)n*heads*hd ||
	    fread(k->data, 2, (size_t)nkv*kvh*hd, f) != (size_t)nkv*kvh*hd ||
	    fread(v->data, 2, (size_t)nkv*kvh*hd, f) != (size_t)nkv*kvh*hd) return 1;
	ggml_fp16_t *md = m->data;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < nkv; j++)
			md[i*nkv + j] = ggml_fp32_to_fp16(j <= pos + i ? 0.0f : -INFINITY);
	struct ggml_tensor *r = ggml_flash_attn_ext(ctx,
		ggml_permute(ctx, q, 0, 2, 1, 3), ggml_permute(ctx, k, 0, 2, 1, 3),
		ggml_permute(ctx, v, 0, 2, 1, 3), m, 1.0f/sqrtf((float)hd), 0, 0);
	struct ggml_cgraph *g = ggml_new_graph(ctx);
	ggml_build_forward_expand(g, r);
	ggml_graph_compute_with_ctx(ctx, g, th);
	fwrite(r->data, 4, (size_t)n*heads*hd, stdout);
	return 0;
}
`

// TestTiledAttentionMatchesGGML checks the tiled path bit for bit against
// ggml's own flash_attn_ext, where a native build of llama.cpp is at hand
// (HYBRID_LLAMACPP, default ~/.cache/hybrid-llamacpp, as
// ../shared/tools/llamacpp-setup.sh makes it) along with a C compiler; it
// skips otherwise. Its KV length is padded to 256 cells as llama.cpp's is,
// and it runs on two threads, as the device does (split-KV decode depends
// on the thread count).
func TestTiledAttentionMatchesGGML(t *testing.T) {
	if !kernels.HasAVX512() {
		t.Skip("the numerics of llama.cpp's AVX2 build; the one at hand is native")
	}
	root := os.Getenv("HYBRID_LLAMACPP")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".cache", "hybrid-llamacpp")
	}
	l := filepath.Join(root, "llama.cpp")
	lib := filepath.Join(l, "build", "bin")
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	if _, err := os.Stat(filepath.Join(lib, "libggml-cpu.so")); err != nil {
		t.Skip("no llama.cpp build at " + lib)
	}
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "fa.c"), filepath.Join(dir, "fa")
	if err := os.WriteFile(src, []byte(ggmlAttnProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-O2", "-I"+filepath.Join(l, "ggml", "include"), "-o", bin, src,
		"-L"+lib, "-lggml", "-lggml-base", "-lggml-cpu", "-lm", "-Wl,-rpath,"+lib).CombinedOutput(); err != nil {
		t.Skipf("cannot build against %s: %v\n%s", l, err, out)
	}
	r := rand.New(rand.NewPCG(9, 10))
	for _, c := range []attnCase{
		{heads: 8, kvHeads: 2, hd: 64, steps: []int{150, 70}},
		{heads: 4, kvHeads: 4, hd: 128, steps: []int{64, 100}},
		{heads: 6, kvHeads: 2, hd: 32, steps: []int{5, 130}},
		// Decode: one-row attention (assembly for head sizes 64 and 128),
		// and from 512 cells llama.cpp's split-KV path, one chunk per
		// thread.
		{heads: 8, kvHeads: 2, hd: 64, steps: []int{5, 1, 1, 3}},
		{heads: 8, kvHeads: 2, hd: 64, steps: []int{600, 1, 1}},
		{heads: 4, kvHeads: 4, hd: 128, steps: []int{520, 1}},
		{heads: 6, kvHeads: 2, hd: 32, steps: []int{700, 1}},
	} {
		d := New("cpu", 2)
		q, k, v := attnInputs(r, c, 3)
		outs := runAttn(t, d, c, q, k, v)
		d.Close()
		kw := c.kvHeads * c.hd
		var ks, vs []uint16
		pos := 0
		for s, n := range c.steps {
			for i := range k[s] {
				ks = append(ks, quant.F32ToF16(k[s][i]))
				vs = append(vs, quant.F32ToF16(v[s][i]))
			}
			nkv := (pos + n + 255) &^ 255
			in := []int32{int32(c.hd), int32(n), int32(c.heads), int32(c.kvHeads), int32(pos), int32(nkv), 2}
			buf, _ := binary.Append(nil, binary.LittleEndian, in)
			buf, _ = binary.Append(buf, binary.LittleEndian, q[s])
			pad := make([]uint16, (nkv-pos-n)*kw)
			for _, x := range [][]uint16{ks, pad, vs, pad} {
				buf, _ = binary.Append(buf, binary.LittleEndian, x)
			}
			file := filepath.Join(dir, "in")
			if err := os.WriteFile(file, buf, 0o644); err != nil {
				t.Fatal(err)
			}
			raw, err := exec.Command(bin, file).Output()
			if err != nil {
				t.Fatal(err)
			}
			if len(raw) != 4*len(outs[s]) {
				t.Fatalf("ggml wrote %d bytes, want %d", len(raw), 4*len(outs[s]))
			}
			bad := 0
			for i, x := range outs[s] {
				w := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
				if math.Float32bits(x) != math.Float32bits(w) {
					if bad++; bad <= 5 {
						t.Errorf("case %+v step %d: out[%d] = %g, ggml %g", c, s, i, x, w)
					}
				}
			}
			if bad > 0 {
				t.Errorf("case %+v step %d: %d of %d outputs differ from ggml's", c, s, bad, len(outs[s]))
			}
			pos += n
		}
	}
}
