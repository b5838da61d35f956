// Package devices defines the interface every kind of hardware implements: hold
// weights in their quantized form, keep f32 activation buffers, run an op, and
// copy f32 to and from the host. A device knows nothing about plans.
package devices

import (
	"errors"
	"time"

	"hybrid/ops"
)

// Info describes a device.
type Info struct {
	Name string // unique: "cpu", "cpu:1", "cuda:0", "sim:metal"
	// Kind is the kind of hardware it is or stands for: "cpu", "cuda",
	// "metal" or "coreml". Policies name devices by kind or by name.
	Kind string
	// Simulated is true for devices whose times are charged from a hardware
	// profile rather than measured; everything they report says so.
	Simulated bool
	// Memory is the bytes it can hold (weights, KV cache, buffers); 0 means
	// no fixed budget (host memory).
	Memory int64
	// Detail is one human line: the hardware, its threads, its profile.
	Detail string
	// Precision is the arithmetic the device computes in: "" or "f32" for
	// f32 (with f32 accumulation), "f16" for devices such as the Neural
	// Engine that round activations and weights to fp16. The planner and
	// tables show it; the executor keeps values in f32 either way.
	Precision string
	// Threads is the worker threads of a host CPU device; 0 for others.
	Threads int
}

// Simulator is implemented by simulated devices: the time an op or a copy
// costs comes from a model, and the executor records that instead of the
// wall time of computing it on the host.
type Simulator interface {
	// OpTime is the modelled time of op at step st.
	OpTime(op *ops.Op, st ops.Step) time.Duration
}

// Buffer is an f32 activation buffer that lives on one device.
type Buffer interface {
	// Len is the buffer's size in f32 elements.
	Len() int
}

// Device is one piece of hardware that runs ops.
type Device interface {
	// Name identifies the device, e.g. "cpu" or "cuda:0".
	Name() string
	// Info describes the device for the registry, the planner and tables.
	Info() Info
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
	// Write copies host data into dst; Read copies src to the host. Both
	// take effect in order with the ops Run before them: Write after they
	// have read dst, Read after they have written src (a device that queues
	// ops finishes them first), so no Sync is needed around either.
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
