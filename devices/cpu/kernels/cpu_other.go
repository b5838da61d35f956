//go:build !amd64 || purego

package kernels

// HasAVX512 reports whether this CPU has AVX-512 F and DQ; never, off amd64
// or under purego.
func HasAVX512() bool { return false }

// Features names the kernel set in use.
func Features() string { return "portable Go kernels" }
