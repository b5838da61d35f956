//go:build linux

package cpu

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// release drops b's pages from this process's memory when b lies in a
// shared file mapping (a model file) whose contents now live elsewhere (a
// repacked weight): the pages stay in the page cache, and a later read of b
// (the embedding row of a weight that is also the output matrix, or another
// device loading the same tensor) faults them back in. Anywhere else
// (weights in ordinary memory, as tests and `hybrid verify` make them)
// dropping pages would zero them, so nothing is done. Only whole pages inside
// b are dropped; errors leave the pages resident, which costs memory, not
// correctness.
func release(b []byte) {
	ps := os.Getpagesize()
	if len(b) < 2*ps || !sharedFileMapping(b) {
		return
	}
	start := (ps - int(uintptr(unsafe.Pointer(&b[0]))%uintptr(ps))) % ps
	end := start + (len(b)-start)/ps*ps
	if end > start {
		_ = syscall.Madvise(b[start:end], syscall.MADV_DONTNEED)
	}
}

// sharedFileMapping reports whether b lies within one shared mapping of a
// file, by /proc/self/maps.
func sharedFileMapping(b []byte) bool {
	lo := uint64(uintptr(unsafe.Pointer(&b[0])))
	hi := lo + uint64(len(b))
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode [path]
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		a, z, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(a, 16, 64)
		end, err2 := strconv.ParseUint(z, 16, 64)
		if err1 != nil || err2 != nil || lo < start || lo >= end {
			continue
		}
		return hi <= end && len(fields[1]) == 4 && fields[1][3] == 's' && fields[4] != "0"
	}
	return false
}
