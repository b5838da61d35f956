package planner

import (
	"slices"
	"strings"
	"testing"
	"time"

	"hybrid/devices"
	"hybrid/models/llama"
	"hybrid/models/synth"
	"hybrid/ops"
)

// rates is a test's model of a device: a roofline over an op's bytes and
// FLOPs, and one link to every other device.
type rates struct {
	bytesPerSec, flopsPerSec, linkPerSec float64
}

func (r rates) OpTime(op *ops.Op, st ops.Step) time.Duration {
	s := max(float64(op.Cost.BytesRead+op.Cost.BytesWritten)/r.bytesPerSec, float64(op.Cost.FLOPs)/r.flopsPerSec)
	return 2*time.Microsecond + time.Duration(s*1e9)
}

func (r rates) CopyTime(from, to devices.Info, bytes int64) (time.Duration, bool) {
	return 5*time.Microsecond + time.Duration(float64(bytes)/r.linkPerSec*1e9), true
}

// gpuAndHost is a GPU that streams weights over a link of linkPerSec and
// holds capBytes, and a 16-thread host: an H100 (3 TB/s, 400 TFLOPS of
// int8 at half efficiency) and a Xeon (60 GB/s, 1 TFLOPS) in round numbers.
func gpuAndHost(linkPerSec float64) []Candidate {
	ok := func(*ops.Op) error { return nil }
	return []Candidate{
		{Info: devices.Info{Name: "gpu", Kind: "cuda", Simulated: true, Memory: 80 << 30}, Supports: ok, Streams: true,
			Sim: rates{3e12, 200e12, linkPerSec}},
		{Info: devices.Info{Name: "host", Kind: "cpu", Simulated: true, Threads: 16}, Supports: ok,
			Sim: rates{60e9, 1e12, linkPerSec}},
	}
}

// stepGraph is a synth preset's graph in Q4_0 of a step of n tokens.
func stepGraph(t *testing.T, preset string, n, ctx int) *ops.Graph {
	t.Helper()
	return stepGraphAt(t, preset, n, 0, ctx)
}

// stepGraphAt is stepGraph of a step after past cells.
func stepGraphAt(t *testing.T, preset string, n, past, ctx int) *ops.Graph {
	t.Helper()
	p, err := synth.LookupPreset(preset)
	if err != nil {
		t.Fatal(err)
	}
	ft, err := synth.LookupFileType("Q4_0")
	if err != nil {
		t.Fatal(err)
	}
	g, err := llama.Build(p.Config(), ft.Types(p), n, past, ctx)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestStepStreamsWhenItPays: TinyLlama with the GPU capped at 300 MiB, as
// bench/cuda/side-by-side.sh runs it. The decode plan splits the layers; a
// 512-token prefill planned on it streams CPU-resident weights to the GPU
// over a fast link, which the cost model says beats multiplying them on the
// host, and streams none over a link too slow for it, nor for a decode-sized
// step (at depth: copying a cache's cells in would cost more than attending
// on the host). Attention stays with its KV cache unless both devices can stream
// caches (KVStreams, KVHost): then, where streaming pays, the host's layers
// attend on the GPU too, their cells copied back. The GPU has room for two
// slots of streamed weights, which hold a streamed cache too, beside what
// the decode plan keeps there; the step is never predicted slower than the decode placement
// applied to it.
func TestStepStreamsWhenItPays(t *testing.T) {
	const ctx, capBytes = 2048, 300 << 20
	decodeG := stepGraph(t, "tinyllama-1.1b", 1, ctx)
	prefillG := stepGraph(t, "tinyllama-1.1b", 512, ctx)
	deepG := stepGraphAt(t, "tinyllama-1.1b", 1, ctx-1, ctx)
	pol := &Policy{Name: "capped", Transfers: "boundary", Memory: map[string]int64{"cuda": capBytes}}
	for _, c := range []struct {
		name       string
		link       float64
		g          *ops.Graph
		wantStream bool
		kv         bool // the devices can stream KV caches
	}{
		{"prefill, PCIe-class link", 25e9, prefillG, true, false},
		{"prefill, a link too slow", 50e6, prefillG, false, false},
		{"decode-sized step", 25e9, decodeG, false, false},
		{"prefill, PCIe-class link, caches streamed", 25e9, prefillG, true, true},
		{"prefill, a link too slow, caches streamable", 50e6, prefillG, false, true},
		{"decode-sized step deep in the context, caches streamable", 25e9, deepG, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cands := gpuAndHost(c.link)
			cands[0].KVStreams, cands[1].KVHost = c.kv, c.kv
			decode, err := Make(decodeG, cands, pol, &Costs{})
			if err != nil {
				t.Fatal(err)
			}
			if pl := decode.Placement(); pl["gpu"] == 0 || pl["host"] == 0 {
				t.Fatalf("the decode plan does not split: %v", pl)
			}
			// Room for streamed weights is kept where streaming pays.
			reserved := slices.ContainsFunc(decode.Notes, func(n string) bool { return strings.Contains(n, "free for two streamed weights") })
			if reserved != (c.link > 1e9) {
				t.Errorf("room kept for streaming: %v over a link of %g B/s (notes %q)", reserved, c.link, decode.Notes)
			}
			step, err := MakeStep(c.g, cands, pol, &Costs{}, decode)
			if err != nil {
				t.Fatal(err)
			}
			dev := decode.ByName()
			var streamed, caches, hostCaches int
			var largest, scratch int64
			for i, op := range c.g.Ops {
				if op.Kind == ops.Attention {
					if dev[op.Name] == "host" {
						hostCaches++
					}
					switch {
					case step.Device[i] == dev[op.Name]:
						if step.Streamed[i] != "" {
							t.Errorf("%s runs with its KV cache yet streams it from %s", op, step.Streamed[i])
						}
					case !c.kv || step.Streamed[i] != dev[op.Name] || step.Device[i] != "gpu":
						t.Errorf("%s runs on %s, its KV cache is on %s (streamed from %q)", op, step.Device[i], dev[op.Name], step.Streamed[i])
					default:
						caches++
						scratch = kvCellBytes(op, c.g.Past+c.g.Tokens, 2)
					}
					continue
				}
				if step.Streamed[i] == "" {
					if op.Weight != nil && step.Device[i] != dev[op.Name] {
						t.Errorf("%s runs on %s without streaming its weight from %s", op, step.Device[i], dev[op.Name])
					}
					continue
				}
				streamed++
				largest = max(largest, op.Weight.Bytes())
				if step.Streamed[i] != "host" || step.Device[i] != "gpu" || dev[op.Name] != "host" {
					t.Errorf("%s streams from %s to %s; the decode plan keeps it on %s", op, step.Streamed[i], step.Device[i], dev[op.Name])
				}
			}
			if (streamed > 0) != c.wantStream {
				t.Fatalf("%d weights streamed, want streaming %v (predicted %v)", streamed, c.wantStream, step.Predicted)
			}
			if wantCaches := c.kv && c.wantStream; (caches > 0) != wantCaches || (wantCaches && caches != hostCaches) {
				t.Errorf("%d of the host's %d attention ops run on the GPU, want all: %v", caches, hostCaches, wantCaches)
			}
			if n, _ := step.StreamedCaches(); n != caches {
				t.Errorf("StreamedCaches counts %d, the plan streams %d", n, caches)
			}
			if need := decode.Resident["gpu"] + 2*max(largest, scratch/2); need > capBytes {
				t.Errorf("the GPU needs %d bytes for its resident weights and two slots for streamed weights and a streamed cache, cap %d", need, capBytes)
			}
			assign, err := Assign(decode.ByName(), c.g)
			if err != nil {
				t.Fatal(err)
			}
			applied, err := Apply(c.g, cands, pol, &Costs{}, assign)
			if err != nil {
				t.Fatal(err)
			}
			if step.Predicted > applied.Predicted {
				t.Errorf("the step's own plan is predicted %v, the decode placement on it %v", step.Predicted, applied.Predicted)
			}
			if c.wantStream && step.Predicted*2 > applied.Predicted {
				t.Errorf("streaming saves too little: %v against %v", step.Predicted, applied.Predicted)
			}
			t.Logf("%d weights and %d caches streamed: predicted %v, the decode placement %v", streamed, caches, step.Predicted, applied.Predicted)
		})
	}
}

// TestStepWithoutRoomStreamsNothing: when the decode plan fills the GPU to
// its cap, no weight has room to be streamed in, and a note says so.
func TestStepWithoutRoomStreamsNothing(t *testing.T) {
	const ctx = 2048
	decodeG := stepGraph(t, "tinyllama-1.1b", 1, ctx)
	prefillG := stepGraph(t, "tinyllama-1.1b", 512, ctx)
	cands := gpuAndHost(25e9)
	pol := &Policy{Name: "capped", Transfers: "boundary", Memory: map[string]int64{"cuda": 300 << 20}}
	decode, err := Make(decodeG, cands, pol, &Costs{})
	if err != nil {
		t.Fatal(err)
	}
	// The same placement, with the cap now at what it holds.
	pol.Memory["cuda"] = decode.Resident["gpu"]
	step, err := MakeStep(prefillG, cands, pol, &Costs{}, decode)
	if err != nil {
		t.Fatal(err)
	}
	for i, from := range step.Streamed {
		if from != "" {
			t.Fatalf("%s is streamed with no room for it", prefillG.Ops[i])
		}
	}
	if len(step.Notes) == 0 {
		t.Fatal("no note says why nothing is streamed")
	}
	t.Log(step.Notes)
}
