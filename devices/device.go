// Package devices defines the interface every kind of hardware implements: hold
// weights in their quantized form, keep f32 activation buffers, run an op, and
// copy f32 to and from the host. A device knows nothing about plans.
package devices

import (
	"errors"

	"hybrid/ops"
)

// Buffer is an f32 activation buffer that lives on one device.
type Buffer interface {
	// Len is the buffer's size in f32 elements.
	Len() int
}

// Device is one piece of hardware that runs ops.
type Device interface {
	// Name identifies the device, e.g. "cpu" or "cuda:0".
	Name() string
	// Supports returns nil if the device can run op, or an error saying why not.
	Supports(op *ops.Op) error
	// LoadWeight makes a weight resident in its stored (quantized) form. data is
	// the tensor's bytes as the file holds them; a device may keep the slice.
	LoadWeight(w *ops.Weight, data []byte) error
	// Alloc returns an f32 buffer of n elements.
	Alloc(n int) (Buffer, error)
	// View returns a buffer of the first n elements of b that shares b's
	// memory, so that buffers can be reused by values of different sizes and
	// every op sees its values at their exact length.
	View(b Buffer, n int) (Buffer, error)
	// Run executes op for step st, reading in (one buffer per op input) and
	// writing out.
	Run(op *ops.Op, st ops.Step, in []Buffer, out Buffer) error
	// Write copies host data into dst; Read copies src to the host.
	Write(dst Buffer, src []float32) error
	Read(dst []float32, src Buffer) error
	// Sync waits for all work the device has been given.
	Sync() error
	// MemoryUsed is the bytes held: weights, buffers and KV cache.
	MemoryUsed() int64
	// Close releases everything the device holds.
	Close() error
}

// ErrUnsupported is wrapped by Supports' errors.
var ErrUnsupported = errors.New("unsupported")
