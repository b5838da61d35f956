//go:build darwin

// Package coreml is the Apple Neural Engine device, through small generated
// CoreML models (which compute in fp16). Today it is only a stub: the device
// is not implemented yet, so on macOS the backend registers to say so and
// hybrid runs on the CPU. Plans for this Mac can be made and compared with the
// simulated devices of configs/hardware/m4-pro.yaml (--hardware m4-pro),
// which compute on the CPU and charge an M4 Pro's times (sim:coreml).
package coreml

import (
	"fmt"

	"hybrid/devices"
)

func init() {
	devices.Register(devices.Backend{Kind: "coreml", Open: func(devices.Options) ([]devices.Device, error) {
		return nil, fmt.Errorf("CoreML device not implemented yet (plan for it with --hardware m4-pro): %w", devices.ErrNotAvailable)
	}})
}
