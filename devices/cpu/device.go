// Package cpu is the CPU device: every op of the Llama graph in Go on all cores,
// with mat-vec and mat-mat kernels that read quantized weight blocks directly
// from the memory-mapped file. It is the oracle every other device is checked
// against.
package cpu

import (
	"fmt"
	"runtime"
	"sync"

	"hybrid/devices"
	"hybrid/devices/cpu/kernels"
	"hybrid/ops"
	"hybrid/quant"
)

// Device runs ops on the host CPU with its own worker pool and buffers.
type Device struct {
	name    string
	pool    *kernels.Pool
	mu      sync.Mutex
	weights map[string]*weight
	kv      map[int]*kvCache // by layer
	// partials is split-KV decode attention's per (head, chunk) results
	// (attendSplit), reused across steps.
	partials []float32
	// ropeCS is the rope factors of the last decode step (run.go).
	ropeCS  ropeCache
	mem     int64 // bytes of buffers, dequantized vectors and KV cache
	kvBytes int64 // of which KV cache
	mapped  int64 // bytes of weights used in place from the file
	// fuse: decode mat-vecs of one input are held and run together
	// (fuse.go); set for the backend's devices, not for devices built on
	// this one (simulated ones, which act on each op as it runs).
	fuse bool
	held held
	// kvs is the cache of a layer whose attention runs here for one step
	// while its own cache lives on another device (kvstream.go).
	kvs streamedKV
}

// weight is a resident weight: quantized bytes used in place, plus an f32 copy
// for one-row tensors (norm vectors), which are tiny and read every token.
type weight struct {
	w   ops.Weight
	raw []byte
	f32 []float32
	// packed, once a mat-mul has used the weight, is its repacked form
	// where this CPU has kernels for one (kernels.Packable); then it is what
	// the mat-muls read, and raw only serves an embedding lookup.
	packed *kernels.Packed
	tried  bool // packing was attempted
}

// kvCache holds one layer's keys and values as binary16, ctx positions ×
// kvDim, as llama.cpp's default f16 cache does: half the memory of f32, and
// the same rounding.
type kvCache struct {
	k, v []uint16
	dim  int
}

// Buffer is a CPU activation buffer. A view shares its base's memory; only
// a base (from Alloc) can be freed.
type Buffer struct {
	F     []float32
	owner *Device // the device that allocated it: set on a base (from Alloc, not View) until it is freed
}

// Len implements devices.Buffer.
func (b *Buffer) Len() int { return len(b.F) }

// New returns a CPU device named name that runs ops on threads workers
// (all cores when threads <= 0).
func New(name string, threads int) *Device {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	return &Device{
		name:    name,
		pool:    kernels.NewPool(threads),
		weights: map[string]*weight{},
		kv:      map[int]*kvCache{},
	}
}

var _ devices.Device = (*Device)(nil)

// Name implements devices.Device.
func (d *Device) Name() string { return d.name }

// Info implements devices.Device.
func (d *Device) Info() devices.Info {
	return devices.Info{Name: d.name, Kind: "cpu", Threads: d.pool.Threads(), Sequences: true, Detail: fmt.Sprintf("host CPU, %d worker threads, %s", d.pool.Threads(), cpuFeatures())}
}

// Threads is the size of the device's worker pool.
func (d *Device) Threads() int { return d.pool.Threads() }

// Supports implements devices.Device: the CPU runs every op kind on every
// supported weight type.
func (d *Device) Supports(op *ops.Op) error {
	if !op.Kind.Known() {
		return fmt.Errorf("cpu: op %s: %w kind", op, devices.ErrUnsupported)
	}
	if op.Weight != nil && !op.Weight.Type.Supported() {
		return fmt.Errorf("cpu: op %s: weight type %s %w", op, op.Weight.Type, devices.ErrUnsupported)
	}
	return nil
}

// LoadWeight implements devices.Device. Matrices stay in the caller's (mapped)
// memory in their quantized form; one-row tensors are dequantized once.
func (d *Device) LoadWeight(w *ops.Weight, data []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.weights[w.Name]; ok {
		return nil
	}
	rb, err := quant.RowBytes(w.Type, w.Cols)
	if err != nil {
		return fmt.Errorf("cpu: weight %s: %w", w.Name, err)
	}
	if int64(len(data)) != int64(rb)*int64(w.Rows) {
		return fmt.Errorf("cpu: weight %s: %d bytes, want %d for %d×%d %s", w.Name, len(data), rb*w.Rows, w.Rows, w.Cols, w.Type)
	}
	res := &weight{w: *w, raw: data}
	if w.Rows == 1 {
		res.f32 = make([]float32, w.Cols)
		if err := quant.Dequantize(w.Type, data, res.f32); err != nil {
			return fmt.Errorf("cpu: weight %s: %w", w.Name, err)
		}
		d.mem += int64(4 * w.Cols)
	} else {
		d.mapped += int64(len(data))
	}
	d.weights[w.Name] = res
	return nil
}

// DropWeight releases a weight LoadWeight made resident, for a device built
// on this one that holds some weights only for a while (a simulated GPU's
// streamed weights, devices.WeightStreamer). A name not loaded is ignored.
func (d *Device) DropWeight(name string) {
	d.flushLater()
	d.mu.Lock()
	defer d.mu.Unlock()
	w, ok := d.weights[name]
	if !ok {
		return
	}
	delete(d.weights, name)
	switch {
	case w.packed != nil:
		d.mem -= int64(w.packed.Bytes())
		w.packed.Free()
	case w.f32 != nil:
		d.mem -= int64(4 * len(w.f32))
	default:
		d.mapped -= int64(len(w.raw))
	}
}

// Alloc implements devices.Device.
func (d *Device) Alloc(n int) (devices.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("cpu: negative buffer size %d", n)
	}
	d.mu.Lock()
	d.mem += 4 * int64(n)
	d.mu.Unlock()
	return &Buffer{F: make([]float32, n), owner: d}, nil
}

// Free implements devices.Allocator.
func (d *Device) Free(b devices.Buffer) error {
	if err := d.flush(); err != nil {
		return err
	}
	cb, err := d.buf(b)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if cb.owner != d {
		return fmt.Errorf("cpu: %s: free of a view, of a buffer freed before or of another device's buffer", d.name)
	}
	cb.owner = nil
	d.mem -= 4 * int64(cap(cb.F))
	cb.F = nil
	return nil
}

// View implements devices.Device.
func (d *Device) View(b devices.Buffer, n int) (devices.Buffer, error) {
	cb, err := d.buf(b)
	if err != nil {
		return nil, err
	}
	f, err := devices.HostView(d.name, cb.F, n)
	if err != nil {
		return nil, err
	}
	return &Buffer{F: f}, nil
}

// Write implements devices.Device.
func (d *Device) Write(dst devices.Buffer, src []float32) error {
	if err := d.flush(); err != nil {
		return err
	}
	b, err := d.buf(dst)
	if err != nil {
		return err
	}
	return devices.HostWrite(d.name, b.F, src)
}

// Read implements devices.Device.
func (d *Device) Read(dst []float32, src devices.Buffer) error {
	if err := d.flush(); err != nil {
		return err
	}
	b, err := d.buf(src)
	if err != nil {
		return err
	}
	return devices.HostRead(d.name, dst, b.F)
}

// Sync implements devices.Device: it runs the mat-vecs Run holds back.
func (d *Device) Sync() error { return d.flush() }

// MemoryUsed implements devices.Device: buffers, KV cache and weights, counting
// mapped weights at their file size.
func (d *Device) MemoryUsed() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mem + d.mapped
}

// Close implements devices.Device.
func (d *Device) Close() error {
	err := d.flush()
	d.pool.Close()
	d.mu.Lock()
	for _, w := range d.weights {
		if w.packed != nil {
			w.packed.Free()
		}
	}
	d.weights, d.kv, d.kvs = map[string]*weight{}, map[int]*kvCache{}, streamedKV{}
	d.mem, d.mapped, d.kvBytes = 0, 0, 0
	d.mu.Unlock()
	return err
}

// KVCacheBytes is the part of MemoryUsed that is KV cache (f16 keys and
// values).
func (d *Device) KVCacheBytes() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.kvBytes
}

func (d *Device) buf(b devices.Buffer) (*Buffer, error) {
	cb, ok := b.(*Buffer)
	if !ok {
		return nil, fmt.Errorf("cpu: %s got a buffer of another device (%T)", d.name, b)
	}
	return cb, nil
}

func (d *Device) cache(layer int, a ops.AttnParams) *kvCache {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.kv[layer]
	dim := a.KVHeads * a.HeadDim
	if c == nil || len(c.k) < a.Context*dim || c.dim != dim {
		if old := d.kv[layer]; old != nil {
			d.mem -= 4 * int64(len(old.k))
			d.kvBytes -= 4 * int64(len(old.k))
		}
		c = &kvCache{k: make([]uint16, a.Context*dim), v: make([]uint16, a.Context*dim), dim: dim}
		d.mem += 4 * int64(a.Context*dim)
		d.kvBytes += 4 * int64(a.Context*dim)
		d.kv[layer] = c
	}
	return c
}

func cpuFeatures() string { return kernels.Features() }

// maxCPUs is the most separate CPU devices Open makes: the planner plans for
// at most 16 devices.
const maxCPUs = 16

func init() {
	devices.Register(devices.Backend{Kind: "cpu", Open: func(o devices.Options) ([]devices.Device, error) {
		// Checked before any pool is made: each device starts its threads.
		if o.CPUs < 0 || o.CPUs > maxCPUs {
			return nil, fmt.Errorf("cpu: %d CPU devices asked for: want 0..%d", o.CPUs, maxCPUs)
		}
		if o.Threads < 0 || o.Threads > kernels.MaxThreads {
			return nil, fmt.Errorf("cpu: %d threads asked for: want 0 (every core) or 1..%d", o.Threads, kernels.MaxThreads)
		}
		n := max(o.CPUs, 1)
		threads := o.Threads
		if n > 1 && threads <= 0 {
			// Separate devices share the cores.
			threads = max(1, runtime.NumCPU()/n)
		}
		var devs []devices.Device
		for i := range n {
			name := "cpu"
			if i > 0 {
				name = fmt.Sprintf("cpu:%d", i)
			}
			d := New(name, threads)
			d.fuse = true
			devs = append(devs, d)
		}
		return devs, nil
	}})
}
