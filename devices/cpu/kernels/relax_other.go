//go:build !amd64 || purego

package kernels

// relax is relax_amd64.go's; elsewhere a spin-wait polls without a hint.
func relax() {}
