package sim

import (
	"fmt"
	"time"

	"hybrid/devices"
	"hybrid/devices/cpu"
	"hybrid/ops"
)

// Device is a simulated device: a CPU device underneath, computing exactly,
// and a Spec that says what each op would cost on the real hardware.
type Device struct {
	*cpu.Device
	spec *Spec
	hw   *Hardware
}

var (
	_ devices.Device    = (*Device)(nil)
	_ devices.Simulator = (*Device)(nil)
)

// New returns the simulated device for spec, named "sim:"+spec.Name,
// computing on threads host threads.
func New(spec *Spec, hw *Hardware, threads int) *Device {
	return &Device{Device: cpu.New("sim:"+spec.Name, threads), spec: spec, hw: hw}
}

// Open returns a simulated device for every device of the profile.
func Open(hw *Hardware, threads int) []devices.Device {
	var out []devices.Device
	for _, s := range hw.Devices {
		out = append(out, New(s, hw, threads))
	}
	return out
}

// Spec is the device's hardware model.
func (d *Device) Spec() *Spec { return d.spec }

// Info implements devices.Device.
func (d *Device) Info() devices.Info {
	return devices.Info{
		Name:      d.Name(),
		Kind:      d.spec.Kind,
		Simulated: true,
		Memory:    int64(d.spec.MemoryGB * (1 << 30)),
		Detail: fmt.Sprintf("SIMULATED %s %s: %.0f GB/s, %.1f TFLOPS, %.0f µs launch (from %s); computes on the host CPU",
			d.hw.Name, d.spec.Name, d.spec.BandwidthGBs, d.spec.TFLOPS, d.spec.LaunchUS, d.hw.Path),
	}
}

// Supports implements devices.Device: what the CPU supports, less what the
// profile says the hardware cannot run.
func (d *Device) Supports(op *ops.Op) error {
	if d.spec.Unsupported[op.Kind] {
		return fmt.Errorf("sim: %s (%s) does not run %s ops: %w", d.Name(), d.hw.Name, op.Kind, devices.ErrUnsupported)
	}
	return d.Device.Supports(op)
}

// OpTime implements devices.Simulator.
func (d *Device) OpTime(op *ops.Op, st ops.Step) time.Duration { return d.spec.OpTime(op) }
