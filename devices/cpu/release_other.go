//go:build !linux

package cpu

// release is release_linux.go's, elsewhere (darwin has no syscall.Madvise): a no-op.
func release(b []byte) {}
