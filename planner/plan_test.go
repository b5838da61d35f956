package planner

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"hybrid/devices"
	"hybrid/devices/sim"
	"hybrid/models/builtin"
	"hybrid/models/gguf"
	"hybrid/models/llama"
	"hybrid/ops"
)

func builtinGraph(t *testing.T, n int) *ops.Graph {
	t.Helper()
	f, err := gguf.Parse(builtin.Model(), builtin.Name)
	if err != nil {
		t.Fatal(err)
	}
	m, err := llama.FromFile(f, builtin.Name)
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Graph(n, 0, 256)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func m4(t *testing.T) (*sim.Hardware, []Candidate) {
	t.Helper()
	hw, err := sim.LoadHardware("m4-pro")
	if err != nil {
		t.Fatal(err)
	}
	return hw, Candidates(sim.Open(hw, 1))
}

// handOpTime is the roofline of configs/hardware/m4-pro.yaml written out
// again: launch + max(bytes/(bandwidth·eff), flops/(tflops·eff)), the
// efficiency by op kind or, for a weight, by kind and weight type; plus for
// the fp16 Neural Engine with per-op conversions 1.5 × the activation bytes
// at full bandwidth.
func handOpTime(op *ops.Op, dev string, perOp bool) float64 {
	type hw struct {
		bw, tf, launch float64
		eff            map[string]float64
		fp16           bool
	}
	specs := map[string]hw{
		"sim:metal": {273e9, 8.2e12, 3e-6, map[string]float64{"mat_mul": 0.75, "mat_mul/f16": 0.82, "mat_mul/f32": 0.82,
			"mat_mul/q8_0": 0.79, "mat_mul/q4_0": 0.75, "attention": 0.4, "rms_norm": 0.3, "rope": 0.3,
			"silu_mul": 0.5, "add": 0.5, "embed": 0.3, "last_row": 0.3}, false},
		"sim:coreml": {60e9, 19e12, 150e-6, map[string]float64{"mat_mul": 0.2, "mat_mul/f16": 0.75, "mat_mul/f32": 1,
			"mat_mul/q8_0": 0.4, "mat_mul/q5_0": 0.25, "mat_mul/q5_k": 0.25, "mat_mul/q6_k": 0.3,
			"silu_mul": 0.8, "add": 0.8, "rms_norm": 0.5, "rope": 0.5, "last_row": 0.5}, true},
		"sim:cpu": {120e9, 1.4e12, 2e-6, map[string]float64{"mat_mul": 0.5, "attention": 0.5}, false},
	}
	s := specs[dev]
	eff, ok := 0.0, false
	if op.Weight != nil {
		eff, ok = s.eff[op.Kind.String()+"/"+strings.ToLower(op.Weight.Type.String())]
	}
	if !ok {
		if eff, ok = s.eff[op.Kind.String()]; !ok {
			eff = 0.5
		}
	}
	b := float64(op.Cost.BytesRead + op.Cost.BytesWritten)
	t := s.launch + math.Max(b/(s.bw*eff), float64(op.Cost.FLOPs)/(s.tf*eff))
	if s.fp16 && perOp {
		act := float64(op.Cost.BytesRead + op.Cost.BytesWritten)
		if op.Kind == ops.Embed {
			act = float64(op.Cost.BytesWritten)
		} else if op.Weight != nil {
			act -= float64(op.Weight.Bytes())
		}
		t += 1.5 * act / s.bw
	}
	return t
}

// handLink is m4-pro.yaml's links: latency and bandwidth per pair.
func handLink(a, b string, bytes int64) float64 {
	type l struct{ lat, bw float64 }
	links := map[[2]string]l{
		{"sim:cpu", "sim:metal"}:    {10e-6, 100e9},
		{"sim:cpu", "sim:coreml"}:   {40e-6, 60e9},
		{"sim:metal", "sim:coreml"}: {40e-6, 60e9},
	}
	k, ok := links[[2]string{a, b}]
	if !ok {
		k = links[[2]string{b, a}]
	}
	return k.lat + float64(bytes)/k.bw
}

// TestMacPlansAgainstHandCalculation plans the built-in model's decode step
// on the simulated M4 Pro with metal-only and mac-hybrid, with the fp16
// conversions at the boundary and per op, and checks each predicted time
// against the same sums done by hand from the profile's numbers.
func TestMacPlansAgainstHandCalculation(t *testing.T) {
	for _, conv := range []sim.Conversions{sim.Boundary, sim.PerOp} {
		t.Run(conv.String(), func(t *testing.T) { macPlansAgainstHand(t, conv) })
	}
}

func macPlansAgainstHand(t *testing.T, conv sim.Conversions) {
	g := builtinGraph(t, 1)
	hw, cands := m4(t)
	hw.SetConversions(conv)
	c := &Costs{}
	for _, name := range []string{"metal-only", "mac-hybrid"} {
		pol, err := LoadPolicy(name)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Make(g, cands, pol, c)
		if err != nil {
			t.Fatal(err)
		}
		producer := g.Producers()
		var want float64
		copied := map[[2]int]bool{}
		for i, op := range g.Ops {
			d := p.Device[i]
			if name == "metal-only" && d != "sim:metal" {
				t.Fatalf("metal-only put %s on %s", op, d)
			}
			if name == "mac-hybrid" {
				switch op.Kind {
				case ops.MatMul, ops.RMSNorm, ops.RoPE, ops.Attention:
					if d != "sim:metal" {
						t.Fatalf("mac-hybrid put %s on %s, want sim:metal", op, d)
					}
				case ops.SiLUMul:
					if d != "sim:coreml" {
						t.Fatalf("mac-hybrid put %s on %s, want sim:coreml", op, d)
					}
				case ops.Embed:
					if d != "sim:cpu" {
						t.Fatalf("mac-hybrid put %s on %s, want sim:cpu", op, d)
					}
				}
			}
			want += handOpTime(op, d, conv == sim.PerOp)
			for _, in := range op.In {
				from := p.Device[producer[in]]
				j := p.DeviceIndex(d)
				if from != d && !copied[[2]int{in, j}] {
					copied[[2]int{in, j}] = true
					want += handLink(from, d, g.Values[in].Bytes())
				}
			}
		}
		got := p.Predicted.Seconds()
		if math.Abs(got-want) > 1e-9*float64(len(g.Ops))+1e-12 {
			t.Fatalf("%s: predicted %.9f s, by hand %.9f s", name, got, want)
		}
		t.Logf("%s: predicted %.3f ms per decode step (hand: %.3f ms), %d copies", name, got*1e3, want*1e3, len(p.Transfers))
	}
}

// TestAutoNeverWorseThanSingleDevice plans with auto on the simulated H100
// host and M4 Pro, for decode and prefill, and checks the result against
// every single-device plan.
func TestAutoNeverWorseThanSingleDevice(t *testing.T) {
	auto, err := LoadPolicy("auto")
	if err != nil {
		t.Fatal(err)
	}
	for _, hwName := range []string{"m4-pro", "h100-sxm", "h100-pcie"} {
		hw, err := sim.LoadHardware(hwName)
		if err != nil {
			t.Fatal(err)
		}
		cands := Candidates(sim.Open(hw, 1))
		c := &Costs{}
		for _, n := range []int{1, 32, 0} {
			g := tinyLlamaGraph(t)
			if n > 0 {
				g = builtinGraph(t, n)
			}
			start := time.Now()
			p, err := Make(g, cands, auto, c)
			if err != nil {
				t.Fatal(err)
			}
			el := time.Since(start)
			for _, cd := range cands {
				one := &Policy{Name: "only", Devices: []string{cd.Info.Name}, Transfers: "boundary", Memory: map[string]int64{}}
				q, err := Make(g, cands, one, c)
				if err != nil {
					continue // the device cannot run every op
				}
				if p.Predicted > q.Predicted {
					t.Fatalf("%s n=%d: auto %v is worse than %s alone %v", hwName, n, p.Predicted, cd.Info.Name, q.Predicted)
				}
			}
			t.Logf("%s n=%d: auto %v (%v to plan), placement %v", hwName, n, p.Predicted, el, p.Placement())
		}
	}
}

// tinyLlamaGraph is the decode graph of TinyLlama-1.1B's shape in Q4_0
// (no weights needed to plan).
func tinyLlamaGraph(t *testing.T) *ops.Graph { return presetGraph(t, "tinyllama-1.1b", 2048) }

// llama7bGraph is the decode graph of Llama-7B's shape (32 layers) in Q4_0.
func llama7bGraph(t *testing.T) *ops.Graph { return presetGraph(t, "llama-7b", 4096) }

// presetGraph is the decode graph of a synth preset's shape in Q4_0 with a
// context of ctx.
func presetGraph(t *testing.T, preset string, ctx int) *ops.Graph {
	return stepGraph(t, preset, 1, ctx)
}

// TestMemoryCapSplitsTheModel caps the simulated H100 so that TinyLlama's
// weights do not all fit: the plan must respect the cap, and so split the
// layers between GPU and host, as users hand-tune llama.cpp's -ngl.
func TestMemoryCapSplitsTheModel(t *testing.T) {
	g := tinyLlamaGraph(t)
	hw, err := sim.LoadHardware("h100-sxm")
	if err != nil {
		t.Fatal(err)
	}
	cands := Candidates(sim.Open(hw, 1))
	var weights int64
	for _, op := range g.Ops {
		if op.Weight != nil {
			weights += op.Weight.Bytes()
		}
	}
	pol := &Policy{Name: "capped", Transfers: "boundary", Memory: map[string]int64{"cuda": weights / 2}}
	p, err := Make(g, cands, pol, &Costs{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Memory["sim:cuda"] > weights/2 {
		t.Fatalf("sim:cuda holds %d bytes, cap %d", p.Memory["sim:cuda"], weights/2)
	}
	pl := p.Placement()
	if pl["sim:cuda"] == 0 || pl["sim:cpu"] == 0 {
		t.Fatalf("placement %v does not split", pl)
	}
	// Uncapped, the GPU takes everything and is faster.
	free, err := Make(g, cands, &Policy{Name: "free", Transfers: "boundary", Memory: map[string]int64{}}, &Costs{})
	if err != nil {
		t.Fatal(err)
	}
	if free.Predicted > p.Predicted {
		t.Fatalf("uncapped %v is slower than capped %v", free.Predicted, p.Predicted)
	}
	t.Logf("TinyLlama on h100-sxm: uncapped %v %v; GPU capped at half the weights %v %v", free.Predicted, free.Placement(), p.Predicted, p.Placement())

	checkBeatsFixedSplits(t, g, cands, pol, &Costs{}, p, "sim:cuda", "sim:cpu", weights/2)

	// The same with the default costs of a real H100 and a 16-thread host
	// (no profile), capped at 300 MiB as bench/cuda/side-by-side.sh does:
	// there the best fixed split keeps the output head off the GPU.
	real := []Candidate{
		{Info: devices.Info{Name: "cuda:0", Kind: "cuda", Memory: 80 << 30}, Supports: func(*ops.Op) error { return nil }},
		{Info: devices.Info{Name: "cpu", Kind: "cpu", Threads: 16}, Supports: func(*ops.Op) error { return nil }},
	}
	rp := &Policy{Name: "capped", Transfers: "boundary", Memory: map[string]int64{"cuda": 300 << 20}}
	rplan, err := Make(g, real, rp, &Costs{})
	if err != nil {
		t.Fatal(err)
	}
	checkBeatsFixedSplits(t, g, real, rp, &Costs{}, rplan, "cuda:0", "cpu", 300<<20)
}

// checkBeatsFixedSplits checks that plan p, made by auto under a cap on gpu,
// is predicted no slower than every fixed layer split a user could write by
// hand under the same cap: the first or the last k blocks on the GPU, the
// embedding and output head on the GPU or not (llama.cpp's -ngl puts the head
// there only past the last block), everything else on the host. It returns the
// best fixed split that fits.
func checkBeatsFixedSplits(t *testing.T, g *ops.Graph, cands []Candidate, pol *Policy, c *Costs, p *Plan, gpu, host string, limit int64) *Plan {
	t.Helper()
	best := bestFixedSplit(t, g, cands, pol, c, gpu, host, limit)
	if p.Memory[gpu] > limit {
		t.Fatalf("auto holds %d bytes on %s, cap %d", p.Memory[gpu], gpu, limit)
	}
	if p.Predicted > best.Predicted {
		t.Fatalf("auto under the cap predicts %v, the best fixed split (%s) %v", p.Predicted, best.Policy, best.Predicted)
	}
	t.Logf("capped: auto %v %v, best fixed split %s %v", p.Predicted, p.Placement(), best.Policy, best.Predicted)
	return best
}

// bestFixedSplit is the fastest of the fixed layer splits that
// checkBeatsFixedSplits describes under the cap on gpu, named in its Policy.
func bestFixedSplit(t *testing.T, g *ops.Graph, cands []Candidate, pol *Policy, c *Costs, gpu, host string, limit int64) *Plan {
	t.Helper()
	var best *Plan
	layers := 0
	for _, op := range g.Ops {
		layers = max(layers, op.Layer+1)
	}
	for k := 0; k <= layers; k++ {
		for _, first := range []bool{true, false} {
			for _, head := range []bool{true, false} {
				assign := make([]string, len(g.Ops))
				for i, op := range g.Ops {
					on := op.Layer < 0 && head || op.Layer >= 0 && (first && op.Layer < k || !first && op.Layer >= layers-k)
					assign[i] = host
					if on {
						assign[i] = gpu
					}
				}
				h, err := Apply(g, cands, pol, c, assign)
				if err != nil || h.Memory[gpu] > limit {
					continue // over the cap
				}
				if best == nil || h.Predicted < best.Predicted {
					h.Policy = fmt.Sprintf("first=%v k=%d head=%v", first, k, head)
					best = h
				}
			}
		}
	}
	if best == nil {
		t.Fatal("no fixed split fits")
	}
	return best
}

// TestPlanShowsPrecision checks that a plan reports each device's precision:
// mac-hybrid on the simulated M4 Pro puts silu·mul on the fp16 Neural Engine.
func TestPlanShowsPrecision(t *testing.T) {
	_, cands := m4(t)
	pol, err := LoadPolicy("mac-hybrid")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Make(builtinGraph(t, 1), cands, pol, &Costs{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, d := range p.JSON().Devices {
		got[d.Name] = d.Precision
	}
	if got["sim:coreml"] != "f16" || got["sim:metal"] != "f32" {
		t.Fatalf("precisions %v, want sim:coreml f16 and sim:metal f32", got)
	}
	var b strings.Builder
	if err := p.Render(&b, "table"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "PRECISION") {
		t.Fatalf("the device table has no precision column:\n%s", b.String())
	}
}
