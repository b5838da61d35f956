package coreml

import (
	"strings"
	"testing"
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
