package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"hybrid/quant"
)

// TestMatVecs checks that multiplying one input by several matrices in one
// job gives each matrix's output of MatVec (Packed.MatMul for a repacked
// one) bit for bit: groups as a decode step has them (q, k, v of one type;
// a K-quant file's Q4_K beside Q6_K; Q4_0 beside Q8_0), with matrices
// packed where this CPU packs them, small and large, at 1, 2 and 5
// threads, so that claimed ranges start and end inside each matrix.
func TestMatVecs(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	groups := []struct {
		cols  int
		types []quant.Type
		rows  []int
	}{
		{512, []quant.Type{quant.Q8_0, quant.Q8_0, quant.Q8_0}, []int{512, 64, 64}},
		{512, []quant.Type{quant.Q4_0, quant.Q4_0, quant.Q4_0}, []int{512, 64, 64}},
		{512, []quant.Type{quant.Q4_0, quant.Q8_0}, []int{1376, 1376}},
		{512, []quant.Type{quant.Q4_K, quant.Q4_K, quant.Q6_K}, []int{512, 128, 128}},
		{256, []quant.Type{quant.Q4_K, quant.Q4_K}, []int{2752, 2752}},
		{256, []quant.Type{quant.Q5_0, quant.Q4_0}, []int{7, 33}},
	}
	for _, threads := range []int{1, 2, 5} {
		p := NewPool(threads)
		for _, g := range groups {
			x := randomInput(rng, g.cols)
			jobs := make([]VecJob, len(g.types))
			want := make([][]float32, len(g.types))
			var packs []*Packed
			for i, typ := range g.types {
				rows := g.rows[i]
				w := randomWeights(t, rng, typ, rows, g.cols)
				want[i] = make([]float32, rows)
				jobs[i] = VecJob{T: typ, W: w, Rows: rows, Y: make([]float32, rows)}
				if pk := Pack(p, typ, w, rows, g.cols); pk != nil {
					packs = append(packs, pk)
					pk.MatMul(p, x, 1, want[i])
					jobs[i] = VecJob{P: pk, Y: jobs[i].Y}
				} else {
					MatVec(p, typ, w, rows, g.cols, x, want[i])
				}
			}
			MatVecs(p, x, g.cols, jobs)
			for i := range jobs {
				for r, v := range want[i] {
					if got := jobs[i].Y[r]; math.Float32bits(got) != math.Float32bits(v) {
						t.Fatalf("%d threads, %v: matrix %d (%s, packed %v) row %d is %v, alone %v", threads, g.types, i, g.types[i], jobs[i].P != nil, r, got, v)
					}
				}
			}
			for _, pk := range packs {
				pk.Free()
			}
		}
		p.Close()
	}
}

// TestMatVecsRefuses checks that matrices whose inputs are quantized
// differently, or of the wrong size, are refused, not multiplied wrongly.
func TestMatVecsRefuses(t *testing.T) {
	if SameInput(quant.Q4_0, quant.Q4_K) || SameInput(quant.Q4_1, quant.Q4_0) || SameInput(quant.F16, quant.F16) {
		t.Error("SameInput takes inputs quantized differently (or not at all) as the same")
	}
	if !SameInput(quant.Q4_K, quant.Q6_K) || !SameInput(quant.Q8_0, quant.Q4_0) {
		t.Error("SameInput refuses types that quantize their input alike")
	}
	p := NewPool(1)
	defer p.Close()
	rng := rand.New(rand.NewPCG(1, 1))
	w0, w1 := randomWeights(t, rng, quant.Q4_0, 4, 256), randomWeights(t, rng, quant.Q4_K, 4, 256)
	for name, jobs := range map[string][]VecJob{
		"mixed input blocks": {{T: quant.Q4_0, W: w0, Rows: 4, Y: make([]float32, 4)}, {T: quant.Q4_K, W: w1, Rows: 4, Y: make([]float32, 4)}},
		"short output":       {{T: quant.Q4_0, W: w0, Rows: 4, Y: make([]float32, 3)}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			MatVecs(p, make([]float32, 256), 256, jobs)
		}()
	}
}

// TestMatVecsNoAllocs: a warm group reuses the pool's scratch.
func TestMatVecsNoAllocs(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	x := randomInput(rng, 512)
	jobs := []VecJob{
		{T: quant.Q8_0, W: randomWeights(t, rng, quant.Q8_0, 300, 512), Rows: 300, Y: make([]float32, 300)},
		{T: quant.Q8_0, W: randomWeights(t, rng, quant.Q8_0, 40, 512), Rows: 40, Y: make([]float32, 40)},
	}
	MatVecs(p, x, 512, jobs)
	if a := testing.AllocsPerRun(20, func() { MatVecs(p, x, 512, jobs) }); a != 0 {
		t.Errorf("MatVecs allocates %v times per call", a)
	}
}
