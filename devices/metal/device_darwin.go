//go:build darwin

// Package metal is the Apple Metal device. It is not implemented yet: on macOS the
// backend registers to say so, and hybrid runs on the CPU.
package metal

import (
	"fmt"

	"hybrid/devices"
)

func init() {
	devices.Register(devices.Backend{Kind: "metal", Open: func(devices.Options) ([]devices.Device, error) {
		return nil, fmt.Errorf("the Metal device is not implemented yet: %w", devices.ErrNotAvailable)
	}})
}
