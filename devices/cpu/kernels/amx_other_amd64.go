//go:build !linux && !purego

package kernels

// requestAMX reports false: only Linux's way of granting a process the tile
// state is implemented.
func requestAMX() bool { return false }
