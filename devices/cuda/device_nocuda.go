//go:build !cuda

// Package cuda is the NVIDIA GPU device. This file is what a build without
// the cuda tag gets: a backend that registers only to say so, so that
// `hybrid devices` and Discover explain why there is no CUDA device. The
// device itself (device_cuda.go and kernels/, PTX for compute_80 driven
// through the CUDA driver API on one locked OS thread) needs `-tags cuda`,
// cgo and the NVIDIA driver. Plans for an H100 can be made without one, with the
// simulated devices of configs/hardware/h100-*.yaml (--hardware h100-sxm);
// measure/roofline.cu is the program that measured those profiles' numbers.
package cuda

import (
	"fmt"

	"hybrid/devices"
)

func init() {
	devices.Register(devices.Backend{Kind: "cuda", Open: func(devices.Options) ([]devices.Device, error) {
		return nil, fmt.Errorf("not built with -tags cuda (see README: CUDA): %w", devices.ErrNotAvailable)
	}})
}
