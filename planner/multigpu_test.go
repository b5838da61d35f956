package planner

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"hybrid/devices"
	"hybrid/devices/sim"
	"hybrid/ops"
)

// Plans for the GPUs of one host (issue 18), on the simulated two-H100
// profiles: the GPUs are sim:cuda:0 and sim:cuda:1, and policies name them
// as the real ones are named, cuda:0 and cuda:1.

// twoGPUs opens a profile's simulated devices and returns them as
// candidates, closed when the test ends.
func twoGPUs(t *testing.T, profile string) []Candidate {
	t.Helper()
	hw, err := sim.LoadHardware(profile)
	if err != nil {
		t.Fatal(err)
	}
	devs := sim.Open(hw, 1)
	t.Cleanup(func() {
		for _, d := range devs {
			d.Close()
		}
	})
	return Candidates(devs)
}

func infosOf(cands []Candidate) []devices.Info {
	out := make([]devices.Info, len(cands))
	for i, c := range cands {
		out[i] = c.Info
	}
	return out
}

// TestSimulatedGPUsAnswerToTheirNames: a policy's "cuda:1" is the
// simulated sim:cuda:1 (the device it stands for), "cuda" both GPUs, the
// simulated name itself still works, and a GPU the profile lacks is an
// error naming what is present.
func TestSimulatedGPUsAnswerToTheirNames(t *testing.T) {
	devs := infosOf(twoGPUs(t, "2xh100-nvlink"))
	names := func(ds []devices.Info) string {
		var ns []string
		for _, d := range ds {
			ns = append(ns, d.Name)
		}
		return strings.Join(ns, ",")
	}
	for ref, want := range map[string]string{
		"cuda:0": "sim:cuda:0", "cuda:1": "sim:cuda:1", "cuda": "sim:cuda:0,sim:cuda:1",
		"sim:cuda:1": "sim:cuda:1", "cpu": "sim:cpu", "cuda:2": "", "sim": "",
	} {
		if got := names(Resolve(ref, devs)); got != want {
			t.Errorf("Resolve(%q) = %q, want %q", ref, got, want)
		}
	}
	for _, c := range []struct {
		ref  string
		d    devices.Info
		want bool
	}{
		{"cuda:0", devs[0], true}, {"cuda:0", devs[1], false}, {"cuda", devs[1], true},
		// Only a simulated device stands for another: a real device is
		// matched by its own name and kind alone.
		{"cuda:0", devices.Info{Name: "x:cuda:0", Kind: "cuda"}, false},
		{"cuda:0", devices.Info{Name: "x:cuda:0", Kind: "cuda", Simulated: true}, true},
	} {
		if got := Matches(c.ref, c.d); got != c.want {
			t.Errorf("Matches(%q, %+v) = %v", c.ref, c.d, got)
		}
	}
	p, err := ParsePolicy([]byte("rules:\n  - layers: \"0-3\"\n    device: \"cuda:2\"\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := `p.yaml:2: pin to "cuda:2" but no device cuda:2 is present; present: sim:cuda:0, sim:cuda:1, sim:cpu`
	if err := p.Check(devs, nil); err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
}

// TestLayerPinsToNamedGPUs: a policy that pins layers 0-3 to cuda:0 and the
// rest to cuda:1 is obeyed op by op on both profiles, with a single copy
// between the GPUs in the blocks; a pin that the pinned GPU's cap cannot
// hold is an error naming the GPU, its cap's line and what it must hold.
func TestLayerPinsToNamedGPUs(t *testing.T) {
	g := tinyLlamaGraph(t)
	const pins = "rules:\n  - layers: \"0-3\"\n    device: \"cuda:0\"\n  - layers: \"4-1000\"\n    device: \"cuda:1\"\n"
	for _, profile := range []string{"2xh100-nvlink", "2xh100-pcie"} {
		t.Run(profile, func(t *testing.T) {
			cands := twoGPUs(t, profile)
			pol, err := ParsePolicy([]byte(pins), "pins.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if err := pol.Check(infosOf(cands), nil); err != nil {
				t.Fatal(err)
			}
			p, err := Make(g, cands, pol, &Costs{})
			if err != nil {
				t.Fatal(err)
			}
			for i, op := range g.Ops {
				want := ""
				switch {
				case op.Layer >= 0 && op.Layer <= 3:
					want = "sim:cuda:0"
				case op.Layer >= 4:
					want = "sim:cuda:1"
				}
				if want != "" && p.Device[i] != want {
					t.Fatalf("%s (layer %d) is on %s, pinned to %s", op.Name, op.Layer, p.Device[i], want)
				}
			}
			gpuToGPU := 0
			for _, tr := range p.Transfers {
				if strings.HasPrefix(tr.FromDevice, "sim:cuda") && strings.HasPrefix(tr.ToDevice, "sim:cuda") {
					gpuToGPU++
				}
			}
			if gpuToGPU != 1 {
				t.Fatalf("%d copies between the GPUs, want 1 (layer 3 to layer 4): %+v", gpuToGPU, p.Transfers)
			}
		})
	}
	// Every block pinned to cuda:0, whose cap holds a few.
	cands := twoGPUs(t, "2xh100-nvlink")
	pol, err := ParsePolicy([]byte("rules:\n  - layers: \"0-1000\"\n    device: \"cuda:0\"\nmemory:\n  \"cuda:0\": 200MiB\n"), "pins.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Make(g, cands, pol, &Costs{})
	for _, w := range []string{"sim:cuda:0 must hold the 330 ops only it may run", "more than its cap of 200.0 MiB (memory cap at pins.yaml:5)",
		"the weights and activations alone take", "raise its cap, or let other devices run some of its ops"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Fatalf("error %v lacks %q", err, w)
		}
	}
	if !errors.Is(err, ErrNoPlan) {
		t.Fatalf("%v does not wrap ErrNoPlan", err)
	}
}

// TestTwoGPUSplits caps both GPUs of each profile below the model. When the
// two together hold it, no op may spill to the CPU: a split between the
// GPUs (one copy of a few KiB a token) beats anything that runs layers on
// the host, and the GPUs, capped alike, hold within a layer of each other. When they do not, the CPU takes what is left, the output head
// stays on a GPU, and neither GPU leaves a whole layer's room unused. Either
// way every GPU is within its cap and the plan is predicted no slower than
// every split of whole layers a user could give llama.cpp by hand
// (--tensor-split: a run of layers on each GPU, the rest on the CPU).
func TestTwoGPUSplits(t *testing.T) {
	graphs := []struct {
		name string
		g    *ops.Graph
	}{{"tinyllama", tinyLlamaGraph(t)}, {"llama-7b", llama7bGraph(t)}}
	for _, profile := range []string{"2xh100-nvlink", "2xh100-pcie"} {
		cands := twoGPUs(t, profile)
		for _, gr := range graphs {
			g := gr.g
			whole, layer := wholeAndLayer(g)
			for _, c := range []struct {
				name     string
				share    float64 // of the whole model, per GPU
				together bool
			}{{"together", 0.55, true}, {"spill", 0.3, false}} {
				if gr.name == "llama-7b" && profile == "2xh100-pcie" {
					continue // as TinyLlama, the same as on NVLink; kept out for time
				}
				t.Run(fmt.Sprintf("%s/%s/%s", profile, gr.name, c.name), func(t *testing.T) {
					limit := int64(c.share * float64(whole))
					pol := &Policy{Name: "capped", Path: "caps.yaml", Transfers: "boundary",
						Memory: map[string]int64{"cuda:0": limit, "cuda:1": limit}}
					start := time.Now()
					p, err := Make(g, cands, pol, &Costs{})
					if err != nil {
						t.Fatal(err)
					}
					el := time.Since(start)
					pl := p.Placement()
					for _, gpu := range []string{"sim:cuda:0", "sim:cuda:1"} {
						if p.Memory[gpu] > limit {
							t.Errorf("%s holds %d bytes, over its cap of %d", gpu, p.Memory[gpu], limit)
						}
						if pl[gpu] == 0 {
							t.Errorf("%s runs nothing: %v", gpu, pl)
						}
						if !c.together && p.Memory[gpu] < limit-layer {
							t.Errorf("%s holds %d bytes of its %d: a whole layer (%d) would still fit", gpu, p.Memory[gpu], limit, layer)
						}
					}
					if c.together && pl["sim:cpu"] > 0 {
						t.Errorf("the GPUs together hold the model, yet %d ops run on the CPU: %v", pl["sim:cpu"], pl)
					}
					// Shared as the caps are (equal here), within a layer, so
					// that a prompt pipelined over the two waits on neither.
					if d := p.Memory["sim:cuda:0"] - p.Memory["sim:cuda:1"]; c.together && max(d, -d) > layer {
						t.Errorf("the GPUs hold %s and %s: more than a layer (%s) apart", bytesStr(p.Memory["sim:cuda:0"]), bytesStr(p.Memory["sim:cuda:1"]), bytesStr(layer))
					}
					if !c.together {
						if pl["sim:cpu"] == 0 {
							t.Fatalf("the model does not fit the GPUs, yet the CPU runs nothing: %v", pl)
						}
						if head := p.Device[len(g.Ops)-1]; !strings.HasPrefix(head, "sim:cuda") {
							t.Errorf("the output head is on %s, not a GPU", head)
						}
					}
					// Predicted sums durations rounded to the nanosecond, the
					// search sums seconds: up to a nanosecond an op apart.
					best := bestTensorSplit(t, g, cands, pol, limit)
					if p.Predicted > best.cost+time.Duration(len(g.Ops)) {
						t.Errorf("auto predicts %v, the best split of whole layers (%s) %v", p.Predicted, best.what, best.cost)
					}
					// Under caps that leave part of a layer's room, fill puts
					// parts of the CPU's layers on the GPUs, which pays.
					if !c.together && p.Predicted >= best.cost {
						t.Errorf("auto predicts %v, no faster than the best split of whole layers (%s)", p.Predicted, best.what)
					}
					t.Logf("%v to plan; predicted %v %v (%d copies), GPUs %s and %s of %s each; best whole-layer split %s %v",
						el.Round(time.Millisecond), p.Predicted, pl, len(p.Transfers), bytesStr(p.Memory["sim:cuda:0"]), bytesStr(p.Memory["sim:cuda:1"]),
						bytesStr(limit), best.what, best.cost)
				})
			}
		}
	}
}

// wholeAndLayer is what every op of g holds on one device with an f16 KV
// cache, and the most one layer's ops hold.
func wholeAndLayer(g *ops.Graph) (whole, layer int64) {
	per := map[int]int64{}
	for _, op := range g.Ops {
		b := g.Values[op.Out].Bytes()
		if op.Weight != nil {
			b += op.Weight.Bytes()
		}
		if op.Kind == ops.Attention {
			b += KVCacheBytes(op, 2)
		}
		whole += b
		per[op.Layer] += b
	}
	for l, b := range per {
		if l >= 0 {
			layer = max(layer, b)
		}
	}
	return whole, layer
}

type split struct {
	cost time.Duration
	what string
}

// bestTensorSplit is the fastest placement of whole layers that fits the
// cap on both GPUs (alike, with the same cap): a run of k0 layers on one GPU
// and the next k1 on the other, from the first layer or back from the last, the layers left on
// the CPU, and the embedding and the output head each on the CPU or either
// GPU.
func bestTensorSplit(t *testing.T, g *ops.Graph, cands []Candidate, pol *Policy, limit int64) split {
	t.Helper()
	p, prob, _, err := prepare(g, cands, pol, (&Costs{}).For(cands))
	if err != nil {
		t.Fatal(err)
	}
	layers := 0
	for _, op := range g.Ops {
		layers = max(layers, op.Layer+1)
	}
	gpus := []int{p.DeviceIndex("sim:cuda:0"), p.DeviceIndex("sim:cuda:1")}
	cpu := p.DeviceIndex("sim:cpu")
	best := split{cost: time.Duration(math.MaxInt64)}
	a := make([]int, len(g.Ops))
	// The GPUs are alike, with equal caps and links: either may go first.
	for _, order := range [][2]int{{gpus[0], gpus[1]}} {
		for _, prefix := range []bool{true, false} {
			for k0 := 0; k0 <= layers; k0++ {
				for k1 := 0; k0+k1 <= layers; k1++ {
					for _, embed := range []int{cpu, order[0], order[1]} {
						for _, head := range []int{cpu, order[0], order[1]} {
							for i, op := range g.Ops {
								l := op.Layer
								if !prefix {
									l = layers - 1 - l
								}
								switch {
								case op.Layer < 0 && op.Kind == ops.Embed:
									a[i] = embed
								case op.Layer < 0:
									a[i] = head
								case l < k0:
									a[i] = order[0]
								case l < k0+k1:
									a[i] = order[1]
								default:
									a[i] = cpu
								}
							}
							c, ok := Evaluate(prob, a)
							if !ok || time.Duration(c*1e9) >= best.cost {
								continue
							}
							mem, _ := p.memoryFor(names(p.Devices, a))
							if mem["sim:cuda:0"] > limit || mem["sim:cuda:1"] > limit {
								continue
							}
							best = split{time.Duration(c * 1e9), fmt.Sprintf("%s %d, %s %d (prefix %v), embed on %s, head on %s",
								p.Devices[order[0]].Name, k0, p.Devices[order[1]].Name, k1, prefix, p.Devices[embed].Name, p.Devices[head].Name)}
						}
					}
				}
			}
		}
	}
	if best.what == "" {
		t.Fatal("no whole-layer split fits")
	}
	return best
}

// TestMemoryAutoCaps: `memory: auto` caps a device at its free memory less
// AutoMargin, or its whole memory less the margin where the free memory is
// unknown; a smaller cap wins either way; and a device it cannot cap (host
// memory, or less free than the margin) is an error at the cap's line, from
// Check and from Make alike.
func TestMemoryAutoCaps(t *testing.T) {
	const gib = 1 << 30
	p, err := ParsePolicy([]byte("memory:\n  cuda: auto\n  \"cuda:1\": 10GiB\n  cpu: auto\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !p.MemoryAuto["cuda"] || !p.MemoryAuto["cpu"] || len(p.MemoryAuto) != 2 || p.Memory["cuda:1"] != 10*gib || len(p.Memory) != 1 {
		t.Fatalf("memory %v, auto %v", p.Memory, p.MemoryAuto)
	}
	for _, c := range []struct {
		d    devices.Info
		cap  int64
		line int
	}{
		{devices.Info{Name: "cuda:0", Kind: "cuda", Memory: 80 * gib, Free: 60 * gib}, 59 * gib, 2},
		{devices.Info{Name: "cuda:2", Kind: "cuda", Memory: 80 * gib}, 79 * gib, 2},                      // free unknown
		{devices.Info{Name: "cuda:1", Kind: "cuda", Memory: 80 * gib, Free: 60 * gib}, 10 * gib, 3},      // the smaller cap
		{devices.Info{Name: "cuda:1", Kind: "cuda", Memory: 80 * gib, Free: 10 * gib}, 9 * gib, 2},       // auto, smaller
		{devices.Info{Name: "sim:cuda:1", Kind: "cuda", Memory: 16 * gib, Simulated: true}, 10 * gib, 3}, // by the name it stands for
	} {
		if got, line := p.MemoryCap(c.d), p.CapLine(c.d); got != c.cap || line != c.line {
			t.Errorf("%+v: cap %d at line %d, want %d at line %d", c.d, got, line, c.cap, c.line)
		}
	}
	// What Check and Make say about devices auto cannot cap.
	g := builtinGraph(t, 1)
	all := func(*ops.Op) error { return nil }
	for _, c := range []struct {
		name, policy string
		devs         []devices.Info
		want         string
	}{
		{"host memory", "memory:\n  cpu: auto\n", []devices.Info{{Name: "cpu", Kind: "cpu"}},
			`p.yaml:2: memory: cpu: auto for cpu, which has no fixed memory size (host memory): give a size, like 16GiB`},
		{"less free than the margin", "memory:\n  cpu: 1GiB\n  \"cuda:0\": auto\n",
			[]devices.Info{{Name: "cpu", Kind: "cpu"}, {Name: "cuda:0", Kind: "cuda", Memory: 80 * gib, Free: 900 << 20}},
			`p.yaml:3: memory: cuda:0: auto for cuda:0 leaves nothing: its free 900.0 MiB less a margin of 1.00 GiB (the CUDA context, a prefill step's buffers); free memory on the device or give a size`},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(c.policy), "p.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Check(c.devs, nil); err == nil || err.Error() != c.want {
				t.Errorf("Check: %v\nwant %s", err, c.want)
			}
			var cands []Candidate
			for _, d := range c.devs {
				cands = append(cands, Candidate{Info: d, Supports: all})
			}
			_, err = Make(g, cands, p, &Costs{})
			if err == nil || !strings.HasPrefix(err.Error(), c.want) || !errors.Is(err, ErrNoPlan) {
				t.Errorf("Make: %v\nwant %s", err, c.want)
			}
		})
	}
	// A device the policy does not use needs no auto cap it can take.
	q, err := ParsePolicy([]byte("devices: [cuda]\nmemory:\n  cpu: auto\n  cuda: auto\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Check([]devices.Info{{Name: "cpu", Kind: "cpu"}, {Name: "cuda:0", Kind: "cuda", Memory: 80 * gib}}, nil); err != nil {
		t.Errorf("auto on the host CPU, which devices: [cuda] leaves out: %v", err)
	}
	// A size that is not one, in a cap that could have been auto.
	_, err = ParsePolicy([]byte("memory:\n  cuda: automatic\n"), "p.yaml")
	if want := `p.yaml:2: memory: cap of cuda: size "automatic" is not a number with an optional unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), or auto (the device's free memory less a margin)`; err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
}

// autoProfile is a host whose GPUs (named cuda:0 and cuda:1, gpus of them)
// have freeGB free of 80 GB each.
func autoProfile(t *testing.T, gpus int, freeGB float64) []Candidate {
	t.Helper()
	var b strings.Builder
	b.WriteString("name: shared\nsource: a test host\ndevices:\n  - {name: cpu, kind: cpu, memory_gb: 128, bandwidth_gbs: 96, tflops: 1.2, launch_us: 2}\n")
	for i := 0; i < gpus; i++ {
		fmt.Fprintf(&b, "  - {name: \"cuda:%d\", kind: cuda, memory_gb: 80, free_gb: %g, bandwidth_gbs: 3350, tflops: 67, launch_us: 2.5}\n", i, freeGB)
	}
	b.WriteString("links:\n")
	for i := 0; i < gpus; i++ {
		fmt.Fprintf(&b, "  - {from: cpu, to: \"cuda:%d\", latency_us: 7.5, bandwidth_gbs: 54}\n", i)
	}
	if gpus == 2 {
		b.WriteString("  - {from: \"cuda:0\", to: \"cuda:1\", latency_us: 8, bandwidth_gbs: 387}\n")
	}
	hw, err := sim.ParseHardware([]byte(b.String()), "shared.yaml")
	if err != nil {
		t.Fatal(err)
	}
	devs := sim.Open(hw, 1)
	t.Cleanup(func() {
		for _, d := range devs {
			d.Close()
		}
	})
	return Candidates(devs)
}

// TestMemoryAutoFitsOrSaysWhatToLower plans Llama-7B's shape (3.6 GiB of
// Q4_0 weights, a 2 GiB f16 KV cache at its 4096 positions) with the GPUs
// alone (devices: [cuda]) under `memory: {cuda: auto}`, on simulated GPUs
// with a few GiB free. Where it fits, each GPU holds at most its free memory
// less the margin, and the plan says what auto gave. Where it does not, the
// error names the device(s), the cap's line and where it comes from, and the
// largest context that fits, which is checked: that context plans, one more
// position does not.
func TestMemoryAutoFitsOrSaysWhatToLower(t *testing.T) {
	const gib = 1 << 30
	pol, err := ParsePolicy([]byte("devices: [cuda]\nmemory:\n  cuda: auto\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	plan := func(cands []Candidate, ctx int) (*Plan, error) {
		return Make(presetGraph(t, "llama-7b", ctx), cands, pol, &Costs{})
	}
	maxCtx := regexp.MustCompile(`lower the context to at most (\d+) positions`)
	for _, c := range []struct {
		name   string
		gpus   int
		freeGB float64
		fits   bool
		want   []string
	}{
		{"one GPU fits", 1, 7, true, nil},
		{"two GPUs fit", 2, 4, true, nil},
		{"one GPU, context too long", 1, 6, false, []string{
			"sim:cuda:0 must hold the 483 ops only it may run, 5.57 GiB: weights 3.56 GiB, KV cache 2.00 GiB at a context of 4096 positions",
			"more than its cap of 5.00 GiB (memory: auto at p.yaml:3, free 6.00 GiB less a margin of 1.00 GiB)",
			"lower the context to at most"}},
		{"two GPUs, context too long", 2, 3.5, false, []string{
			"the model needs at least 5.57 GiB: weights 3.56 GiB, KV cache 2.00 GiB at a context of 4096 positions",
			"more than the 5.00 GiB its devices may hold (sim:cuda:0 2.50 GiB (memory: auto at p.yaml:3, free 3.50 GiB less a margin of 1.00 GiB); sim:cuda:1 2.50 GiB",
			"lower the context to at most"}},
		{"one GPU, weights too large", 1, 4, false, []string{
			"more than its cap of 3.00 GiB (memory: auto at p.yaml:3, free 4.00 GiB less a margin of 1.00 GiB)",
			"the weights and activations alone take 3.57 GiB: raise its cap"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cands := autoProfile(t, c.gpus, c.freeGB)
			if err := pol.Check(infosOf(cands), nil); err != nil {
				t.Fatal(err)
			}
			p, err := plan(cands, 4096)
			if c.fits {
				if err != nil {
					t.Fatal(err)
				}
				limit := int64(c.freeGB*gib) - AutoMargin
				for _, cd := range cands {
					if cd.Info.Kind == "cuda" && p.Memory[cd.Info.Name] > limit {
						t.Errorf("%s holds %d bytes, over free less the margin, %d", cd.Info.Name, p.Memory[cd.Info.Name], limit)
					}
				}
				if note := fmt.Sprintf("memory: auto (p.yaml:3) caps sim:cuda:0 (simulated) at %s: its free %s less a margin of 1.00 GiB", bytesStr(limit), bytesStr(int64(c.freeGB*gib))); !strings.Contains(strings.Join(p.Notes, "\n"), note) {
					t.Errorf("notes %q lack %q", p.Notes, note)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrNoPlan) {
				t.Fatalf("planned %v, or an error that is not ErrNoPlan: %v", p, err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			m := maxCtx.FindStringSubmatch(err.Error())
			if m == nil {
				return
			}
			n, _ := strconv.Atoi(m[1])
			if _, err := plan(cands, n+1); err == nil {
				t.Errorf("a context of %d, one past the %d the error names, plans", n+1, n)
			}
			if c.gpus == 1 {
				// One device holds everything: the largest context is exact.
				if _, err := plan(cands, n); err != nil {
					t.Errorf("the context the error names, %d, does not plan: %v", n, err)
				}
			} else if _, err := plan(cands, n*9/10); err != nil {
				// Two devices are packed in whole ops: within 10%.
				t.Errorf("nine tenths of the context the error names, %d, does not plan: %v", n*9/10, err)
			}
		})
	}
}

// TestPipelined predicts steps pipelined over two simulated GPUs each
// capped below TinyLlama, so that the plan is a chain (the embedding and
// cuda:0's layers, then cuda:1's layers and the head): one step is the
// plan's ops and copies one after another (Predicted), and each further
// step adds the slower GPU's part, which, the layers shared as the caps
// are, is little more than half a step.
func TestPipelined(t *testing.T) {
	g := presetGraph(t, "tinyllama-1.1b", 2048)
	whole, _ := wholeAndLayer(g)
	limit := int64(0.6 * float64(whole))
	pol := &Policy{Name: "capped", Path: "caps.yaml", Transfers: "boundary",
		Memory: map[string]int64{"cuda:0": limit, "cuda:1": limit}}
	p, err := Make(g, twoGPUs(t, "2xh100-nvlink"), pol, &Costs{})
	if err != nil {
		t.Fatal(err)
	}
	if pl := p.Placement(); pl["sim:cuda:0"] == 0 || pl["sim:cuda:1"] == 0 || pl["sim:cpu"] > 0 {
		t.Fatalf("placement %v, want both GPUs alone", pl)
	}
	one := p.Pipelined(1)
	if d := one - p.Predicted; max(d, -d) > time.Duration(len(g.Ops)) {
		t.Fatalf("one step predicted %v pipelined, %v as the plan", one, p.Predicted)
	}
	more := p.Pipelined(4) - p.Pipelined(3)
	if 2*more < p.Predicted-2*p.Transfers[0].Time || 10*more > 6*p.Predicted {
		t.Fatalf("each further step adds %v to a step of %v: want about half of it", more, p.Predicted)
	}
	t.Logf("a step %v (%s); 4 pipelined %v", p.Predicted, p.PlacementText(), p.Pipelined(4))
}
