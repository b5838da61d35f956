//go:build linux

package cpu

import (
	"os"
	"syscall"
	"unsafe"
)

// release drops b's pages from this process's memory when b lies in a file
// mapping whose contents now live elsewhere (a repacked weight): the pages
// stay in the page cache, and a later read of b (the embedding row of a
// weight that is also the output matrix) faults them back in. Only whole
// pages inside b are dropped; errors leave the pages resident, which costs
// memory, not correctness.
func release(b []byte) {
	ps := os.Getpagesize()
	if len(b) < 2*ps {
		return
	}
	start := (ps - int(uintptr(unsafe.Pointer(&b[0]))%uintptr(ps))) % ps
	end := start + (len(b)-start)/ps*ps
	if end > start {
		_ = syscall.Madvise(b[start:end], syscall.MADV_DONTNEED)
	}
}
