package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"hybrid/devices"
)

// probe is a backend that opens no device and records the options it was
// opened with.
var probe struct {
	sync.Mutex
	opts []devices.Options
}

func init() {
	devices.Register(devices.Backend{Kind: "test-probe", Open: func(o devices.Options) ([]devices.Device, error) {
		probe.Lock()
		probe.opts = append(probe.opts, o)
		probe.Unlock()
		return nil, fmt.Errorf("a test backend: %w", devices.ErrNotAvailable)
	}})
}

// TestPolicyCoreMLUnitsReachBackends checks that a policy's coreml_units
// is what the backends are opened with (the CoreML device sets its models'
// compute units from it), and that without one they get none.
func TestPolicyCoreMLUnitsReachBackends(t *testing.T) {
	m := builtinModel(t)
	pol := filepath.Join(t.TempDir(), "units.yaml")
	if err := os.WriteFile(pol, []byte("devices: [cpu]\ncoreml_units: cpu_gpu\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ policy, want string }{{pol, "cpu_gpu"}, {"cpu-only", ""}} {
		probe.Lock()
		probe.opts = nil
		probe.Unlock()
		s, err := NewSession(m, SessionOptions{Policy: c.policy, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		probe.Lock()
		got := probe.opts
		probe.Unlock()
		if len(got) != 1 || got[0].CoreMLUnits != c.want {
			t.Fatalf("policy %s: backends opened with %+v, want coreml units %q", c.policy, got, c.want)
		}
	}
}
