//go:build !darwin

// Package coreml is the Apple CoreML device. It exists only on macOS; on other
// systems the backend registers only to say so.
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
