//go:build !darwin

// Package metal is the Apple Metal device. It exists only on macOS; on other
// systems the backend registers only to say so.
package metal

import (
	"fmt"

	"hybrid/devices"
)

func init() {
	devices.Register(devices.Backend{Kind: "metal", Open: func(devices.Options) ([]devices.Device, error) {
		return nil, fmt.Errorf("not darwin: Metal needs macOS on Apple silicon (plan for it with --hardware m4-pro): %w", devices.ErrNotAvailable)
	}})
}
