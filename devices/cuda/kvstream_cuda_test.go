//go:build cuda

package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"hybrid/devices/cpu"
	"hybrid/ops"
	"hybrid/quant"
	"hybrid/verify"
)

// TestStreamKV attends on the GPU for a layer whose KV cache lives on a CPU
// device: a prompt of 300 tokens, 130 more after it, then 5 (the split
// kernels), each step's cells before it streamed in from the CPU's cache
// and its own streamed back. The output is float64 attention's within
// 2e-3 of max|v|, as TestPromptAttention's, and the cells the CPU's cache
// receives are the keys and values rounded to f16, bit for bit what the
// CPU would have written.
func TestStreamKV(t *testing.T) {
	g := gpu(t)
	r := rand.New(rand.NewPCG(41, 42))
	for c, a := range []ops.AttnParams{{Heads: 32, KVHeads: 4, HeadDim: 64, Context: 512}, {Heads: 16, KVHeads: 8, HeadDim: 128, Context: 512}} {
		t.Run(fmt.Sprintf("head=%d", a.HeadDim), func(t *testing.T) {
			home := cpu.New("cpu:home", 2)
			defer home.Close()
			op := &ops.Op{Kind: ops.Attention, Name: fmt.Sprintf("streamed%d", c), Layer: 500 + c, Attn: a}
			kdim := a.KVHeads * a.HeadDim
			var ks, vs []float32
			for _, st := range []ops.Step{{Tokens: make([]int32, 300)}, {Tokens: make([]int32, 130), Pos: 300}, {Tokens: make([]int32, 5), Pos: 430}} {
				n := len(st.Tokens)
				q, k, v := verify.RandVec(r, n*a.Heads*a.HeadDim), verify.RandVec(r, n*kdim), verify.RandVec(r, n*kdim)
				ks, vs = append(ks, k...), append(vs, v...)
				pk, pv, err := home.KVCells(op, 0, st.Pos)
				if err != nil {
					t.Fatal(err)
				}
				if err := g.StreamKV(op, st, pk, pv); err != nil {
					t.Fatal(err)
				}
				got := runOp(t, g, op, st, nil, len(q), q, k, v)
				ck, cv, err := home.KVCells(op, st.Pos, n)
				if err != nil {
					t.Fatal(err)
				}
				if err := g.StreamedKV(op, st, ck, cv); err != nil {
					t.Fatal(err)
				}
				for i := range k {
					if ck[i] != quant.F32ToF16(k[i]) || cv[i] != quant.F32ToF16(v[i]) {
						t.Fatalf("pos %d: cell element %d came back as %#04x, %#04x; want %#04x, %#04x", st.Pos, i, ck[i], cv[i], quant.F32ToF16(k[i]), quant.F32ToF16(v[i]))
					}
				}
				rk, rv := slicesF16(ks), slicesF16(vs)
				want := verify.AttentionRef(q, rk, rv, a, st.Pos)
				vmax := verify.MaxAbs(vs)
				e, i := verify.MaxErr(got, func(i int) float64 { return want[i] }, func(int) float64 { return vmax })
				if e > 2e-3 {
					t.Fatalf("pos %d: out[%d] = %g, want %g (error %.3g of max|v| > 2e-3)", st.Pos, i, got[i], want[i], e)
				}
				t.Logf("pos %d, %d rows: max error %.2g of max|v|", st.Pos, n, e)
			}
			// A streamed cache serves one Run: the cells are gone after it.
			if err := g.StreamedKV(op, ops.Step{Tokens: make([]int32, 5), Pos: 430}, make([]uint16, 5*kdim), make([]uint16, 5*kdim)); err == nil {
				t.Error("the same cells were copied out twice")
			}
		})
	}
}

// slicesF16 is x rounded to f16 and back, as a cache holds it.
func slicesF16(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, f := range x {
		out[i] = quant.F16ToF32(quant.F32ToF16(f))
	}
	return out
}
