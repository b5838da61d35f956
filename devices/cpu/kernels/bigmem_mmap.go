//go:build unix

package kernels

import "syscall"

// allocBig returns n zeroed bytes outside the Go heap (an anonymous
// mapping), and the function that gives them back. Repacked weights are
// most of a process's memory and live as long as the model: on the heap
// they would let the garbage collector's target grow by their size, so
// short-lived garbage could take as much memory again before a collection.
func allocBig(n int) ([]byte, func()) {
	if n == 0 {
		return nil, func() {}
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|mapPopulate)
	if err != nil {
		b := make([]byte, n) // the heap still works, at the cost above
		return b, func() {}
	}
	return b, func() { _ = syscall.Munmap(b) }
}
