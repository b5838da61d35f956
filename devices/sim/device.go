package sim

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"hybrid/devices"
	"hybrid/devices/cpu"
	"hybrid/ops"
)

// Device is a simulated device: a CPU device underneath, computing exactly
// what the CPU computes, and a Spec that says what each op would cost on the
// hardware it stands for. It holds no more than the profile's memory. A
// device whose Spec is FP16 rounds at every op's boundary (fp16.go); the
// others compute exactly what the CPU computes.
type Device struct {
	*cpu.Device
	spec *Spec
	hw   *Hardware

	mu      sync.Mutex  // guards scratch and the weights below
	scratch [][]float32 // an fp16 device's rounded inputs, one per input

	resident map[string]bool // weights LoadWeight made resident
	streamed []string        // the weights StreamWeight holds, oldest first (at most two)
}

var (
	_ devices.Device         = (*Device)(nil)
	_ devices.Simulator      = (*Device)(nil)
	_ devices.WeightStreamer = (*Device)(nil)
)

// New returns the simulated device for spec, named prefix+spec.Name,
// computing on threads host threads (all cores when threads <= 0).
func New(spec *Spec, hw *Hardware, threads int) *Device {
	return &Device{Device: cpu.New(prefix+spec.Name, threads), spec: spec, hw: hw}
}

// Open returns a simulated device for every device of the profile, in the
// profile's order.
func Open(hw *Hardware, threads int) []devices.Device {
	var out []devices.Device
	for _, s := range hw.Devices {
		out = append(out, New(s, hw, threads))
	}
	return out
}

// Spec is the device's hardware model.
func (d *Device) Spec() *Spec { return d.spec }

// Hardware is the profile the device comes from.
func (d *Device) Hardware() *Hardware { return d.hw }

// Info implements devices.Device.
func (d *Device) Info() devices.Info {
	s := d.spec
	fp16, prec := "", ""
	if s.FP16 {
		fp16, prec = ", fp16", "f16"
		if s.Conversions == PerOp {
			fp16 += " with per-op conversions"
		}
	}
	return devices.Info{
		Name:      d.Name(),
		Kind:      s.Kind,
		Simulated: true,
		// It computes on the host CPU, but stands for hardware whose device
		// runs steps of several sequences only where the real one does.
		Sequences: s.Kind == "cpu",
		Memory:    s.memoryBytes(),
		Free:      s.freeBytes(),
		Precision: prec,
		KVBytes:   s.KVBytes,
		Detail: fmt.Sprintf("simulated %s %s (%s): %g GB/s, %g TFLOPS, %g µs per op%s; computes on the host CPU, %d threads",
			d.hw.Name, s.Name, shortSource(d.hw.Source), s.BandwidthGBs, s.TFLOPS, s.LaunchUS, fp16, d.Threads()),
	}
}

// memoryBytes is memory_gb in bytes, counting a GB as 2^30 as memory sizes
// are sold.
func (s *Spec) memoryBytes() int64 { return int64(s.MemoryGB * (1 << 30)) }

// freeBytes is free_gb in bytes, or 0 (unknown: all of memoryBytes) where
// the profile gives none.
func (s *Spec) freeBytes() int64 { return int64(s.FreeGB * (1 << 30)) }

// limitBytes is what the device may hold: its free memory where the
// profile says how much is free, else all of it.
func (s *Spec) limitBytes() int64 {
	if f := s.freeBytes(); f > 0 {
		return f
	}
	return s.memoryBytes()
}

// shortSource is the source's first clause, for one-line details.
func shortSource(src string) string {
	if i := strings.IndexAny(src, ";("); i > 0 {
		src = src[:i]
	}
	src = strings.TrimSpace(src)
	if r := []rune(src); len(r) > 60 {
		src = string(r[:59]) + "…"
	}
	return src
}

// Supports implements devices.Device: what the CPU supports, less the kinds
// the profile says the hardware cannot run.
func (d *Device) Supports(op *ops.Op) error {
	if d.spec.Unsupported[op.Kind] {
		return fmt.Errorf("%s: op %s: the %s profile's %s does not run %s ops: %w", d.Name(), op, d.hw.Name, d.spec.Name, op.Kind, devices.ErrUnsupported)
	}
	if err := d.Device.Supports(op); err != nil {
		return fmt.Errorf("%s computes on the CPU: %w", d.Name(), err)
	}
	// A plan made for the real devices must not place there what their
	// kernels lack; only a simulated CPU runs everything.
	if lack := kernelLacks(d.spec.Kind, op); lack != "" {
		return fmt.Errorf("%s: op %s: the %s device's kernels have no %s: %w", d.Name(), op, d.spec.Kind, lack, devices.ErrUnsupported)
	}
	return nil
}

// metalRopePairs is the most frequency factors the Metal rope kernel takes
// (ROPE_MAX_PAIRS in devices/metal/kernels/common.h: they travel in its
// params).
const metalRopePairs = 128

// kernelLacks names what op needs that the real device of the given kind
// does not run, or "" if nothing. The CUDA kernels run every op variant;
// CoreML's limits are the profile's unsupported kinds.
func kernelLacks(kind string, op *ops.Op) string {
	if kind == "metal" && op.Kind == ops.RoPE && len(op.Rope.Freqs) > metalRopePairs {
		return fmt.Sprintf("rope with more than %d frequency factors", metalRopePairs)
	}
	return ""
}

// Run implements devices.Device, refusing what Supports refuses: the real
// hardware could not run it. An fp16 device rounds the op's inputs and
// output to binary16.
func (d *Device) Run(op *ops.Op, st ops.Step, in []devices.Buffer, out devices.Buffer) error {
	if err := d.Supports(op); err != nil {
		return err
	}
	if d.spec.FP16 {
		return d.runF16(op, st, in, out)
	}
	return d.Device.Run(op, st, in, out)
}

// LoadWeight implements devices.Device within the profile's memory. An fp16
// device holds the weight as binary16, 2 bytes per element, whatever its
// type in the file.
func (d *Device) LoadWeight(w *ops.Weight, data []byte) error {
	if err := d.hold(w, data); err != nil {
		return err
	}
	d.mu.Lock()
	if d.resident == nil {
		d.resident = map[string]bool{}
	}
	d.resident[w.Name] = true
	d.mu.Unlock()
	return d.checkMemory("weight " + w.Name)
}

// StreamWeight implements devices.WeightStreamer: the weight is held as
// LoadWeight holds one until two more have been streamed, within the
// profile's memory. The copy's time is the executor's to charge, from the
// profile's link (Simulator.CopyTime).
func (d *Device) StreamWeight(w *ops.Weight, data []byte) error {
	d.mu.Lock()
	if d.resident[w.Name] || slices.Contains(d.streamed, w.Name) {
		d.mu.Unlock()
		return nil
	}
	if len(d.streamed) == 2 {
		d.Device.DropWeight(d.streamed[0])
		d.streamed = d.streamed[1:]
	}
	d.streamed = append(d.streamed, w.Name)
	d.mu.Unlock()
	if err := d.hold(w, data); err != nil {
		return err
	}
	return d.checkMemory("streamed weight " + w.Name)
}

// hold loads w on the CPU device it computes on, as binary16 on an fp16
// device.
func (d *Device) hold(w *ops.Weight, data []byte) error {
	if d.spec.FP16 {
		var err error
		if w, data, err = weightF16(w, data); err != nil {
			return fmt.Errorf("%s: %w", d.Name(), err)
		}
	}
	return d.Device.LoadWeight(w, data)
}

// Alloc implements devices.Device within the profile's memory.
func (d *Device) Alloc(n int) (devices.Buffer, error) {
	b, err := d.Device.Alloc(n)
	if err != nil {
		return nil, err
	}
	return b, d.checkMemory(fmt.Sprintf("a buffer of %d floats", n))
}

func (d *Device) checkMemory(what string) error {
	if used, limit := d.MemoryUsed(), d.spec.limitBytes(); used > limit {
		if d.spec.FreeGB > 0 {
			return fmt.Errorf("%s: out of memory after %s: %d bytes in use, the %s profile gives %s %g GB free of %g GB", d.Name(), what, used, d.hw.Name, d.spec.Name, d.spec.FreeGB, d.spec.MemoryGB)
		}
		return fmt.Errorf("%s: out of memory after %s: %d bytes in use, the %s profile gives %s %g GB", d.Name(), what, used, d.hw.Name, d.spec.Name, d.spec.MemoryGB)
	}
	return nil
}

// OpTime implements devices.Simulator: the profile's time for op, the same at
// every step of one graph.
func (d *Device) OpTime(op *ops.Op, st ops.Step) time.Duration { return d.spec.OpTime(op) }
