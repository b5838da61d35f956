//go:build amd64 && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"hybrid/quant"
)

// TestQ8_0Streams checks that reading four places of the weights at once
// changes no row's sum: q8_0Streams against q8_0Rows, bit for bit, for row
// counts with and without rows left over.
func TestQ8_0Streams(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(5, 9))
	const cols = 512
	p := NewPool(1)
	defer p.Close()
	defer func(pf bool) { streamPrefetch = pf }(streamPrefetch)
	for i, rows := range []int{1, 3, 4, 5, 8, 13, 64, 67, 1, 3, 4, 5, 8, 13, 64, 67} {
		streamPrefetch = i < 8 // both kernels: with software prefetch and without
		w := randomWeights(t, rng, quant.Q8_0, rows, cols)
		x := randomInput(rng, cols)
		xs := p.scratch.prepare(p, kernelFor[quant.Q8_0], x, 1, cols)
		stride := len(w) / rows
		want, got := make([]float32, rows), make([]float32, rows)
		q8_0Rows(&w[0], stride, rows, &xs[0].q[0], &xs[0].d[0], len(xs[0].d), &want[0])
		q8_0Streams(w, stride, &xs[0], got)
		for r := range want {
			if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
				t.Fatalf("%d rows, prefetch %v: row %d is %v, q8_0Rows gives %v", rows, streamPrefetch, r, got[r], want[r])
			}
		}
	}
}

// TestPackedStreams checks gemvPackedStreams against gemvPacked panel by
// panel, bit for bit, for panel counts with and without panels left over.
func TestPackedStreams(t *testing.T) {
	if !packedKernels {
		t.Skip("no packed kernels on this CPU")
	}
	rng := rand.New(rand.NewPCG(6, 10))
	const cols = 256
	p := NewPool(1)
	defer p.Close()
	defer func(pf bool) { streamPrefetch = pf }(streamPrefetch)
	for i, np := range []int{1, 3, 4, 5, 9, 17, 1, 3, 4, 5, 9, 17} {
		streamPrefetch = i < 6 // both kernels: with software prefetch and without
		rows := np * panelRows
		w := randomWeights(t, rng, quant.Q4_0, rows, cols)
		pk := Pack(p, quant.Q4_0, w, rows, cols)
		if pk == nil {
			t.Fatal("Pack refused a Q4_0 matrix")
		}
		x := randomInput(rng, cols)
		xs := p.scratch.prepare(p, kernelFor[quant.Q4_0], x, 1, cols)
		nb := cols / 32
		off := make([]int32, nb)
		for b := range off {
			for _, v := range xs[0].q[32*b : 32*b+32] {
				off[b] += 8 * int32(v)
			}
		}
		want, got := make([]float32, rows), make([]float32, rows)
		for pi := range np {
			gemvPacked(pk.data[pi*nb*packedBlock:], nb, &xs[0], off, want[pi*panelRows:])
		}
		gemvPackedStreams(pk.data, np, nb, &xs[0], off, got)
		pk.Free()
		for r := range want {
			if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
				t.Fatalf("%d panels, prefetch %v: row %d is %v, gemvPacked gives %v", np, streamPrefetch, r, got[r], want[r])
			}
		}
	}
}
