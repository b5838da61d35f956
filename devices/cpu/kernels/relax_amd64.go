//go:build amd64 && !purego

package kernels

// relax is one PAUSE instruction (relax_amd64.s), the body of a spin-wait.
//
//go:noescape
func relax()
