//go:build !darwin

// Package coreml is the Apple Neural Engine device, through small generated
// CoreML models (which compute in fp16). Today it is only a stub: the device
// is not implemented on any system yet, and CoreML exists only on macOS. The
// backend registers so that `hybrid devices` and Discover say why there is no
// CoreML device. Plans for a Mac can be made and compared with the simulated
// devices of configs/hardware/m4-pro.yaml (--hardware m4-pro), which compute
// on the CPU and charge an M4 Pro's times (sim:coreml).
package coreml

import (
	"fmt"

	"hybrid/devices"
)

func init() {
	devices.Register(devices.Backend{Kind: "coreml", Open: func(devices.Options) ([]devices.Device, error) {
		return nil, fmt.Errorf("not darwin: CoreML needs macOS on Apple silicon (plan for it with --hardware m4-pro): %w", devices.ErrNotAvailable)
	}})
}
