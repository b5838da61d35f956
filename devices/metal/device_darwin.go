//go:build darwin

// Package metal is the Apple GPU device: weights stay in their GGUF blocks
// in shared memory (the memory-mapped file itself where Metal can wrap its
// pages, else one copy), activations and the KV cache are f32 shared
// buffers, and every op is one or more MSL kernels (kernels/*.metal,
// compiled at Open with newLibraryWithSource) that the dispatch plan
// (dispatch.go) chooses. It drives Metal through the mtl package (purego,
// no cgo). On Apple silicon CPU and GPU share memory, so a copy between
// host and device is a memcpy on the buffer once the GPU is done with it.
//
// Status: compiled for darwin/arm64 with CGO_ENABLED=0, but unverified on a
// Mac until someone runs `hybrid verify --device metal` there.
package metal

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"hybrid/devices"
	"hybrid/devices/metal/mtl"
	"hybrid/ops"
	"hybrid/quant"
)

func init() {
	devices.Register(devices.Backend{Kind: "metal", Open: func(devices.Options) ([]devices.Device, error) {
		d, err := Open()
		if err != nil {
			return nil, err
		}
		return []devices.Device{d}, nil
	}})
}

// batchDispatches is how many kernels a command buffer collects before it
// is committed without waiting, so that the GPU starts on a long prefill
// while the rest is still being encoded.
const batchDispatches = 256

// Device is the system GPU with its kernels, weights, buffers and KV caches.
type Device struct {
	mu     sync.Mutex
	gpu    *mtl.Device
	queue  *mtl.Queue
	lib    *mtl.Library
	gpuN   string // the GPU's name
	memory int64
	maxTG  int  // threadgroup memory limit, bytes
	shared bool // CPU and GPU share memory (every Apple-silicon Mac)
	closed bool

	weights map[string]*weight
	kv      map[int]*kvCache // by layer
	tokens  *mtl.Buffer      // the step's token ids, int32
	toks    []int32          // what tokens holds
	bufs    []*mtl.Buffer    // every buffer, released at Close
	used    int64            // bytes of buffers Metal allocated
	mapped  int64            // bytes of weights used in place

	cmd       *mtl.CommandBuffer   // collecting, not yet committed
	enc       *mtl.Encoder         // cmd's encoder
	encoded   int                  // dispatches in cmd
	committed []*mtl.CommandBuffer // committed, not yet waited for
	err       error                // from committed work, for the next Sync
	gpuTime   time.Duration
}

// weight is a resident weight: its bytes at off in buf.
type weight struct {
	w   ops.Weight
	buf *mtl.Buffer
	off int
}

// kvCache is one layer's keys and values, CacheBytes(op) each.
type kvCache struct {
	k, v  *mtl.Buffer
	bytes int64
}

var _ devices.Device = (*Device)(nil)

// Open opens the system GPU and compiles the kernels. Without a Metal GPU
// the error wraps devices.ErrNotAvailable; a kernel that does not compile
// is an error with the compiler's message.
func Open() (*Device, error) {
	gpu, err := mtl.SystemDefault()
	if err != nil {
		return nil, fmt.Errorf("metal: %v: %w", err, devices.ErrNotAvailable)
	}
	d := &Device{gpu: gpu, gpuN: gpu.Name(), memory: int64(gpu.RecommendedMaxWorkingSetSize()),
		maxTG: int(gpu.MaxThreadgroupMemoryLength()), shared: gpu.HasUnifiedMemory(), weights: map[string]*weight{}, kv: map[int]*kvCache{}}
	if d.queue, err = gpu.NewQueue(); err != nil {
		d.Close()
		return nil, fmt.Errorf("metal: %s: %w", d.gpuN, err)
	}
	// Fast math off: the kernels are checked against the CPU's f32
	// arithmetic, which fast exp, sin and cos would miss by more than the
	// tolerances allow.
	if d.lib, err = gpu.NewLibrary(Source, mtl.CompileOptions{FastMath: false}); err != nil {
		d.Close()
		return nil, fmt.Errorf("metal: %s: compiling the kernels: %w", d.gpuN, err)
	}
	return d, nil
}

// Name implements devices.Device.
func (d *Device) Name() string { return "metal" }

// Info implements devices.Device.
func (d *Device) Info() devices.Info {
	mem := "unified memory"
	if !d.shared {
		mem = "discrete memory (buffers in shared storage)"
	}
	return devices.Info{Name: "metal", Kind: "metal", Memory: d.memory, Precision: "f32",
		Detail: fmt.Sprintf("%s, %s, %.1f GiB working set, MSL kernels compiled at run time (compiled, unverified on a Mac until `hybrid verify --device metal` passes there)",
			d.gpuN, mem, float64(d.memory)/(1<<30))}
}

// GPUTime is the GPU time of every command buffer completed so far.
func (d *Device) GPUTime() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gpuTime
}

// Supports implements devices.Device: the dispatch plan says.
func (d *Device) Supports(op *ops.Op) error {
	if err := Supports(op); err != nil {
		return fmt.Errorf("metal: %w", err)
	}
	return nil
}

// LoadWeight implements devices.Device. The bytes are used in place where
// Metal can wrap the pages that hold them (a memory-mapped file); otherwise
// they are copied once into a shared buffer.
func (d *Device) LoadWeight(w *ops.Weight, data []byte) error {
	rb, err := quant.RowBytes(w.Type, w.Cols)
	if err != nil {
		return fmt.Errorf("metal: weight %s: %w", w.Name, err)
	}
	if int64(len(data)) != int64(rb)*int64(w.Rows) {
		return fmt.Errorf("metal: weight %s: %d bytes, want %d for %d×%d %s", w.Name, len(data), rb*w.Rows, w.Rows, w.Cols, w.Type)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.live(); err != nil {
		return err
	}
	if _, ok := d.weights[w.Name]; ok {
		return nil
	}
	res := &weight{w: *w}
	if len(data) >= os.Getpagesize() {
		if b, off, err := d.gpu.NewBufferNoCopy(data); err == nil {
			res.buf, res.off = b, off
			d.mapped += int64(len(data))
		}
	}
	if res.buf == nil {
		b, err := d.gpu.NewBufferWithBytes(data)
		if err != nil {
			return fmt.Errorf("metal: weight %s: %w", w.Name, err)
		}
		res.buf = b
		d.used += int64(b.Length())
	}
	d.bufs = append(d.bufs, res.buf)
	d.weights[w.Name] = res
	return nil
}

func (d *Device) live() error {
	if d.closed {
		return errors.New("metal: the device is closed")
	}
	return nil
}

// Sync implements devices.Device: it commits the work encoded so far, waits
// for it, and returns (once) the error of any command buffer that failed.
func (d *Device) Sync() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.live(); err != nil {
		return err
	}
	return d.flush()
}

// submit ends the current command buffer's encoding and commits it
// without waiting (lock held).
func (d *Device) submit() error {
	if d.cmd == nil {
		return nil
	}
	var err error
	if d.enc != nil {
		err = d.enc.End()
		d.enc.Release()
		d.enc = nil
	}
	if err == nil {
		err = d.cmd.Commit()
	}
	if err != nil {
		d.cmd.Release()
	} else {
		d.committed = append(d.committed, d.cmd)
	}
	d.cmd, d.encoded = nil, 0
	return err
}

// flush commits what is encoded, waits for every committed command buffer
// and returns the errors gathered since the last flush (lock held).
func (d *Device) flush() error {
	errs := []error{d.err}
	d.err = nil
	if err := d.submit(); err != nil {
		errs = append(errs, err)
	}
	mtl.WithPool(func() error {
		for _, cb := range d.committed {
			if err := cb.Wait(); err != nil {
				errs = append(errs, err)
			}
			d.gpuTime += cb.GPUTime()
			cb.Release()
		}
		return nil
	})
	clear(d.committed)
	d.committed = d.committed[:0]
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("metal: %w", err)
	}
	return nil
}

// encoder returns the compute encoder of the current command buffer,
// starting one if needed (lock held).
func (d *Device) encoder() (*mtl.Encoder, error) {
	if d.enc != nil {
		return d.enc, nil
	}
	cb, err := d.queue.CommandBuffer()
	if err != nil {
		return nil, err
	}
	enc, err := cb.Encoder()
	if err != nil {
		cb.Release()
		return nil, err
	}
	d.cmd, d.enc = cb, enc
	return enc, nil
}

// setTokens puts the step's token ids in the tokens buffer (lock held).
// Work already queued may still read the ids there, so if they change it
// waits for that work first; its errors are kept for the next Sync.
func (d *Device) setTokens(toks []int32) error {
	if d.tokens != nil && len(toks) <= len(d.toks) && equalTokens(d.toks[:len(toks)], toks) {
		return nil
	}
	if d.cmd != nil || len(d.committed) > 0 {
		if err := d.flush(); err != nil {
			d.err = err
		}
	}
	if d.tokens == nil || 4*len(toks) > d.tokens.Length() {
		b, err := d.alloc(4 * max(len(toks), 512))
		if err != nil {
			return err
		}
		d.tokens = b
	}
	ids := unsafe.Slice((*int32)(d.tokens.Contents()), d.tokens.Length()/4)
	copy(ids, toks)
	d.toks = append(d.toks[:0], toks...)
	return nil
}

func equalTokens(a, b []int32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// cache returns op's KV cache, made on first use (lock held).
func (d *Device) cache(op *ops.Op) (*kvCache, error) {
	n := CacheBytes(op)
	if n <= 0 {
		return nil, fmt.Errorf("metal: op %s: no KV cache size", op)
	}
	c := d.kv[op.Layer]
	if c != nil && c.bytes == n {
		return c, nil
	}
	k, err := d.alloc(int(n))
	if err != nil {
		return nil, fmt.Errorf("metal: op %s: KV cache: %w", op, err)
	}
	v, err := d.alloc(int(n))
	if err != nil {
		return nil, fmt.Errorf("metal: op %s: KV cache: %w", op, err)
	}
	c = &kvCache{k: k, v: v, bytes: n}
	d.kv[op.Layer] = c
	return c, nil
}

// Run implements devices.Device: it encodes op's kernels into the current
// command buffer and returns without waiting; errors the GPU finds come
// back from the next Sync, Read or Write.
func (d *Device) Run(op *ops.Op, st ops.Step, in []devices.Buffer, out devices.Buffer) error {
	if st.Multi() {
		return fmt.Errorf("metal: op %s: steps of several sequences (server slots) are not supported on this device yet: %w", op, devices.ErrUnsupported)
	}
	ins := make([]*Buffer, len(in))
	for i, b := range in {
		mb, err := d.buf(b)
		if err != nil {
			return fmt.Errorf("metal: op %s: input %d: %w", op, i, err)
		}
		ins[i] = mb
	}
	ob, err := d.buf(out)
	if err != nil {
		return fmt.Errorf("metal: op %s: output: %w", op, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.live(); err != nil {
		return err
	}
	lens := make([]int, len(ins))
	for i, b := range ins {
		lens[i] = b.n
	}
	// PlanSized checks every buffer's length against op (and Embed's token
	// ids against the vocabulary): Metal does not bound-check, so a wrong
	// length would read or write past a buffer on the GPU.
	plan, err := PlanSized(op, st, lens, ob.n)
	if err != nil {
		return err
	}
	var w *weight
	if op.Weight != nil {
		if w = d.weights[op.Weight.Name]; w == nil {
			return fmt.Errorf("metal: op %s: weight %s was not loaded", op, op.Weight.Name)
		}
	}
	var kv *kvCache
	for _, k := range plan {
		for _, b := range k.Buffers {
			switch b.Role {
			case RoleTokens:
				if err := d.setTokens(st.Tokens); err != nil {
					return fmt.Errorf("metal: op %s: %w", op, err)
				}
			case RoleKCache, RoleVCache:
				if kv == nil {
					if kv, err = d.cache(op); err != nil {
						return err
					}
				}
			}
		}
	}
	enc, err := d.encoder()
	if err != nil {
		return fmt.Errorf("metal: op %s: %w", op, err)
	}
	for _, k := range plan {
		if err := d.encode(enc, k, w, ins, ob, kv); err != nil {
			return fmt.Errorf("metal: op %s: kernel %s: %w", op, k.Kernel, err)
		}
		d.encoded++
	}
	if d.encoded >= batchDispatches {
		return d.submit()
	}
	return nil
}

// encode adds one kernel dispatch (lock held).
func (d *Device) encode(enc *mtl.Encoder, k Dispatch, w *weight, in []*Buffer, out *Buffer, kv *kvCache) error {
	p, err := d.lib.Pipeline(k.Kernel)
	if err != nil {
		return err
	}
	if err := enc.SetPipeline(p); err != nil {
		return err
	}
	for i, b := range k.Buffers {
		var buf *mtl.Buffer
		off := int(b.Offset)
		switch b.Role {
		case RoleWeight:
			if w == nil {
				return errors.New("binds a weight, but the op has none")
			}
			buf, off = w.buf, off+w.off
		case RoleIn0, RoleIn1, RoleIn2:
			j := int(b.Role - RoleIn0)
			if j >= len(in) {
				return fmt.Errorf("binds input %d of %d", j, len(in))
			}
			buf, off = in[j].buf, off+in[j].off
		case RoleOut:
			buf, off = out.buf, off+out.off
		case RoleKCache, RoleVCache:
			if kv == nil {
				return errors.New("binds a KV cache, but the op has none")
			}
			buf = kv.k
			if b.Role == RoleVCache {
				buf = kv.v
			}
		case RoleTokens:
			buf = d.tokens
		default:
			return fmt.Errorf("buffer %d has unknown role %d", i, b.Role)
		}
		if err := enc.SetBuffer(buf, off, i); err != nil {
			return err
		}
	}
	if k.Params != nil {
		if err := enc.SetBytes(k.Params, len(k.Buffers)); err != nil {
			return err
		}
	}
	if k.Shared > 0 {
		if err := enc.SetThreadgroupMemory(k.Shared, 0, d.maxTG); err != nil {
			return err
		}
	}
	groups, err := mtl.Sz(k.Groups)
	if err != nil {
		return err
	}
	threads, err := mtl.Sz(k.Threads)
	if err != nil {
		return err
	}
	return enc.Dispatch(groups, threads)
}

// MemoryUsed implements devices.Device: buffers, KV caches and weights,
// counting weights used in place at their size.
func (d *Device) MemoryUsed() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.used + d.mapped
}

// Close implements devices.Device: it waits for queued work and releases
// every Metal object.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	err := d.flush()
	for _, b := range d.bufs {
		b.Release()
	}
	d.bufs, d.weights, d.kv, d.tokens = nil, nil, nil, nil
	d.used, d.mapped = 0, 0
	d.lib.Release()
	d.queue.Release()
	d.gpu.Release()
	d.closed = true
	return err
}
