//go:build !darwin

package coreml

import (
	"fmt"

	"hybrid/devices"
)

// On other systems the backend registers so that `hybrid devices` and
// Discover say why there is no CoreML device. Plans for a Mac can be made and
// compared with the simulated devices of configs/hardware/m4-pro.yaml
// (--hardware m4-pro), which compute on the CPU and charge an M4 Pro's times
// (a device named for the profile, Kind coreml).
func init() {
	devices.Register(devices.Backend{Kind: "coreml", Open: func(devices.Options) ([]devices.Device, error) {
		return nil, fmt.Errorf("not darwin: CoreML needs macOS on Apple silicon (plan for it with --hardware m4-pro): %w", devices.ErrNotAvailable)
	}})
}
