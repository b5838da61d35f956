package metal

import (
	goruntime "runtime"
	"strings"
	"testing"

	"hybrid/devices"
	"hybrid/devices/cpu"
	"hybrid/verify"
)

// TestBackend checks the backend is registered and honest: off macOS it
// opens no device and says why; on a Mac it opens the GPU (whose Detail
// says the device is unverified until `hybrid verify` passes there) or
// says why not.
func TestBackend(t *testing.T) {
	devs, missing := devices.Discover(devices.Options{Threads: 1})
	var metal []devices.Device
	for _, d := range devs {
		if d.Info().Kind == "metal" {
			metal = append(metal, d)
			continue
		}
		d.Close()
	}
	for _, d := range metal {
		defer d.Close()
		in := d.Info()
		t.Logf("%s: %s (memory %d bytes)", in.Name, in.Detail, in.Memory)
		if goruntime.GOOS != "darwin" {
			t.Fatalf("%s is a metal device on %s", in.Name, goruntime.GOOS)
		}
		if in.Name != "metal" || in.Memory <= 0 || !strings.Contains(in.Detail, "unverified") {
			t.Fatalf("info %+v", in)
		}
	}
	if len(metal) > 0 {
		return
	}
	for _, m := range missing {
		if m.Kind == "metal" {
			if m.Why == "" {
				t.Fatal("no reason given")
			}
			if goruntime.GOOS != "darwin" && !strings.Contains(m.Why, "not darwin") {
				t.Fatalf("reason %q does not say Metal needs macOS", m.Why)
			}
			t.Logf("metal: %s", m.Why)
			return
		}
	}
	t.Fatalf("no metal backend among the devices or the missing: %+v", missing)
}

// TestOpsMatchCPU runs the op checks of `hybrid verify` on the GPU: every
// op kind and weight type against the CPU device (on a Mac with Metal;
// skipped elsewhere).
func TestOpsMatchCPU(t *testing.T) {
	devs, missing := devices.Discover(devices.Options{Threads: 1})
	var dev devices.Device
	for _, d := range devs {
		if dev == nil && d.Info().Kind == "metal" {
			dev = d
			continue
		}
		d.Close()
	}
	if dev == nil {
		for _, m := range missing {
			if m.Kind == "metal" {
				t.Skipf("skipping: %s", m.Why)
			}
		}
		t.Fatal("no metal device and no reason")
	}
	defer dev.Close()
	ref := cpu.New("cpu", 0)
	defer ref.Close()
	for _, r := range verify.Ops(dev, ref, 1) {
		switch r.Status {
		case verify.Fail:
			t.Errorf("%s: %s %.3g > %g: %s", r.Name, r.Metric, r.Err, r.Tol, r.Note)
		case verify.Skip:
			t.Logf("%s: %s", r.Name, r.Note)
		}
	}
	if err := dev.Sync(); err != nil {
		t.Fatal(err)
	}
}
