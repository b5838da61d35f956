//go:build !darwin

// Package metal is the Apple GPU device, through Metal compute kernels.
// Today it is only a stub: the device is not implemented on any system yet,
// and Metal exists only on macOS. The backend registers so that `hybrid
// devices` and Discover say why there is no Metal device. Plans for a Mac can
// be made and compared with the simulated devices of
// configs/hardware/m4-pro.yaml (--hardware m4-pro), which compute on the CPU
// and charge an M4 Pro's times (sim:metal).
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
