//go:build !linux

package main

import "errors"

type cpuSample struct {
	busy, server, self float64
}

// sampleCPU needs Linux's /proc: elsewhere the CPU use of other processes
// is not measured.
func sampleCPU(pid int) (cpuSample, error) {
	return cpuSample{}, errors.New("CPU use is measured on Linux only (/proc)")
}
