//go:build !cuda

// Package cuda is the NVIDIA GPU device. This build has none: it was made
// without the cuda build tag, so the backend registers only to say so.
package cuda

import (
	"fmt"

	"hybrid/devices"
)

func init() {
	devices.Register(devices.Backend{Kind: "cuda", Open: func(devices.Options) ([]devices.Device, error) {
		return nil, fmt.Errorf("not built with -tags cuda (the CUDA device is not implemented yet): %w", devices.ErrNotAvailable)
	}})
}
