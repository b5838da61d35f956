//go:build darwin

// Package metal is the Apple GPU device, through Metal compute kernels.
// Today it is only a stub: the device is not implemented yet, so on macOS the
// backend registers to say so and hybrid runs on the CPU. Plans for this Mac
// can be made and compared with the simulated devices of
// configs/hardware/m4-pro.yaml (--hardware m4-pro), which compute on the CPU
// and charge an M4 Pro's times (sim:metal).
package metal

import (
	"fmt"

	"hybrid/devices"
)

func init() {
	devices.Register(devices.Backend{Kind: "metal", Open: func(devices.Options) ([]devices.Device, error) {
		return nil, fmt.Errorf("Metal device not implemented yet (plan for it with --hardware m4-pro): %w", devices.ErrNotAvailable)
	}})
}
