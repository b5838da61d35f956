//go:build !cuda

// Package cuda is the NVIDIA GPU device. Today it is only this stub: the CUDA
// device itself (kernels compiled to PTX, driven through one locked OS thread
// per context) is not written yet, and a build without the cuda tag has none.
// The backend registers so that `hybrid devices` and Discover say why there
// is no CUDA device; plans for an H100 can still be made and compared with
// the simulated devices of configs/hardware/h100-*.yaml (--hardware h100-sxm).
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
