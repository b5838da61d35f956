package coreml

import (
	"slices"
	"strings"
	"testing"

	"hybrid/devices"
)

func TestComputeUnits(t *testing.T) {
	for s, want := range map[string]ComputeUnits{"": CPUAndNeuralEngine, "cpu_ne": CPUAndNeuralEngine, "ALL": All, "cpu_gpu": CPUAndGPU, "cpu": CPUOnly} {
		if u, err := ParseComputeUnits(s); err != nil || u != want {
			t.Errorf("%q: %v, %v; want %v", s, u, err, want)
		}
	}
	// The values CoreML's MLComputeUnits enum has.
	if CPUOnly != 0 || CPUAndGPU != 1 || All != 2 || CPUAndNeuralEngine != 3 {
		t.Error("compute unit values differ from MLComputeUnits")
	}
	t.Setenv(UnitsEnv, "ane")
	if _, err := unitsFromEnv(); err == nil || !strings.Contains(err.Error(), UnitsEnv) {
		t.Errorf("a bad $%s: %v", UnitsEnv, err)
	}
}

// TestUnitsSetting: a policy's coreml_units is checked here, with the
// names ParseComputeUnits takes.
func TestUnitsSetting(t *testing.T) {
	for v, ok := range map[string]bool{"": true, "cpu_ne": true, "all": true, "cpu_gpu": true, "cpu": true, "ane": false, "neural_engine_only": false} {
		err := devices.CheckSetting("coreml_units", v)
		if (err == nil) != ok {
			t.Errorf("%q: %v", v, err)
		}
		if err != nil && err.Error() != "want cpu_ne, all, cpu_gpu or cpu" {
			t.Errorf("%q: %v does not say what is wanted", v, err)
		}
	}
	if !slices.ContainsFunc(devices.Settings(), func(s devices.Setting) bool { return s.Key == "coreml_units" && s.Doc != "" }) {
		t.Error("coreml_units is not among the registered settings")
	}
}
