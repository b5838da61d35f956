package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"hybrid/models/llama"
	"hybrid/models/synth"
	"hybrid/planner"
)

// Plans over the two GPUs of a simulated host (configs/hardware/
// 2xh100-nvlink.yaml and 2xh100-pcie.yaml, issue 18), run end to end on
// the CPU: the simulated GPUs compute what the CPU computes, so every plan's
// greedy tokens must be cpu-only's, its copies exactly the plan's
// boundaries, and its memory within the caps.

// synthStories writes the synthetic stories15m in Q8_0 (6 layers, 27 MB,
// random weights, a generated vocabulary of 32000 tokens; under a second
// to write) and loads it: big enough that the simulated GPUs beat the CPU
// for its mat-muls, small enough to run on 2 cores in seconds.
func synthStories(t *testing.T) *llama.Model {
	t.Helper()
	p, err := synth.LookupPreset("stories15m")
	if err != nil {
		t.Fatal(err)
	}
	ft, err := synth.LookupFileType("Q8_0")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "stories15m-q8_0.gguf")
	if err := synth.Write(path, synth.Options{Preset: p, Type: ft, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	m, err := LoadModel(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// writeFile writes text to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// oneGPUNeed is what the whole model holds on one simulated GPU of the
// profile at context ctx (weights, KV cache, every value of a decode step),
// as the planner counts it.
func oneGPUNeed(t *testing.T, m *llama.Model, hw string, ctx int) int64 {
	t.Helper()
	pol := writeFile(t, t.TempDir(), "one.yaml", "devices: [\"cuda:0\"]\n")
	s, err := NewSession(m, SessionOptions{Policy: pol, Hardware: hw, Threads: 1, Context: ctx})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return s.Plan.Memory["sim:cuda:0"]
}

const multiGPUPrompt = "Once upon a time"

// greedyTokens is the greedy generation of n tokens of a session after the
// prompt.
func greedyTokens(t *testing.T, s *Session, n int) []int32 {
	t.Helper()
	r, err := s.Exec.Generate(GenerateOptions{Prompt: multiGPUPrompt, MaxTokens: n,
		Sampler: SamplerConfig{Temp: 0, TopP: 1, RepeatPenalty: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return r.Tokens
}

// checkMultiGPU runs the session's plan and checks it against cpu-only:
// the same greedy tokens; per decode step exactly the plan's copies, each
// between the devices the plan says; and, in a fresh session of decode
// steps alone, every device holding the weights and KV cache the plan says,
// and in all no more than the plan's memory for it, which is within its cap.
func checkMultiGPU(t *testing.T, m *llama.Model, o SessionOptions, want []int32) *Session {
	t.Helper()
	s, err := NewSession(m, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if got := greedyTokens(t, s, len(want)); !slices.Equal(got, want) {
		t.Fatalf("greedy tokens %v, cpu-only %v (plan %v)", got, want, s.Plan.Placement())
	}
	// One decode step: its copies are the plan's boundaries, once each.
	s.Exec.ResetStats()
	if _, err := s.Exec.Forward([]int32{1}, len(want)); err != nil {
		t.Fatal(err)
	}
	links := map[string]int{}
	for _, tr := range s.Plan.Transfers {
		links[tr.FromDevice+" -> "+tr.ToDevice]++
	}
	if c := s.Exec.Stats.Copies.Count; c != len(s.Plan.Transfers) {
		t.Errorf("a decode step made %d copies, the plan has %d boundaries", c, len(s.Plan.Transfers))
	}
	for k, l := range s.Exec.Stats.Links {
		if l.Count != links[k] {
			t.Errorf("%s: %d copies a step, the plan %d", k, l.Count, links[k])
		}
	}

	// Memory, with only the decode step's buffers: the prompt a token at
	// a time.
	fresh, err := NewSession(m, o)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	toks := fresh.Model.Tokenizer.Encode(multiGPUPrompt, true)
	for pos, tok := range toks {
		if _, err := fresh.Exec.Forward([]int32{tok}, pos); err != nil {
			t.Fatal(err)
		}
	}
	bufs := fresh.Exec.BufferBytes()
	for _, d := range fresh.Exec.Devices() {
		name, used := d.Name(), d.MemoryUsed()
		if held := used - bufs[name]; held != fresh.Plan.Resident[name] {
			t.Errorf("%s holds %d bytes of weights and KV cache, the plan %d", name, held, fresh.Plan.Resident[name])
		}
		if planned := fresh.Plan.Memory[name]; used > planned {
			t.Errorf("%s holds %d bytes after decode steps, more than the %d the plan counts", name, used, planned)
		}
		if c := fresh.Policy.MemoryCap(d.Info()); c > 0 && fresh.Plan.Memory[name] > c {
			t.Errorf("%s: the plan holds %d bytes, over its cap of %d", name, fresh.Plan.Memory[name], c)
		}
	}
	return s
}

// TestTwoSimulatedGPUs plans the built-in stories260K and a synthetic
// stories15m on each two-GPU profile under caps and pins that split them,
// and runs each plan against cpu-only (checkMultiGPU):
//   - GPUs only, each capped below the model: both GPUs, no CPU;
//   - layers pinned to cuda:0, cuda:1 and the CPU by name: obeyed;
//   - auto with both GPUs capped at 60% of the model: both GPUs, no CPU
//     (with NVLink as with PCIe: the CPU is far slower for these mat-muls);
//   - auto with both capped at 45%: the CPU takes the rest (here the
//     embedding: it and the output head, 32000 rows of 288 each, are most
//     of stories15m's bytes), and the output head stays on a GPU.
func TestTwoSimulatedGPUs(t *testing.T) {
	start := time.Now()
	small := builtinModel(t)
	big := synthStories(t)
	const ctx, gen = 64, 8
	ref := map[*llama.Model][]int32{}
	for _, m := range []*llama.Model{small, big} {
		s, err := NewSession(m, SessionOptions{Policy: "cpu-only", Threads: 1, Context: ctx})
		if err != nil {
			t.Fatal(err)
		}
		ref[m] = greedyTokens(t, s, gen)
		s.Close()
	}
	for _, hw := range []string{"2xh100-nvlink", "2xh100-pcie"} {
		dir := t.TempDir()
		needSmall, needBig := oneGPUNeed(t, small, hw, ctx), oneGPUNeed(t, big, hw, ctx)
		caps := func(need int64, share float64) string {
			c := int64(share * float64(need))
			return fmt.Sprintf("memory:\n  \"cuda:0\": %d\n  \"cuda:1\": %d\n", c, c)
		}
		for _, c := range []struct {
			name   string
			m      *llama.Model
			policy string
			check  func(t *testing.T, s *Session)
		}{
			{"stories260K GPUs only", small, "devices: [cuda]\n" + caps(needSmall, 0.6), func(t *testing.T, s *Session) {
				pl := s.Plan.Placement()
				if pl["sim:cuda:0"] == 0 || pl["sim:cuda:1"] == 0 || pl["sim:cpu"] > 0 {
					t.Errorf("placement %v, want both GPUs and no CPU", pl)
				}
			}},
			{"stories260K pinned by name", small, "rules:\n  - layers: \"0-1\"\n    device: \"cuda:0\"\n  - layers: \"2-3\"\n    device: \"cuda:1\"\n  - device: cpu\n",
				func(t *testing.T, s *Session) {
					want := func(layer int) string {
						switch {
						case layer >= 0 && layer <= 1:
							return "sim:cuda:0"
						case layer >= 2 && layer <= 3:
							return "sim:cuda:1"
						}
						return "sim:cpu"
					}
					for i, op := range s.Plan.Graph.Ops {
						if s.Plan.Device[i] != want(op.Layer) {
							t.Fatalf("%s (layer %d) is on %s, pinned to %s", op.Name, op.Layer, s.Plan.Device[i], want(op.Layer))
						}
					}
					// cpu -> cuda:0 -> cuda:1 -> cpu: the residual stream
					// crosses each boundary once.
					if n := len(s.Plan.Transfers); n != 3 {
						t.Errorf("%d boundaries, want 3: %+v", n, s.Plan.Transfers)
					}
				}},
			{"stories15m auto together", big, caps(needBig, 0.6), func(t *testing.T, s *Session) {
				pl := s.Plan.Placement()
				if pl["sim:cuda:0"] == 0 || pl["sim:cuda:1"] == 0 || pl["sim:cpu"] > 0 {
					t.Errorf("the GPUs together hold the model: placement %v, want both GPUs and no CPU", pl)
				}
			}},
			{"stories15m auto spill", big, caps(needBig, 0.45), func(t *testing.T, s *Session) {
				pl := s.Plan.Placement()
				if pl["sim:cuda:0"] == 0 || pl["sim:cuda:1"] == 0 || pl["sim:cpu"] == 0 {
					t.Errorf("placement %v, want both GPUs and the CPU", pl)
				}
				if head := s.Plan.Device[len(s.Plan.Graph.Ops)-1]; !strings.HasPrefix(head, "sim:cuda") {
					t.Errorf("the output head is on %s, not a GPU", head)
				}
			}},
		} {
			t.Run(hw+"/"+c.name, func(t *testing.T) {
				pol := writeFile(t, dir, strings.ReplaceAll(c.name, " ", "-")+".yaml", c.policy)
				s := checkMultiGPU(t, c.m, SessionOptions{Policy: pol, Hardware: hw, Threads: 1, Context: ctx}, ref[c.m])
				c.check(t, s)
				t.Logf("%v, %d boundaries, predicted %v a decode step", s.Plan.Placement(), len(s.Plan.Transfers), s.Plan.Predicted)
			})
		}
	}
	t.Logf("%v in all", time.Since(start).Round(time.Millisecond))
}

// sharedHost is a two-GPU profile like 2xh100-nvlink whose GPUs have only
// freeGiB GiB free of their 80 (other processes hold the rest).
func sharedHost(t *testing.T, freeGiB float64) string {
	t.Helper()
	text := fmt.Sprintf(`name: shared-2gpu
source: a test host, numbers as 2xh100-nvlink.yaml
devices:
  - {name: "cuda:0", kind: cuda, memory_gb: 80, free_gb: %[1]g, bandwidth_gbs: 3350, tflops: 67, launch_us: 2.5, efficiency: {mat_mul: 0.42}}
  - {name: "cuda:1", kind: cuda, memory_gb: 80, free_gb: %[1]g, bandwidth_gbs: 3350, tflops: 67, launch_us: 2.5, efficiency: {mat_mul: 0.42}}
  - {name: cpu, kind: cpu, memory_gb: 128, bandwidth_gbs: 96, tflops: 1.2, launch_us: 2}
links:
  - {from: cpu, to: "cuda:0", latency_us: 7.5, bandwidth_gbs: 54}
  - {from: cpu, to: "cuda:1", latency_us: 7.5, bandwidth_gbs: 54}
  - {from: "cuda:0", to: "cuda:1", latency_us: 8, bandwidth_gbs: 387}
`, freeGiB)
	return writeFile(t, t.TempDir(), "shared.yaml", text)
}

// TestMemoryAutoOnSimulatedGPUs: with `memory: {cuda: auto}`, each
// simulated GPU is capped at its free memory less planner.AutoMargin. With
// room for 40% of stories15m on each beyond the margin, it splits over both
// GPUs and the CPU within those caps and runs as cpu-only does. With room
// for 60% on each and the GPUs alone, a context whose KV cache cannot fit
// is refused with the devices, their caps and the largest context that
// fits; nine tenths of that context plans and runs on the GPUs.
func TestMemoryAutoOnSimulatedGPUs(t *testing.T) {
	m := synthStories(t)
	const ctx, gen = 64, 8
	cpuOnly, err := NewSession(m, SessionOptions{Policy: "cpu-only", Threads: 1, Context: ctx})
	if err != nil {
		t.Fatal(err)
	}
	want := greedyTokens(t, cpuOnly, gen)
	cpuOnly.Close()
	dir := t.TempDir()
	need := oneGPUNeed(t, m, "2xh100-nvlink", ctx)
	// Room for 40% of the model on each GPU beyond the margin, in the
	// profile's GB of 2^30 bytes.
	room := 0.4 * float64(need)
	free := (float64(planner.AutoMargin) + room) / (1 << 30)
	hw := sharedHost(t, free)
	pol := writeFile(t, dir, "auto.yaml", "memory:\n  cuda: auto\n")
	s := checkMultiGPU(t, m, SessionOptions{Policy: pol, Hardware: hw, Threads: 1, Context: ctx}, want)
	for _, gpu := range []string{"sim:cuda:0", "sim:cuda:1"} {
		for _, d := range s.Devices {
			if d.Name() != gpu {
				continue
			}
			in := d.Info()
			c := s.Policy.MemoryCap(in)
			if in.Free != int64(free*(1<<30)) || c != in.Free-planner.AutoMargin {
				t.Errorf("%s: free %d, cap %d; want the profile's free %d less the margin", gpu, in.Free, c, int64(free*(1<<30)))
			}
			if p := s.Plan.Memory[gpu]; p > c || p == 0 {
				t.Errorf("%s: the plan holds %d bytes under its auto cap of %d", gpu, p, c)
			}
		}
	}
	if pl := s.Plan.Placement(); pl["sim:cpu"] == 0 {
		t.Errorf("40%% of the model on each GPU, yet nothing on the CPU: %v", pl)
	}

	// The GPUs alone, with room for 60% of the model at 64 positions on
	// each, at a context whose KV cache does not fit them.
	hw = sharedHost(t, (float64(planner.AutoMargin)+0.6*float64(need))/(1<<30))
	gpusOnly := writeFile(t, dir, "gpus.yaml", "devices: [cuda]\nmemory:\n  cuda: auto\n")
	long := 4096
	_, err = NewSession(m, SessionOptions{Policy: gpusOnly, Hardware: hw, Threads: 1, Context: long, ContextOverride: true})
	if err == nil {
		t.Fatal("a KV cache of 4096 positions on GPUs with room for 120% of the model at 64: planned")
	}
	for _, w := range []string{"the model needs at least", "KV cache", "at a context of 4096 positions",
		"sim:cuda:0", "sim:cuda:1", "memory: auto at " + gpusOnly + ":3", "lower the context to at most"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	mm := regexp.MustCompile(`at most (\d+) positions`).FindStringSubmatch(err.Error())
	if mm == nil {
		t.Fatalf("error %q names no context", err)
	}
	n, _ := strconv.Atoi(mm[1])
	if n < ctx || n >= long {
		t.Fatalf("the error names a context of %d, want one between %d (which fits) and %d", n, ctx, long)
	}
	// Nine tenths of it plans and runs on the GPUs alone.
	ok := checkMultiGPU(t, m, SessionOptions{Policy: gpusOnly, Hardware: hw, Threads: 1, Context: n * 9 / 10, ContextOverride: true}, want)
	if pl := ok.Plan.Placement(); pl["sim:cpu"] > 0 {
		t.Errorf("devices: [cuda], yet %v", pl)
	}
}
