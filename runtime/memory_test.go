package runtime

import (
	"os"
	"path/filepath"
	"testing"

	"hybrid/devices"
	_ "hybrid/devices/cuda" // the cuda-only case, in a -tags cuda test binary on a GPU
	"hybrid/models/llama"
)

// builtinModel is the embedded stories260K, as LoadModel("") gives it.
func builtinModel(t *testing.T) *llama.Model {
	t.Helper()
	m, err := LoadModel("", nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// promptAndToken runs a prompt of n tokens from position 0 and one decode
// step after it, as a generation does, and returns the memory every device
// of s reports, summed.
func promptAndToken(t *testing.T, s *Session, n int) int64 {
	t.Helper()
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32(1 + (i*7)%(s.Model.Config.Vocab-1))
	}
	if _, err := s.Exec.Prefill(toks, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exec.Forward([]int32{1}, n); err != nil {
		t.Fatal(err)
	}
	var mem int64
	for _, d := range s.Devices {
		mem += d.MemoryUsed()
	}
	return mem
}

// TestMemoryStableOverPromptLengths runs prompts of many lengths in one
// session, on one CPU device and on two with copies between them, and checks
// that the devices hold no more than the largest step needs: a replaced
// prefill step's buffers are freed. Before devices could free buffers, six
// prompts grew stories260K's memory from 1.38 MB to 2.18 MB.
func TestMemoryStableOverPromptLengths(t *testing.T) {
	m := builtinModel(t)
	lengths := []int{5, 40, 3, 97, 12, 64, 2, 5}
	largest := 97
	for _, tc := range []struct {
		name string
		o    SessionOptions
	}{
		{"cpu-only", SessionOptions{Policy: "cpu-only", Threads: 1, Context: 128}},
		{"cpu-split", SessionOptions{Policy: "cpu-split", CPUs: 2, Threads: 1, Context: 128}},
		{"per-op", SessionOptions{Policy: "cpu-split", CPUs: 2, Threads: 1, Context: 128, PerOp: true}},
		// On a GPU (a -tags cuda test binary there); skipped elsewhere.
		{"cuda-only", SessionOptions{Policy: "cuda-only", Threads: 1, Context: 128}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// What the largest prompt needs, in a session of its own.
			fresh, err := NewSession(m, tc.o)
			if err != nil && tc.name == "cuda-only" {
				t.Skipf("no CUDA device: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			bound := promptAndToken(t, fresh, largest)
			fresh.Close()

			s, err := NewSession(m, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var first, peak int64
			for i, n := range lengths {
				mem := promptAndToken(t, s, n)
				if i == 0 {
					first = mem
				}
				peak = max(peak, mem)
				if mem > bound {
					t.Fatalf("after prompt %d (%d tokens): %d bytes held, more than the %d the largest prompt (%d tokens) needs alone", i, n, mem, bound, largest)
				}
			}
			if last := promptAndToken(t, s, lengths[0]); last != first {
				t.Fatalf("a %d-token prompt held %d bytes first and %d after %d other prompts", lengths[0], first, last, len(lengths))
			}
			t.Logf("%d prompts: first %d bytes, peak %d, largest alone %d", len(lengths), first, peak, bound)
		})
	}
}

// TestPlannedMemoryMatchesDevice plans the built-in model on a simulated
// host whose GPU keeps an f32 KV cache, as hybrid's CUDA device does, with
// the GPU capped so that the plan splits the model, and checks that what the
// plan says each device holds at rest (weights and KV cache) is what the
// device reports holding after loading the model and running a step, less
// the executor's activation buffers. A planner that sized every cache as f16
// under-counted the GPU's by half.
func TestPlannedMemoryMatchesDevice(t *testing.T) {
	m := builtinModel(t)
	dir := t.TempDir()
	hw := filepath.Join(dir, "f32kv.yaml")
	if err := os.WriteFile(hw, []byte(`name: f32kv
source: a test host
devices:
  - name: cpu
    kind: cpu
    memory_gb: 16
    bandwidth_gbs: 20
    tflops: 0.05
    launch_us: 2
  - name: gpu
    kind: cuda
    memory_gb: 0.0008
    bandwidth_gbs: 500
    tflops: 20
    launch_us: 2.5
    kv_cache: f32
links:
  - {from: cpu, to: gpu, latency_us: 10, bandwidth_gbs: 20}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(m, SessionOptions{Policy: "auto", Hardware: hw, Threads: 1, Context: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Plan.Placement()["sim:gpu"] == 0 || s.Plan.Placement()["sim:cpu"] == 0 {
		t.Fatalf("the capped plan does not split the model: %v", s.Plan.Placement())
	}
	promptAndToken(t, s, 9)
	bufs := s.Exec.BufferBytes()
	for _, d := range s.Exec.Devices() {
		name := d.Name()
		held := d.MemoryUsed() - bufs[name]
		if planned := s.Plan.Resident[name]; planned != held {
			t.Errorf("%s (KV element %d bytes): the plan holds %d bytes of weights and KV cache, the device %d", name, d.Info().KVElemBytes(), planned, held)
		}
		if d.Info().Memory > 0 && d.MemoryUsed() > d.Info().Memory {
			t.Errorf("%s holds %d bytes, over its %d", name, d.MemoryUsed(), d.Info().Memory)
		}
	}
}

// fusingDevice is a device that says it fuses the ops of steps of up to 31
// tokens (as the CUDA device does) and counts what it is asked to allocate.
type fusingDevice struct {
	devices.Device
	allocated int64
}

type countedBuf int

func (b countedBuf) Len() int { return int(b) }

func (f *fusingDevice) Info() devices.Info {
	return devices.Info{Name: "fusing", FusionWindow: 4, FusionTokens: 31}
}
func (f *fusingDevice) Name() string { return "fusing" }
func (f *fusingDevice) Alloc(n int) (devices.Buffer, error) {
	f.allocated += 4 * int64(n)
	return countedBuf(n), nil
}
func (f *fusingDevice) View(b devices.Buffer, n int) (devices.Buffer, error) {
	return countedBuf(n), nil
}

// TestPromptBuffersIgnoreFusionWindow lays out a prompt's step and a decode
// step of a real model on a device that fuses the ops of steps of up to 31
// tokens: the decode step keeps its fusion window (more buffers than live
// values need), the prompt's, which nothing fuses, reuses a buffer as soon
// as its value is dead, so it takes little more than its values' largest
// live set.
func TestPromptBuffersIgnoreFusionWindow(t *testing.T) {
	m := builtinModel(t)
	for _, n := range []int{1, 64} {
		g, err := m.Graph(n, 0, 128)
		if err != nil {
			t.Fatal(err)
		}
		d := &fusingDevice{}
		dev := make([]devices.Device, len(g.Ops))
		for i := range dev {
			dev[i] = d
		}
		l := layoutFor(g, dev, false)
		var live int64 // the most bytes of values live at one op
		for at := range g.Ops {
			var sum int64
			for _, iv := range l.need[d] {
				if iv.start <= at && at <= iv.end {
					sum += 4 * int64(iv.elems)
				}
			}
			live = max(live, sum)
		}
		if _, err := allocate(d, l.need[d], g.Tokens); err != nil {
			t.Fatal(err)
		}
		ratio := float64(d.allocated) / float64(live)
		t.Logf("%d tokens: %d bytes of buffers for %d live", n, d.allocated, live)
		if n == 1 && ratio < 1.3 {
			t.Errorf("a decode step's buffers are %.2f× its live values: the fusion window was not kept", ratio)
		}
		if n > 1 && ratio > 1.2 {
			t.Errorf("a %d-token step's buffers are %.2f× its live values", n, ratio)
		}
	}
}

// peakDevice is a device that reports a peak.
type peakDevice struct {
	devices.Device
	name string
	peak devices.MemoryPeak
}

func (p *peakDevice) Name() string                   { return p.name }
func (p *peakDevice) MemoryPeak() devices.MemoryPeak { return p.peak }

// TestMemoryPeaks: the devices that keep a peak are reported by name, the
// others not at all.
func TestMemoryPeaks(t *testing.T) {
	gpu := &peakDevice{name: "cuda:0", peak: devices.MemoryPeak{Total: 300, Weights: 200, Buffers: 100, Runtime: 500}}
	got := MemoryPeaks([]devices.Device{&fusingDevice{}, gpu})
	if len(got) != 1 || got["cuda:0"] != gpu.peak {
		t.Errorf("MemoryPeaks: %+v, want only cuda:0's %+v", got, gpu.peak)
	}
	if got := MemoryPeaks([]devices.Device{&fusingDevice{}}); got != nil {
		t.Errorf("MemoryPeaks of a device without a peak: %+v, want nil", got)
	}
}
