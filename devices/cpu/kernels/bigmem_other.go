//go:build !unix

package kernels

// allocBig is bigmem_unix.go's, on the heap where there is no mmap.
func allocBig(n int) ([]byte, func()) { return make([]byte, n), func() {} }
