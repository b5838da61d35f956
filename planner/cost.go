package planner

import (
	"maps"
	"time"

	"hybrid/devices"
	"hybrid/ops"
)

// Costs predicts op and copy times. For each device it uses, in order: a
// measurement from `hybrid profile` for the op's kind and shape; the model
// of a simulated device (devices.Simulator: the hardware it stands for); a
// roofline estimate from the op's FLOPs and bytes with the default rates for
// its kind, which the plan says is an estimate.
type Costs struct {
	Profile *Profile // measured; may be nil
	// sims are the simulated candidates' models by device name (For).
	sims map[string]devices.Simulator
}

// For returns costs that also know the models of the simulated devices
// among cands; Make and Apply call it, and a caller that prices copies
// itself (the executor's per-op ablation) uses its result.
func (c *Costs) For(cands []Candidate) *Costs {
	out := &Costs{}
	if c != nil {
		out.Profile = c.Profile
		out.sims = maps.Clone(c.sims)
	}
	for _, cd := range cands {
		if cd.Sim != nil {
			if out.sims == nil {
				out.sims = map[string]devices.Simulator{}
			}
			out.sims[cd.Info.Name] = cd.Sim
		}
	}
	return out
}

// Default roofline rates by device kind, used only where nothing better is
// known. The CPU's are this project's 2-core CI machine's, for two threads
// (cpuScale scales them): 20 GB/s of quantized weights through the kernels
// (`go test -bench MatVecCold ./devices/cpu/kernels`), and 300 GFLOP/s,
// about what its prompt kernels reach on a Q8_0 TinyLlama (pp512 at 157
// tok/s, 2.2 GFLOP a token; Q4_0's 272 tok/s is 600 GFLOP/s; the H100
// host's Xeon did 2.0–2.9 TFLOP/s at 8 and 16 threads). Its fixed cost per op
// grows with the worker threads that must meet (cpuLaunchPerThread).
// The GPU kinds' are conservative: what hybrid's own CUDA kernels reached on an
// H100 (0.8–1.4 TB/s of quantized weights) halved for smaller GPUs. CUDA's
// fixed cost per op is what decode steps cost on the H100 once replayed as
// CUDA graphs with fused kernels: 198 µs per token for the 78 ops of
// stories260K, 2.5 µs an op (bench/RESULTS.md).
var defaultRates = map[string]struct {
	bytesPerSec, flopsPerSec float64
	launch                   time.Duration
}{
	"cpu":    {20e9, 300e9, 1900 * time.Nanosecond},
	"cuda":   {500e9, 20e12, 2500 * time.Nanosecond},
	"metal":  {150e9, 4e12, 10 * time.Microsecond},
	"coreml": {50e9, 8e12, 150 * time.Microsecond},
}

// hostCopy is the default cost of copying f32 between two host devices
// (memcpy out and in, about 10 GB/s with the fixed cost of a call).
const (
	hostCopyLatency = 2 * time.Microsecond
	hostCopyRate    = 10e9
)

// OpTime predicts op's time on d and says where the number comes from.
func (c *Costs) OpTime(d devices.Info, op *ops.Op, tokens int) (time.Duration, string) {
	if c.Profile != nil {
		if t, ok := c.Profile.OpTime(d, op, tokens); ok {
			return t, "measured"
		}
	}
	if s := c.sims[d.Name]; s != nil && d.Simulated {
		return s.OpTime(op, ops.Step{}), "simulated"
	}
	r, ok := defaultRates[d.Kind]
	if !ok {
		r = defaultRates["cpu"]
	}
	bytes := float64(op.Cost.BytesRead + op.Cost.BytesWritten)
	bps, fps := r.bytesPerSec, r.flopsPerSec
	launch := r.launch
	if d.Kind == "cpu" {
		launch += time.Duration(d.Threads) * cpuLaunchPerThread
		b, f := cpuScale(d.Threads)
		bps, fps = bps*b, fps*f
	}
	sec := max(bytes/bps, float64(op.Cost.FLOPs)/fps)
	return launch + time.Duration(sec*1e9), "roofline"
}

// cpuScale is how many times the CI machine's rates (two threads) a CPU
// device of threads workers reaches by default: arithmetic grows with the
// threads, memory bandwidth up to 8 of them (4×). The H100 host's Xeon read
// 93–108 GB/s at 16 threads, and hybrid's decode of a Llama-7B there, split
// with the GPU, read its CPU half's weights at 65–80 GB/s; with the CI
// machine's 20 GB/s for every thread count, the capped 7B's decode was
// predicted at 149 ms a token against 27–39 ms measured.
func cpuScale(threads int) (bytes, flops float64) {
	t := float64(max(threads, 2)) / 2
	return min(t, 4), t
}

// cpuLaunchPerThread is what each worker thread adds to a CPU op's fixed
// cost: decode of the shared stories260K (78 ops of almost no work) took
// 2.4 µs an op with 1 thread and 3.1 with 2 on the 2-core CI machine, and
// 10.6 with 16 on the H100 machine's host (bench/RESULTS.md): 1.9 µs plus
// 0.54 µs a thread fits all three within 0.1 µs.
const cpuLaunchPerThread = 540 * time.Nanosecond

// CopyTime predicts the time of copying bytes of f32 from one device to
// another ("host" stands for the host memory in the per-op ablation).
func (c *Costs) CopyTime(from, to devices.Info, bytes int64) time.Duration {
	if from.Name == to.Name {
		return 0
	}
	if c.Profile != nil {
		if t, ok := c.Profile.CopyTime(from, to, bytes); ok {
			return t
		}
	}
	for _, d := range []devices.Info{from, to} {
		if s := c.sims[d.Name]; s != nil && d.Simulated {
			if t, ok := s.CopyTime(from, to, bytes); ok {
				return t
			}
		}
	}
	if (from.Kind != "cpu" || to.Kind != "cpu") && !from.Simulated && !to.Simulated {
		// A real accelerator: a staged copy over its bus plus a round trip
		// to its thread.
		return deviceCopyLatency + time.Duration(float64(bytes)/deviceCopyRate*1e9)
	}
	return hostCopyLatency + time.Duration(float64(bytes)/hostCopyRate*1e9)
}

// deviceCopy is the default cost of copying f32 between the host and an
// accelerator (an H100 measured 7.5 µs + 54 GB/s pinned; the device thread's
// hand-off adds about 17 µs).
const (
	deviceCopyLatency = 25 * time.Microsecond
	deviceCopyRate    = 20e9
)

func describe(d devices.Info) string {
	if d.Simulated {
		return d.Name + " (simulated)"
	}
	return d.Name
}
