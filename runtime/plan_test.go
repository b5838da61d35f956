package runtime

import (
	"fmt"
	"math"
	"testing"

	"hybrid/devices"
	"hybrid/devices/cpu"
	"hybrid/ops"
)

// split places even layers on "cpu", odd ones on "cpu:1", the rest on "cpu".
func split(g *ops.Graph) map[string]string {
	m := map[string]string{}
	for _, op := range g.Ops {
		m[op.Name] = "cpu"
		if op.Layer >= 0 && op.Layer%2 == 1 {
			m[op.Name] = "cpu:1"
		}
	}
	return m
}

// boundary counts the copies a placement needs in graph g: each value read
// on a device other than its producer's, once per such device.
func boundary(g *ops.Graph, place map[string]string) (count int, bytes int64) {
	producer := make([]*ops.Op, len(g.Values))
	for _, op := range g.Ops {
		producer[op.Out] = op
	}
	dev := func(op *ops.Op) string {
		if d, ok := place[op.Name]; ok {
			return d
		}
		return place[producer[op.In[0]].Name] // last_token goes with its input
	}
	seen := map[string]bool{}
	for _, op := range g.Ops {
		for _, in := range op.In {
			from, to := dev(producer[in]), dev(op)
			k := fmt.Sprint(in, to)
			if from != to && !seen[k] {
				seen[k] = true
				count++
				bytes += g.Values[in].Bytes()
			}
		}
	}
	return count, bytes
}

// TestTwoCPUDevicesMatchOne runs the built-in model on two CPU devices with
// separate buffers and worker pools, layers alternating between them, and
// checks that the logits are bit-identical to one device's and that the copies
// are exactly the boundary values, once each; then the per-op ablation, whose
// copies are every op's inputs in and output out.
func TestTwoCPUDevicesMatchOne(t *testing.T) {
	m, err := LoadModel("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prompt := []int32{1, 403, 407, 261, 378}
	run := func(devs []devices.Device, opts Options) ([][]float32, *Executor) {
		ex, err := NewPlanExecutor(m, devs, 64, opts)
		if err != nil {
			t.Fatal(err)
		}
		var out [][]float32
		l, err := ex.Prefill(prompt, 0)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]float32(nil), l...))
		tok := int32(Greedy(l))
		for pos := len(prompt); pos < len(prompt)+4; pos++ {
			l, err = ex.Forward([]int32{tok}, pos)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, append([]float32(nil), l...))
			tok = int32(Greedy(l))
		}
		return out, ex
	}
	one, _ := run([]devices.Device{cpu.New("cpu", 1)}, Options{})

	g1, err := m.Graph(1, 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	gp, err := m.Graph(len(prompt), 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	place := split(g1)
	two, ex := run([]devices.Device{cpu.New("cpu", 1), cpu.New("cpu:1", 1)}, Options{Placement: place})
	for s := range one {
		for i := range one[s] {
			if math.Float32bits(one[s][i]) != math.Float32bits(two[s][i]) {
				t.Fatalf("step %d logit %d: one device %g, two %g", s, i, one[s][i], two[s][i])
			}
		}
	}
	nd, bd := boundary(g1, place)
	np, bp := boundary(gp, place)
	if nd == 0 {
		t.Fatal("the split placement has no boundaries")
	}
	wantCount, wantBytes := np+4*nd, bp+4*bd
	if c := ex.Stats.Copies; c.Count != wantCount || c.Bytes != wantBytes {
		t.Fatalf("copies: %d of %d bytes, want %d of %d (prefill %d/%d, decode %d/%d each)", c.Count, c.Bytes, wantCount, wantBytes, np, bp, nd, bd)
	}
	if ex.Stats.Devices["cpu:1"].Ops == 0 || ex.Stats.Devices["cpu"].Ops == 0 {
		t.Fatal("a device ran no ops")
	}

	// The ablation: same logits, and per op its inputs in and its output out.
	abl, ex := run([]devices.Device{cpu.New("cpu", 1), cpu.New("cpu:1", 1)}, Options{Placement: place, PerOp: true})
	for s := range one {
		for i := range one[s] {
			if math.Float32bits(one[s][i]) != math.Float32bits(abl[s][i]) {
				t.Fatalf("per-op step %d logit %d differs", s, i)
			}
		}
	}
	perStep := func(g *ops.Graph) (int, int64) {
		var n int
		var b int64
		for _, op := range g.Ops {
			for _, in := range op.In {
				n++
				b += g.Values[in].Bytes()
			}
			n++
			b += g.Values[op.Out].Bytes()
		}
		return n, b
	}
	pn, pb := perStep(gp)
	dn, db := perStep(g1)
	if c := ex.Stats.Copies; c.Count != pn+4*dn || c.Bytes != pb+4*db {
		t.Fatalf("per-op copies: %d of %d bytes, want %d of %d", c.Count, c.Bytes, pn+4*dn, pb+4*db)
	}
}
