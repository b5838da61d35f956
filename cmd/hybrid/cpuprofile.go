package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"hybrid/internal/atomicfile"
)

// startCPUProfile starts a Go CPU profile written to path; the returned
// function stops it and commits the file (written atomically, like every
// file the CLI writes).
func startCPUProfile(path string) (func(), error) {
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Abort()
		return nil, fmt.Errorf("--cpuprofile %s: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Commit(); err != nil {
			fmt.Fprintf(os.Stderr, "hybrid: --cpuprofile: %v\n", err)
		}
	}, nil
}
