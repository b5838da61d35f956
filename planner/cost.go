package planner

import (
	"time"

	"hybrid/devices"
	"hybrid/devices/sim"
	"hybrid/ops"
)

// Costs predicts op and copy times. For each device it uses, in order: a
// measurement from `hybrid profile` for the op's kind and shape; the device's
// hardware profile (simulated devices); a roofline estimate from the op's
// FLOPs and bytes with the default rates for its kind, which the plan says is
// an estimate.
type Costs struct {
	Profile  *Profile      // measured; may be nil
	Hardware *sim.Hardware // the profile simulated devices come from; may be nil
}

// Default roofline rates by device kind, used only where nothing better is
// known. The CPU's are this project's 2-core CI machine measured with
// `go test -bench MatVecCold ./devices/cpu/kernels` (about 20 GB/s of
// quantized weights through the kernels) and a conservative 50 GFLOP/s; its
// fixed cost per op grows with the worker threads that must meet
// (cpuLaunchPerThread).
// The GPU kinds' are conservative: what hybrid's own CUDA kernels reached on an
// H100 (0.8–1.4 TB/s of quantized weights) halved for smaller GPUs. CUDA's
// fixed cost per op is what decode steps cost on the H100 once replayed as
// CUDA graphs with fused kernels: 198 µs per token for the 78 ops of
// stories260K, 2.5 µs an op (bench/RESULTS.md).
var defaultRates = map[string]struct {
	bytesPerSec, flopsPerSec float64
	launch                   time.Duration
}{
	"cpu":    {20e9, 50e9, 1900 * time.Nanosecond},
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

func (c *Costs) spec(d devices.Info) *sim.Spec {
	if !d.Simulated || c.Hardware == nil {
		return nil
	}
	if s, ok := c.Hardware.Spec(simName(d.Name)); ok {
		return s
	}
	return nil
}

func simName(name string) string {
	if len(name) > 4 && name[:4] == "sim:" {
		return name[4:]
	}
	return name
}

// OpTime predicts op's time on d and says where the number comes from.
func (c *Costs) OpTime(d devices.Info, op *ops.Op, tokens int) (time.Duration, string) {
	if c.Profile != nil {
		if t, ok := c.Profile.OpTime(d, op, tokens); ok {
			return t, "measured"
		}
	}
	if s := c.spec(d); s != nil {
		return s.OpTime(op), "simulated"
	}
	r, ok := defaultRates[d.Kind]
	if !ok {
		r = defaultRates["cpu"]
	}
	bytes := float64(op.Cost.BytesRead + op.Cost.BytesWritten)
	sec := max(bytes/r.bytesPerSec, float64(op.Cost.FLOPs)/r.flopsPerSec)
	launch := r.launch
	if d.Kind == "cpu" {
		launch += time.Duration(d.Threads) * cpuLaunchPerThread
	}
	return launch + time.Duration(sec*1e9), "roofline"
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
	if c.Hardware != nil && (from.Simulated || to.Simulated) {
		f, t := c.hwName(from), c.hwName(to)
		if d, err := c.Hardware.CopyTime(f, t, bytes); err == nil {
			return d
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

// hwName maps a device to its name in the hardware profile: a simulated
// device by its own name, the host (and real CPUs) by the profile's CPU.
func (c *Costs) hwName(d devices.Info) string {
	if d.Simulated {
		return simName(d.Name)
	}
	for _, s := range c.Hardware.Devices {
		if s.Kind == "cpu" {
			return s.Name
		}
	}
	return d.Name
}

// hostInfo is the pseudo-device of host memory for the per-op ablation.
func hostInfo() devices.Info {
	return devices.Info{Name: Host, Kind: "cpu"}
}

func describe(d devices.Info) string {
	if d.Simulated {
		return d.Name + " (simulated)"
	}
	return d.Name
}
