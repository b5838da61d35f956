package sim

import (
	"strings"
	"time"

	"hybrid/devices"
	"hybrid/ops"
)

// prefix begins the name of every simulated device ("sim:metal"); nothing
// outside this package knows it: the rest of hybrid asks Info.Simulated and
// the Simulator interface.
const prefix = "sim:"

func init() {
	devices.RegisterNameHint(func(ref string) string {
		if strings.HasPrefix(ref, prefix) {
			return "simulated devices come from a hardware profile"
		}
		return ""
	})
}

// CopyTime implements devices.Simulator: the profile's link between the two
// devices, where a device that is not one of the profile's (the host, a real
// CPU) stands for the profile's CPU.
func (d *Device) CopyTime(from, to devices.Info, bytes int64) (time.Duration, bool) {
	f, t := d.hw.nameOf(from), d.hw.nameOf(to)
	if f == t {
		return 0, true
	}
	if _, ok := d.hw.link(f, t); !ok {
		return 0, false
	}
	c, err := d.hw.CopyTime(f, t, bytes)
	return c, err == nil
}

// nameOf is the profile's name for device i: its own for one of the
// profile's simulated devices, the profile's CPU for anything else.
func (h *Hardware) nameOf(i devices.Info) string {
	if n, ok := strings.CutPrefix(i.Name, prefix); ok && i.Simulated {
		if _, ok := h.Spec(n); ok {
			return n
		}
	}
	for _, s := range h.Devices {
		if s.Kind == "cpu" {
			return s.Name
		}
	}
	return i.Name
}

// ConvertTime is the part of op's modelled time spent on fp16 conversion
// passes: zero unless the device is fp16 with per-op conversions.
func (d *Device) ConvertTime(op *ops.Op) time.Duration {
	if d.spec.FP16 && d.spec.Conversions == PerOp {
		return d.spec.ConvertTime(op)
	}
	return 0
}

// MemoryUsed implements devices.Device: what the CPU underneath holds, with
// the KV cache counted at the profile's element size (the CPU keeps f16).
func (d *Device) MemoryUsed() int64 {
	kv := d.Device.KVCacheBytes()
	return d.Device.MemoryUsed() - kv + kv/2*int64(d.spec.KVBytes)
}
