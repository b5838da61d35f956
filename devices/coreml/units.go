package coreml

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// ComputeUnits is CoreML's MLComputeUnits: the hardware a model may run on.
// CoreML places each part of a model on the allowed unit it prefers and falls
// back to the CPU for what the others cannot run.
type ComputeUnits int

// The values of MLComputeUnits (MLModelConfiguration.h).
const (
	CPUOnly            ComputeUnits = 0 // MLComputeUnitsCPUOnly
	CPUAndGPU          ComputeUnits = 1 // MLComputeUnitsCPUAndGPU
	All                ComputeUnits = 2 // MLComputeUnitsAll: CPU, GPU and Neural Engine
	CPUAndNeuralEngine ComputeUnits = 3 // MLComputeUnitsCPUAndNeuralEngine (macOS 13)
)

// UnitsEnv names the environment variable that picks the compute units:
// "cpu_ne" (the default), "all", "cpu_gpu" or "cpu".
const UnitsEnv = "HYBRID_COREML_UNITS"

var unitNames = map[ComputeUnits]string{CPUOnly: "cpu", CPUAndGPU: "cpu_gpu", All: "all", CPUAndNeuralEngine: "cpu_ne"}

func (u ComputeUnits) String() string {
	if s, ok := unitNames[u]; ok {
		return s
	}
	return fmt.Sprintf("units(%d)", int(u))
}

// ParseComputeUnits returns the compute units named s (as String spells
// them); "" is the default, CPUAndNeuralEngine.
func ParseComputeUnits(s string) (ComputeUnits, error) {
	if s == "" {
		return CPUAndNeuralEngine, nil
	}
	for u, n := range unitNames {
		if strings.EqualFold(s, n) {
			return u, nil
		}
	}
	return 0, fmt.Errorf("coreml: compute units %q: %w", s, errUnitNames)
}

// errUnitNames says which compute units there are.
var errUnitNames = errors.New("want cpu_ne, all, cpu_gpu or cpu")

// unitsFromEnv reads UnitsEnv.
func unitsFromEnv() (ComputeUnits, error) {
	u, err := ParseComputeUnits(os.Getenv(UnitsEnv))
	if err != nil {
		return 0, fmt.Errorf("%w (from $%s)", err, UnitsEnv)
	}
	return u, nil
}
