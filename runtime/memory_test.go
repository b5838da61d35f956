package runtime

import (
	"os"
	"path/filepath"
	"testing"

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
