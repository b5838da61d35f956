//go:build darwin

// Package coreml is the Apple CoreML device. It is not implemented yet: on macOS the
// backend registers to say so, and hybrid runs on the CPU.
package coreml

import (
	"fmt"

	"hybrid/devices"
)

func init() {
	devices.Register(devices.Backend{Kind: "coreml", Open: func(devices.Options) ([]devices.Device, error) {
		return nil, fmt.Errorf("the CoreML device is not implemented yet: %w", devices.ErrNotAvailable)
	}})
}
