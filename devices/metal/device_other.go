//go:build !darwin

// Package metal is the Apple GPU device, through Metal compute kernels
// (device_darwin.go: MSL kernels compiled at run time, driven through purego
// without cgo; compiled for darwin/arm64 but unverified on a Mac until
// someone runs `hybrid verify --device metal` there). Metal exists only on
// macOS: on other systems the backend registers so that `hybrid devices` and
// Discover say why there is no Metal device. Plans for a Mac can be made and
// compared with the simulated devices of configs/hardware/m4-pro.yaml
// (--hardware m4-pro), which compute on the CPU and charge an M4 Pro's times
// (a device named for the profile, Kind metal).
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
