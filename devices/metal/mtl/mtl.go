// Package mtl is the small part of Apple's Metal API that a compute device
// needs, called from Go without cgo through purego and its objc package:
// the system GPU and its properties, shared-storage buffers (including ones
// that wrap memory-mapped weights without a copy), libraries compiled from
// MSL source at run time with the compiler's message in the error, compute
// pipelines cached by function name, and command queues, buffers and compute
// encoders with GPU timing.
//
// The Objective-C calls are in the _darwin files. This file holds the parts
// that need no Objective-C runtime (types, constants, arithmetic), so that
// they build and are tested everywhere.
//
// Status: compiled for darwin/arm64 (CGO_ENABLED=0) but unverified on a Mac
// until someone runs `hybrid verify --device metal` there.
package mtl

import (
	"errors"
	"fmt"
	"time"
)

// Size is MTLSize: three NSUInteger. At 24 bytes it is passed to
// objc_msgSend by reference on arm64 (AAPCS64 copies composites over 16
// bytes to memory and passes a pointer), which purego does for struct
// arguments of that size.
type Size struct {
	Width, Height, Depth uint64
}

// Count is the number of elements the size spans.
func (s Size) Count() uint64 { return s.Width * s.Height * s.Depth }

// Sz makes a Size from three ints, as the dispatch plan holds them.
func Sz(dims [3]int) (Size, error) {
	for i, d := range dims {
		if d < 1 {
			return Size{}, fmt.Errorf("mtl: size %v: dimension %d is %d, want >= 1", dims, i, d)
		}
	}
	return Size{uint64(dims[0]), uint64(dims[1]), uint64(dims[2])}, nil
}

// ResourceOptions is MTLResourceOptions.
type ResourceOptions uint64

// Resource options this package uses. Shared storage is the one mode every
// Apple-silicon buffer can use: CPU and GPU see the same memory, so a copy
// between them is a memcpy on the buffer's contents once the GPU is done.
const (
	StorageModeShared     ResourceOptions = 0 << 4
	CPUCacheModeDefault   ResourceOptions = 0
	HazardTrackingDefault ResourceOptions = 0 << 8
)

// CommandBufferStatus is MTLCommandBufferStatus.
type CommandBufferStatus uint64

// The stages of a command buffer's life.
const (
	StatusNotEnqueued CommandBufferStatus = 0
	StatusEnqueued    CommandBufferStatus = 1
	StatusCommitted   CommandBufferStatus = 2
	StatusScheduled   CommandBufferStatus = 3
	StatusCompleted   CommandBufferStatus = 4
	StatusError       CommandBufferStatus = 5
)

var statusNames = [...]string{"not enqueued", "enqueued", "committed", "scheduled", "completed", "error"}

// String names the status as Metal's documentation does.
func (s CommandBufferStatus) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("status(%d)", uint64(s))
}

// ErrNoDevice is returned when the system has no Metal GPU (or Metal cannot
// be loaded).
var ErrNoDevice = errors.New("mtl: no Metal device")

// ErrReleased is returned by methods of an object that was released, or
// that was never created (a nil id).
var ErrReleased = errors.New("mtl: nil or released object")

// PageSpan returns the page-aligned range that covers n bytes at addr: its
// start, its length (a whole number of pages) and addr's offset in it.
// newBufferWithBytesNoCopy takes only page-aligned memory, so a weight that
// starts inside a page of the mapped file is wrapped from its page's start
// and bound at that offset. page must be a power of two.
func PageSpan(addr, n, page uintptr) (start, length, offset uintptr) {
	start = addr &^ (page - 1)
	end := (addr + n + page - 1) &^ (page - 1)
	return start, end - start, addr - start
}

// GPUDuration is the time between two of a command buffer's GPU timestamps
// (GPUStartTime, GPUEndTime: seconds on the host's mach clock); zero when
// either is missing or they are out of order.
func GPUDuration(start, end float64) time.Duration {
	if start <= 0 || end <= start {
		return 0
	}
	return time.Duration((end - start) * float64(time.Second))
}
