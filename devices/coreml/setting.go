package coreml

import "hybrid/devices"

// A policy's coreml_units picks the compute units of the CoreML device's
// models (devices.Options.CoreMLUnits). It is registered on every system,
// so that a policy for a Mac is checked wherever it is read, planned for
// with simulated devices included.
func init() {
	devices.RegisterSetting(devices.Setting{
		Key: "coreml_units",
		Doc: "the compute units CoreML's models may run on: cpu_ne (CPU and Neural Engine, the default), all, cpu_gpu or cpu",
		Check: func(v string) error {
			if _, err := ParseComputeUnits(v); err != nil {
				return errUnitNames
			}
			return nil
		},
	})
}
