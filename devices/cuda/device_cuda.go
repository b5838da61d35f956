//go:build cuda

// Package cuda is the NVIDIA GPU device, built with the cuda tag: weights stay
// on the GPU in their GGUF blocks, activations are f32 device buffers and the
// KV cache binary16 (as the CPU device's), and every op is a kernel of kernels/*.cu (compiled to PTX
// and embedded) decoding weights in registers. It drives the GPU through the
// CUDA driver API (cgo against libcuda, driver_cuda.go), every call of a
// context on one locked OS thread: the device owns a goroutine that runs its
// calls, and the methods hand it closures.
package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unsafe"

	"hybrid/devices"
	"hybrid/ops"
	"hybrid/quant"
)

func init() {
	devices.Register(devices.Backend{Kind: "cuda", Open: func(devices.Options) ([]devices.Device, error) { return Open() }})
}

// Open returns one device per GPU, or an error wrapping
// devices.ErrNotAvailable that says why there is none: no GPU, or a driver
// that cannot start (cuInit's error). The binary links libcuda, so without
// the NVIDIA driver installed at all it does not start.
func Open() ([]devices.Device, error) {
	n, err := deviceCount()
	if err != nil {
		return nil, fmt.Errorf("cuda: no usable GPU (%v): %w", err, devices.ErrNotAvailable)
	}
	if n == 0 {
		return nil, fmt.Errorf("cuda: no GPU: %w", devices.ErrNotAvailable)
	}
	var devs []devices.Device
	for i := range n {
		d, err := New(i)
		if err != nil {
			for _, o := range devs {
				o.Close()
			}
			return nil, err
		}
		devs = append(devs, d)
	}
	connectPeers(devs)
	return devs, nil
}

// connectPeers enables peer access between every pair of GPUs that allow it
// (NVLink, or PCIe peer to peer), so that CopyTo goes straight from one to
// the other; a pair that does not is left to the driver, which stages such
// copies through host memory.
func connectPeers(devs []devices.Device) {
	for _, a := range devs {
		for _, b := range devs {
			da, db := a.(*Device), b.(*Device)
			if da == db {
				continue
			}
			err := da.do(func() error {
				can, err := canAccessPeer(da.cudev, db.cudev)
				if err != nil || !can {
					return err
				}
				if err := enablePeer(db.ctx); err != nil {
					return err
				}
				da.peers = append(da.peers, db.name)
				return nil
			})
			if err != nil {
				fmt.Fprintf(os.Stderr, "cuda: %s -> %s: no peer access (%v); copies between them go through host memory\n", da.name, db.name, err)
			}
		}
	}
}

// CopyTo implements devices.PeerCopier: a copy from this GPU into another
// GPU's buffer, peer to peer where connectPeers enabled it (the driver
// stages it through host memory otherwise). Ops queued on to are launched
// first, so that the copy does not overwrite a buffer they read, and so
// that to computes them while this GPU computes what was queued here (a
// pipelined prompt's micro-batches).
func (d *Device) CopyTo(to devices.Device, dst, src devices.Buffer, n int) (bool, error) {
	t, ok := to.(*Device)
	if !ok || t == d {
		return false, nil
	}
	sb, err := d.buf(src)
	if err != nil {
		return true, err
	}
	db, err := t.buf(dst)
	if err != nil {
		return true, err
	}
	if n > sb.n || n > db.n {
		return true, fmt.Errorf("cuda: copy of %d elements from a buffer of %d to one of %d", n, sb.n, db.n)
	}
	if n == 0 {
		return true, nil
	}
	// With nothing queued on to (a decode step: its ops there were
	// launched by the last step's read), its thread is not woken: the copy
	// is ordered with the work launched there (memcpyPeer).
	if t.queued() {
		if err := t.do(func() error { return nil }); err != nil {
			return true, err
		}
	}
	return true, d.do(func() error {
		if err := memcpyPeer(db.ptr, t.ctx, sb.ptr, d.ctx, 4*int64(n)); err != nil {
			return fmt.Errorf("cuda: copy of %d elements %s -> %s: %w", n, d.name, t.name, err)
		}
		return nil
	})
}

// Device is one GPU with its own context, kernels, weights and buffers.
type Device struct {
	name, gpu string
	total     int64
	free      int64 // bytes free right after the context was made
	cudev     gpuHandle
	peers     []string // GPUs this one copies to peer to peer (set by Open)

	mu     sync.Mutex // serialises sends to work and guards closed and queue
	work   chan item
	done   chan error
	closed bool
	queue  []pending // ops Run has accepted, launched by the next call that waits

	wmu     sync.Mutex // guards weights, wgen and freqs, which Run reads on the caller's side
	weights map[string]*weight
	wgen    uint64                 // counts changes to weights (RunAll's runs are checked against it)
	runs    map[*devices.Call]*run // RunAll's checked runs, by their first call (guarded by mu)
	slots2  streamSlots            // StreamWeight's two slots
	kvs     kvStream               // StreamKV's cache
	freqs   map[string]dptr        // rope frequency factors on the GPU, by their bytes (freqs_cuda.go)

	// Owned by the device's thread.
	ctx        context
	hasCtx     bool
	k          *kernels
	sms        int            // multiprocessors
	occ        map[occKey]int // blocks a wave, by launch shape (wave)
	slots      [maxArgs]uint64
	kv         map[int]*kvCache
	allocs     map[dptr]allocation // every live allocation
	used       int64
	held       [nMemKinds]int64 // used by kind
	peak       [nMemKinds]int64 // held when used was at its most
	peakN      int64            // used at its most
	driver     int64            // the GPU's memory in use once the context and kernels were loaded, less used
	tokens     dptr             // the step on the device: its position, then its token ids (ntok of room), then ReadArgmax's results (as many)
	ntok       int              // token ids tokens has room for
	rowPos     dptr             // a batched step's rows: position and first cell of each (uploadRows)
	nrow       int              // rows rowPos has room for
	xq         dptr             // activation rows quantized to 8 bits for mvb (launchMVB)
	nxq        int64            // bytes xq has room for
	xqs        dptr             // a decode step's down projection input, staged once by the gate and up launch (q8Pair)
	nxqs       int64            // bytes xqs has room for
	mmtP       dptr             // a split-K prefill mat-mul's partial products (launchMMT)
	nmmtP      int64            // bytes mmtP has room for
	mmtX       dptr             // a prefill mat-mul's activations rounded to f16 (launchMMT)
	nmmtX      int64            // bytes mmtX has room for
	blas       *blas            // cuBLAS for a prompt's mat-muls, where it loaded (blas_cuda.go)
	blasWhy    string           // why not, where it did not
	useBlas    bool             // a prompt's mat-muls of blasMin tokens or more run on blas (tests switch it)
	w16        dptr             // a weight's rows decoded to f16 for blas (blasMMT)
	nw16       int64            // bytes w16 has room for
	picks      dptr             // ReadTopK's results
	npicks     int64            // bytes picks has room for
	attP       dptr             // split attention's parts (attendAt)
	nattP      int64            // bytes attP has room for
	attC       dptr             // split attention's counts of finished parts, one int a row and head (zero between launches)
	nattC      int64            // bytes attC has room for
	stream     stream           // every launch goes here (graphs need a stream of our own)
	graphs     map[string]*graph
	seen       map[string]bool // batches run once, captured when seen again
	key        []byte
	stats      graphStats
	units      []unit         // fuse's scratch
	noFuse     bool           // launch every op alone (tests compare both ways)
	mvWarpsSet int            // warps a decode mat-vec block takes where set (SetMVWarps), else mvWarps's default
	twoSet     bool           // every wide decode mat-vec with mvw2_<type> takes it (tests), else twoBlocks's rule
	gqaHeads   int            // the most query heads a block of attention_g takes where set (tests), else gqaHeads's
	span       int            // the most keys a row of the batch being run sees (stepSpan), 0 between batches
	stage      unsafe.Pointer // pinned host staging for Write and Read
	chain      chain          // the picks PickNext queued (devices.Chainer)
	nstage     int
}

// weight is a resident weight: its file bytes on the GPU (Q4_0's, Q8_0's
// and Q6_K's regrouped, layout.go), or for one-row tensors (norm vectors) the
// f32 decoding of them.
type weight struct {
	w        ops.Weight
	typ      quant.Type // of the bytes at ptr
	ptr      dptr
	rowBytes int
	regroup  bool // rows regrouped (regroupRow)
	streamed bool // in a streaming slot (StreamWeight), not resident
}

// kvCache is one layer's keys and values, binary16 (as the CPU device keeps
// them: half the memory of f32, the same rounding), ctx positions × dim.
type kvCache struct {
	k, v     dptr
	ctx, dim int
}

// Buffer is an f32 buffer in GPU memory. A view shares its base's memory;
// only a base (from Alloc) can be freed.
type Buffer struct {
	dev  *Device
	ptr  dptr
	n    int
	base bool // from Alloc, not View; false once freed
}

// Len implements devices.Buffer.
func (b *Buffer) Len() int { return b.n }

var (
	_ devices.Device        = (*Device)(nil)
	_ devices.PeakReporter  = (*Device)(nil)
	_ devices.WeightsLoader = (*Device)(nil)
)

// New opens GPU ordinal as device "cuda:<ordinal>": it starts the device's
// thread, creates a context on it and loads the kernels.
func New(ordinal int) (*Device, error) {
	d := &Device{
		name:    fmt.Sprintf("cuda:%d", ordinal),
		work:    make(chan item, 1024),
		done:    make(chan error),
		weights: map[string]*weight{},
		kv:      map[int]*kvCache{},
	}
	go d.loop()
	err := d.do(func() error {
		if err := driverInit(); err != nil {
			return err
		}
		dev, name, total, err := gpuInfo(ordinal)
		if err != nil {
			return err
		}
		d.gpu, d.total, d.cudev = name, total, dev
		if d.ctx, err = newContext(dev); err != nil {
			return err
		}
		d.hasCtx = true
		if d.free, err = memFreeBytes(); err != nil {
			return err
		}
		if d.stream, err = newStream(); err != nil {
			return err
		}
		if d.tokens, err = d.alloc(4*(1+2*512), memScratch); err != nil {
			return err
		}
		d.ntok = 512
		if d.sms, err = multiprocessors(dev); err != nil {
			return err
		}
		major, err := computeMajor(dev)
		if err != nil {
			return err
		}
		if d.k, err = loadKernels(major); err != nil {
			return err
		}
		d.blas, d.blasWhy = d.openBlas()
		d.useBlas = d.blas != nil
		// What the GPU has in use now beyond our one allocation is the
		// context's and the kernels' (and another process's, if any).
		free, err := memFreeBytes()
		if err != nil {
			return err
		}
		d.driver = max(d.total-free-d.used, 0)
		return nil
	})
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("cuda: opening GPU %d: %w", ordinal, err)
	}
	return d, nil
}

// item is a call for the device's thread.
type item struct {
	f func() error
}

// loop is the device's thread: every CUDA call of its context runs here.
func (d *Device) loop() {
	runtime.LockOSThread()
	for it := range d.work {
		d.done <- it.f()
	}
}

// do runs f on the device's thread and returns its error, joined with that
// of any op queued before it: handing work to a locked thread and back costs
// ~20 µs on the lent H100's host, five times a kernel launch, so Run only
// queues its op and the ops queued since the last call are launched here
// first, together (as one CUDA graph when the same batch was seen before).
func (d *Device) do(f func() error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("cuda: %s is closed", d.name)
	}
	q := d.queue
	d.work <- item{f: func() error {
		var qerr error
		if len(q) > 0 && debugGraph {
			t0 := time.Now()
			qerr = d.flush(q)
			d.stats.queue += t0.Sub(d.stats.queued)
			d.stats.flush += time.Since(t0)
			d.stats.flushes++
		} else if len(q) > 0 {
			qerr = d.flush(q)
		}
		err := errors.Join(qerr, f())
		if debugGraph {
			d.stats.replayGPU.collect()
		}
		return err
	}}
	err := <-d.done
	clear(q)
	d.queue = q[:0]
	return err
}

// queued reports whether Run has accepted ops not yet launched.
func (d *Device) queued() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.queue) > 0
}

// args starts a kernel's parameter list in the device's slots (device thread only).
func (d *Device) args() *args { return &args{slot: &d.slots, s: d.stream} }

// Name implements devices.Device.
func (d *Device) Name() string { return d.name }

// Info implements devices.Device.
func (d *Device) Info() devices.Info {
	detail := fmt.Sprintf("%s, %.1f GiB (%.1f free), PTX compute_80 kernels, f16 KV cache", d.gpu, float64(d.total)/(1<<30), float64(d.free)/(1<<30))
	if d.blas != nil {
		detail += fmt.Sprintf(", prompts of %d+ tokens (%d+ for large weights) on %s", blasMin, mmtMin, d.blas)
	} else {
		detail += ", prompts on its own tensor-core kernels (cuBLAS: " + d.blasWhy + ")"
	}
	if len(d.peers) > 0 {
		detail += ", peer to peer with " + strings.Join(d.peers, ", ")
	}
	return devices.Info{Name: d.name, Kind: "cuda", Memory: d.total, Free: d.free, KVBytes: 2, Sequences: true, FusionWindow: fusionWindow, FusionTokens: mmtMin - 1, Queues: true, Detail: detail}
}

// Supports implements devices.Device.
func (d *Device) Supports(op *ops.Op) error {
	switch op.Kind {
	case ops.Embed, ops.MatMul, ops.SiLUMul, ops.Add, ops.LastRow:
	case ops.RMSNorm:
		// Per-head norms run as rows of Weight.Cols (run_cuda.go).
	case ops.AddBias:
		if w := op.Weight; w == nil || w.Rows != 1 {
			return fmt.Errorf("cuda: op %s: add_bias needs a one-row weight: %w", op, devices.ErrUnsupported)
		}
	case ops.RoPE:
		r := op.Rope
		if r.HeadDim%2 != 0 {
			return fmt.Errorf("cuda: op %s: rope of odd head size %d %w", op, r.HeadDim, devices.ErrUnsupported)
		}
		if r.Freqs != nil && len(r.Freqs) != r.Dims/2 {
			return fmt.Errorf("cuda: op %s: %d rope frequency factors for %d rotated pairs: %w", op, len(r.Freqs), r.Dims/2, devices.ErrUnsupported)
		}
	case ops.Attention:
		if op.Attn.HeadDim > 256 {
			return fmt.Errorf("cuda: op %s: head dim %d over 256 %w", op, op.Attn.HeadDim, devices.ErrUnsupported)
		}
	default:
		return fmt.Errorf("cuda: op %s: %w kind", op, devices.ErrUnsupported)
	}
	if w := op.Weight; w != nil {
		if _, ok := typeNames[w.Type]; !ok {
			return fmt.Errorf("cuda: op %s: weight type %s %w", op, w.Type, devices.ErrUnsupported)
		}
		if w.Rows > 1 && w.Cols%chunk(w.Type) != 0 {
			return fmt.Errorf("cuda: op %s: rows of %d %s elements are not whole chunks of %d: %w", op, w.Cols, w.Type, chunk(w.Type), devices.ErrUnsupported)
		}
	}
	return nil
}

// LoadWeight implements devices.Device: the bytes are copied to the GPU once.
// One-row tensors are decoded to f32 on the host first, as the CPU device does.
func (d *Device) LoadWeight(w *ops.Weight, data []byte) error {
	res, data, err := hostWeight(w, data)
	if err != nil {
		return err
	}
	d.wmu.Lock()
	cur, ok := d.weights[w.Name]
	d.wmu.Unlock()
	if ok && !cur.streamed {
		return nil
	}
	return d.do(func() error {
		// 16 bytes of slack: the mat-vec kernels read 2-byte aligned blocks
		// with aligned 4-byte loads that may end past the last block.
		p, err := d.alloc(res.size(data)+16, memWeight)
		if err != nil {
			return fmt.Errorf("cuda: weight %s: %w", w.Name, err)
		}
		if err := d.uploadWeight(p, res, data); err != nil {
			return errors.Join(fmt.Errorf("cuda: weight %s: upload: %w", w.Name, err), d.release(p))
		}
		res.ptr = p
		d.wmu.Lock()
		d.weights[w.Name] = res
		d.wgen++
		d.wmu.Unlock()
		return nil
	})
}

// hostWeight checks a weight's bytes and returns its record (without a
// device pointer) and the bytes to upload (hostBytes).
func hostWeight(w *ops.Weight, data []byte) (*weight, []byte, error) {
	res, rb, err := weightLayout(w, data)
	if err != nil {
		return nil, nil, err
	}
	up, err := hostBytes(res, rb, data)
	return res, up, err
}

// weightLayout checks a weight's bytes and returns its record (without a
// device pointer) and its rows' bytes in the file: a single row (a norm's)
// is held as f32, and rows of other lengths than whole 16-byte vectors are
// given such a stride on the device.
func weightLayout(w *ops.Weight, data []byte) (*weight, int, error) {
	rb, err := quant.RowBytes(w.Type, w.Cols)
	if err != nil {
		return nil, 0, fmt.Errorf("cuda: weight %s: %w", w.Name, err)
	}
	if int64(len(data)) != int64(rb)*int64(w.Rows) {
		return nil, 0, fmt.Errorf("cuda: weight %s: %d bytes, want %d for %d×%d %s", w.Name, len(data), rb*w.Rows, w.Rows, w.Cols, w.Type)
	}
	if _, ok := typeNames[w.Type]; !ok {
		return nil, 0, fmt.Errorf("cuda: weight %s: type %s %w", w.Name, w.Type, devices.ErrUnsupported)
	}
	res := &weight{w: *w, typ: w.Type, rowBytes: rb}
	if w.Rows == 1 {
		res.typ, res.rowBytes = quant.F32, 4*w.Cols
	} else if regroupFields[w.Type] != nil {
		res.rowBytes, res.regroup = regroupRowBytes(w.Type, w.Cols), true
	} else {
		// The kernels read float rows in 16-byte vectors: give each row a
		// stride of whole vectors (F16 or BF16 rows of 4 mod 8 elements).
		res.rowBytes = (rb + 15) &^ 15
	}
	return res, rb, nil
}

// hostBytes is the bytes of a weight as the device holds them (res's
// layout), from data, its rows rb bytes each in the file.
func hostBytes(res *weight, rb int, data []byte) ([]byte, error) {
	w := &res.w
	if w.Rows == 1 {
		f := make([]float32, w.Cols)
		if err := quant.Dequantize(w.Type, data, f); err != nil {
			return nil, fmt.Errorf("cuda: weight %s: %w", w.Name, err)
		}
		return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f)), nil
	}
	if res.rowBytes == rb || res.regroup {
		return data, nil // regrouped as it is uploaded (uploadWeight)
	}
	p := make([]byte, res.rowBytes*w.Rows)
	if err := guarded(func() {
		for r := range w.Rows {
			copy(p[r*res.rowBytes:], data[r*rb:(r+1)*rb])
		}
	}); err != nil {
		return nil, fmt.Errorf("cuda: weight %s: %w", w.Name, err)
	}
	return p, nil
}

// size is the device bytes of weight res from up, hostBytes's result.
func (res *weight) size(up []byte) int64 {
	if res.regroup {
		return int64(res.rowBytes) * int64(res.w.Rows)
	}
	return int64(len(up))
}

// uploadWeight copies up, hostBytes's result for res, to p (device thread
// only): as it is, or where it is regrouped a staging buffer's worth of
// rows at a time, regrouped on the way (regroupRow), so that the host holds
// no regrouped copy of the weight.
func (d *Device) uploadWeight(p dptr, res *weight, up []byte) error {
	if !res.regroup {
		return d.upload(p, up)
	}
	rows, pitch := res.w.Rows, res.rowBytes
	rb := len(up) / rows
	step := max(1, uploadChunk/pitch)
	for r0 := 0; r0 < rows; r0 += step {
		n := min(step, rows-r0)
		s, err := d.staging(n * pitch)
		if err != nil {
			return err
		}
		if err := guarded(func() {
			for i := range n {
				regroupRow(s[i*pitch:(i+1)*pitch], up[(r0+i)*rb:(r0+i+1)*rb], res.typ)
			}
		}); err != nil {
			return err
		}
		if err := memcpyHtoD(p+dptr(r0*pitch), d.stage, int64(n*pitch)); err != nil {
			return err
		}
	}
	return nil
}

// uploadChunk is how much of a weight goes through the pinned staging
// buffer at a time.
const uploadChunk = 8 << 20

// ErrFault is wrapped when reading a weight's bytes faulted: they are used
// in place in a memory-mapped model file, which was truncated under them.
var ErrFault = errors.New("memory fault reading the weight's bytes (the model file was truncated?)")

// upload copies data to p (device thread only) through the pinned staging
// buffer: the copy out of data, which may be a mapped file, is Go's, so a
// page that vanished with a truncated file is an error (ErrFault) rather
// than a fault inside the driver that would end the process; and pinned
// memory goes at the link's DMA rate.
func (d *Device) upload(p dptr, data []byte) error {
	for off := 0; off < len(data); off += uploadChunk {
		n := min(uploadChunk, len(data)-off)
		s, err := d.staging(n)
		if err != nil {
			return err
		}
		if err := copyGuarded(s, data[off:off+n]); err != nil {
			return err
		}
		if err := memcpyHtoD(p+dptr(off), d.stage, int64(n)); err != nil {
			return err
		}
	}
	return nil
}

// copyGuarded is copy(dst, src), with a memory fault reading src returned
// as ErrFault.
func copyGuarded(dst, src []byte) error { return guarded(func() { copy(dst, src) }) }

// guarded runs f, which reads a weight's bytes, as copyGuarded copies
// them: a memory fault in it is ErrFault.
func guarded(f func()) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); !ok {
				panic(r)
			}
			err = ErrFault
		}
	}()
	f()
	return nil
}

// memKind is what an allocation holds, for MemoryPeak.
type memKind uint8

const (
	memWeight memKind = iota
	memKV
	memSlot
	memBuffer
	memScratch
	nMemKinds
)

// allocation is a live allocation's size and kind.
type allocation struct {
	n    int64
	kind memKind
}

// alloc takes n bytes of device memory holding kind (device thread only).
func (d *Device) alloc(n int64, kind memKind) (dptr, error) {
	p, err := memAlloc(max(n, 4))
	if err != nil {
		return 0, fmt.Errorf("cuMemAlloc(%d bytes) with %d in use: %w", n, d.used, err)
	}
	if d.allocs == nil {
		d.allocs = map[dptr]allocation{}
	}
	d.allocs[p] = allocation{n, kind}
	d.used += n
	d.held[kind] += n
	if d.used > d.peakN {
		d.peakN, d.peak = d.used, d.held
	}
	if kind != memBuffer {
		// A graph may hold a pointer that this one replaces. An activation
		// buffer's graphs went when it was freed (release).
		d.freeGraphs()
	}
	return p, nil
}

// release frees an allocation of alloc (device thread only), after the work
// queued before it that may still read it; captured graphs that may hold the
// pointer are dropped: for an activation buffer those whose batches read or
// write it (so that a new prompt length's step does not drop the decode
// step's graphs), for anything else all of them.
func (d *Device) release(p dptr) error {
	a, ok := d.allocs[p]
	if !ok {
		return fmt.Errorf("free of memory this device did not allocate")
	}
	if err := synchronize(); err != nil {
		return err
	}
	if a.kind == memBuffer {
		d.dropGraphs(p, p+dptr(a.n))
	} else {
		d.freeGraphs()
	}
	delete(d.allocs, p)
	d.used -= a.n
	d.held[a.kind] -= a.n
	return memFree(p)
}

// Alloc implements devices.Device.
func (d *Device) Alloc(n int) (devices.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("cuda: negative buffer size %d", n)
	}
	b := &Buffer{dev: d, n: n, base: true}
	err := d.do(func() error {
		var err error
		b.ptr, err = d.alloc(4*int64(n), memBuffer)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", d.name, err)
	}
	return b, nil
}

// Free implements devices.Allocator: the ops queued before it run first.
func (d *Device) Free(b devices.Buffer) error {
	cb, err := d.buf(b)
	if err != nil {
		return err
	}
	if !cb.base {
		return fmt.Errorf("cuda: %s: free of a view or of a buffer freed before", d.name)
	}
	err = d.do(func() error { return d.release(cb.ptr) })
	cb.base = false
	if err != nil {
		return fmt.Errorf("cuda: %s: %w", d.name, err)
	}
	return nil
}

// View implements devices.Device.
func (d *Device) View(b devices.Buffer, n int) (devices.Buffer, error) {
	cb, err := d.buf(b)
	if err != nil {
		return nil, err
	}
	if n < 0 || n > cb.n {
		return nil, fmt.Errorf("cuda: view of %d elements of a buffer of %d", n, cb.n)
	}
	return &Buffer{dev: d, ptr: cb.ptr, n: n}, nil
}

// staging returns the pinned host buffer grown to n bytes (device thread only).
func (d *Device) staging(n int) ([]byte, error) {
	if n > d.nstage {
		hostFree(d.stage)
		d.stage, d.nstage = nil, 0
		size := max(n, 1<<20)
		p, err := hostAlloc(size)
		if err != nil {
			return nil, err
		}
		d.stage, d.nstage = p, size
	}
	return unsafe.Slice((*byte)(d.stage), n), nil
}

// Write implements devices.Device: src goes through pinned memory, so the
// copy runs at the link's DMA rate rather than the driver's pageable path.
func (d *Device) Write(dst devices.Buffer, src []float32) error {
	b, err := d.buf(dst)
	if err != nil {
		return err
	}
	if len(src) > b.n {
		return fmt.Errorf("cuda: write of %d elements into a buffer of %d", len(src), b.n)
	}
	if len(src) == 0 {
		return nil
	}
	return d.do(func() error {
		s, err := d.staging(4 * len(src))
		if err != nil {
			return err
		}
		copy(s, unsafe.Slice((*byte)(unsafe.Pointer(&src[0])), 4*len(src)))
		if err := memcpyHtoD(b.ptr, d.stage, int64(4*len(src))); err != nil {
			return fmt.Errorf("cuda: write of %d elements: %w", len(src), err)
		}
		return nil
	})
}

// Read implements devices.Device; it waits for the work queued before it,
// and returns the error of any op that failed on the way.
func (d *Device) Read(dst []float32, src devices.Buffer) error {
	b, err := d.buf(src)
	if err != nil {
		return err
	}
	if len(dst) > b.n {
		return fmt.Errorf("cuda: read of %d elements from a buffer of %d", len(dst), b.n)
	}
	if len(dst) == 0 {
		return nil
	}
	return d.do(func() error {
		s, err := d.staging(4 * len(dst))
		if err != nil {
			return err
		}
		if err := memcpyDtoH(d.stage, b.ptr, int64(4*len(dst))); err != nil {
			return fmt.Errorf("cuda: read of %d elements: %w", len(dst), err)
		}
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 4*len(dst)), s)
		return nil
	})
}

// argmaxOut is where the argmax kernel writes: the ntok words after the
// token ids.
func (d *Device) argmaxOut() dptr { return d.tokens + dptr(4*(1+d.ntok)) }

// ReadArgmax implements devices.Argmaxer: the argmax kernel over len(ids)
// rows of src, n elements each (a block a row), then a read of their
// 4-byte results.
func (d *Device) ReadArgmax(src devices.Buffer, n int, ids []int32) error {
	b, err := d.buf(src)
	if err != nil {
		return err
	}
	rows := len(ids)
	if n <= 0 || rows == 0 || int64(n)*int64(rows) > int64(b.n) {
		return fmt.Errorf("cuda: argmax of %d rows of %d elements in a buffer of %d", rows, n, b.n)
	}
	return d.do(func() error {
		if rows > d.ntok {
			if err := d.regrowTokens(rows); err != nil {
				return err
			}
		}
		if err := launch(d.k.argmax, rows, 1, 1024, d.args().ptr(uintptr(b.ptr)).i32(n).ptr(uintptr(d.argmaxOut()))); err != nil {
			return fmt.Errorf("cuda: argmax: %w", err)
		}
		s, err := d.staging(4 * rows)
		if err != nil {
			return err
		}
		if err := memcpyDtoH(d.stage, d.argmaxOut(), int64(4*rows)); err != nil {
			return fmt.Errorf("cuda: argmax: %w", err)
		}
		for i := range ids {
			ids[i] = int32(binary.LittleEndian.Uint32(s[4*i:]))
		}
		return nil
	})
}

// chain holds the greedy picks PickNext queued: each is copied from the
// device into its slot of pinned host memory, with an event after the copy,
// so that NextPick waits for that pick's step only and not for the step
// queued after it. The events keep their times: the time between two
// picks' events is the device's time between them (PickGap).
type chain struct {
	host        unsafe.Pointer // devices.MaxChained int32 slots
	ev          [devices.MaxChained]event
	head, count int // the oldest pick's slot, and how many are queued

	// The slot NextPick read last, whether its event still marks that
	// pick (queuePick records the slot again once it is free), and the
	// device's time from it to the pick read after it (PickGap).
	read   int
	readOK bool
	gap    time.Duration
	gapOK  bool
}

// free releases the chain's memory and events (device thread only).
func (c *chain) free() {
	if c.host != nil {
		hostFree(c.host)
	}
	for i := range c.ev {
		c.ev[i].destroy()
	}
	*c = chain{}
}

// Chains implements devices.Chainer.
func (d *Device) Chains() bool { return d.k != nil && d.k.argmaxNext.fn != nil }

// PickNext implements devices.Chainer: argmax_next picks from src's first
// row and writes the pick and the position after the step's where the
// next step reads them; the pick's copy to pinned memory and an event are
// queued after it, nothing waited for.
func (d *Device) PickNext(src devices.Buffer, n int) error {
	return d.queuePick(src, n, "argmax", func(b *Buffer, out dptr) error {
		return launch(d.k.argmaxNext, 1, 1, 1024, d.args().ptr(uintptr(b.ptr)).i32(n).ptr(uintptr(out)).ptr(uintptr(d.tokens)))
	})
}

// SampleNext implements devices.SampleChainer: sample_next makes the
// sampler's pick from src's first row, where PickNext's argmax_next would
// write its own.
func (d *Device) SampleNext(src devices.Buffer, n int, p devices.SampleSpec) error {
	if p.K < 1 || p.K > devices.MaxPicks || !(p.TopP > 0 && p.TopP <= 1) || !(p.Temp > 0) || !(p.Draw >= 0 && p.Draw < 1) {
		return fmt.Errorf("cuda: a sampled pick of top-k %d, top-p %g, temperature %g, draw %g", p.K, p.TopP, p.Temp, p.Draw)
	}
	k := min(p.K, n) // the sampler keeps every logit of a row under k
	return d.queuePick(src, n, "sampled pick", func(b *Buffer, out dptr) error {
		return launch(d.k.sampleNext, 1, 1, 1024, d.args().ptr(uintptr(b.ptr)).i32(n).i32(k).f32(p.TopP).f32(p.Temp).f32(p.Draw).ptr(uintptr(out)).ptr(uintptr(d.tokens)))
	})
}

// queuePick queues a pick from src's first row of n elements by pick (a
// launch writing it to out and to the next step's token), its copy to
// pinned memory and an event, in the chain's next slot.
func (d *Device) queuePick(src devices.Buffer, n int, what string, pick func(b *Buffer, out dptr) error) error {
	b, err := d.buf(src)
	if err != nil {
		return err
	}
	if n <= 0 || n > b.n {
		return fmt.Errorf("cuda: %s of a row of %d elements in a buffer of %d", what, n, b.n)
	}
	return d.do(func() error {
		c := &d.chain
		if c.count == devices.MaxChained {
			return fmt.Errorf("cuda: a pick queued past the %d a device holds", devices.MaxChained)
		}
		if c.host == nil {
			p, err := hostAlloc(4 * devices.MaxChained)
			if err != nil {
				return err
			}
			c.host = p
			for i := range c.ev {
				if c.ev[i], err = newTimedEvent(); err != nil {
					c.free()
					return err
				}
			}
		}
		slot := (c.head + c.count) % devices.MaxChained
		out := d.argmaxOut() + dptr(4*slot) // two of the ntok (≥ 512) result words
		if err := pick(b, out); err != nil {
			return fmt.Errorf("cuda: %s: %w", what, err)
		}
		if err := d.stream.copyDtoH(unsafe.Add(c.host, 4*slot), out, 4); err != nil {
			return fmt.Errorf("cuda: %s: %w", what, err)
		}
		if err := c.ev[slot].record(d.stream); err != nil {
			return err
		}
		if slot == c.read {
			c.readOK = false
		}
		c.count++
		return nil
	})
}

// NextPick implements devices.Chainer.
func (d *Device) NextPick() (int32, error) {
	var id int32
	err := d.do(func() error {
		c := &d.chain
		if c.count == 0 {
			return errors.New("cuda: no pick queued")
		}
		slot := c.head
		c.head, c.count = (c.head+1)%devices.MaxChained, c.count-1
		if err := c.ev[slot].sync(); err != nil {
			return fmt.Errorf("cuda: pick: %w", err)
		}
		id = *(*int32)(unsafe.Add(c.host, 4*slot))
		c.gapOK = false
		if c.readOK && (c.read+1)%devices.MaxChained == slot {
			if t, err := elapsed(c.ev[c.read], c.ev[slot]); err == nil {
				c.gap, c.gapOK = t, true
			}
		}
		c.read, c.readOK = slot, true
		return nil
	})
	return id, err
}

var _ devices.PickTimer = (*Device)(nil)

// PickGap implements devices.PickTimer: the events' time between the pick
// NextPick read last and the one before it.
func (d *Device) PickGap() (time.Duration, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.chain.gap, d.chain.gapOK
}

// ReadTopK implements devices.TopKer: the topk kernel over the rows of src
// (a block a row), then a read of their m indices and m values each.
func (d *Device) ReadTopK(src devices.Buffer, n, m int, picks []devices.Pick) error {
	b, err := d.buf(src)
	if err != nil {
		return err
	}
	if m < 1 || m > min(n, devices.MaxPicks) || len(picks) == 0 || len(picks)%m != 0 {
		return fmt.Errorf("cuda: top %d of rows of %d elements into %d picks", m, n, len(picks))
	}
	rows := len(picks) / m
	if int64(n)*int64(rows) > int64(b.n) {
		return fmt.Errorf("cuda: top %d of %d rows of %d elements in a buffer of %d", m, rows, n, b.n)
	}
	return d.do(func() error {
		need := int64(8 * len(picks))
		if need > d.npicks {
			if err := d.regrow(&d.picks, max(need, 8*64*devices.MaxPicks)); err != nil {
				return fmt.Errorf("cuda: top-k scratch: %w", err)
			}
			d.npicks = max(need, 8*64*devices.MaxPicks)
		}
		vals := d.picks + dptr(4*len(picks))
		if err := launch(d.k.topk, rows, 1, 1024, d.args().ptr(uintptr(b.ptr)).i32(n).i32(m).ptr(uintptr(d.picks)).ptr(uintptr(vals))); err != nil {
			return fmt.Errorf("cuda: top-k: %w", err)
		}
		s, err := d.staging(int(need))
		if err != nil {
			return err
		}
		if err := memcpyDtoH(d.stage, d.picks, need); err != nil {
			return fmt.Errorf("cuda: top-k: %w", err)
		}
		k := len(picks)
		for i := range picks {
			picks[i] = devices.Pick{Index: int32(binary.LittleEndian.Uint32(s[4*i:])), Value: math.Float32frombits(binary.LittleEndian.Uint32(s[4*(k+i):]))}
		}
		return nil
	})
}

// LoadWeights implements devices.WeightsLoader: the weights not yet resident
// share one allocation, each at a 256-byte boundary with LoadWeight's 16
// bytes of slack. cuMemAlloc takes whole 2 MiB pages: an allocation apiece
// held TinyLlama's 606 MiB of weights in about 200 MiB more on the H100.
func (d *Device) LoadWeights(ws []*ops.Weight, data [][]byte) error {
	if len(ws) != len(data) {
		return fmt.Errorf("cuda: %d weights with %d byte slices", len(ws), len(data))
	}
	type part struct {
		res *weight
		up  []byte
		off int64
	}
	var parts []part
	var total int64
	taken := map[string]bool{}
	for i, w := range ws {
		d.wmu.Lock()
		cur, ok := d.weights[w.Name]
		d.wmu.Unlock()
		if ok && !cur.streamed || taken[w.Name] {
			continue
		}
		taken[w.Name] = true
		res, up, err := hostWeight(w, data[i])
		if err != nil {
			return err
		}
		parts = append(parts, part{res, up, total})
		total += (res.size(up) + 16 + 255) &^ 255
	}
	if len(parts) == 0 {
		return nil
	}
	return d.do(func() error {
		p, err := d.alloc(total, memWeight)
		if err != nil {
			return fmt.Errorf("cuda: %d weights, %s the first: %w", len(parts), parts[0].res.w.Name, err)
		}
		for _, pt := range parts {
			if err := d.uploadWeight(p+dptr(pt.off), pt.res, pt.up); err != nil {
				return errors.Join(fmt.Errorf("cuda: weight %s: upload: %w", pt.res.w.Name, err), d.release(p))
			}
		}
		d.wmu.Lock()
		for _, pt := range parts {
			pt.res.ptr = p + dptr(pt.off)
			d.weights[pt.res.w.Name] = pt.res
		}
		d.wgen++
		d.wmu.Unlock()
		return nil
	})
}

// Sync implements devices.Device.
func (d *Device) Sync() error {
	return d.do(func() error {
		if err := synchronize(); err != nil {
			return fmt.Errorf("cuda: %s: %w", d.name, err)
		}
		return nil
	})
}

// MemoryUsed implements devices.Device: weights, buffers and KV caches.
func (d *Device) MemoryUsed() int64 {
	var n int64
	d.do(func() error { n = d.used; return nil })
	return n
}

// MemoryPeak implements devices.PeakReporter.
func (d *Device) MemoryPeak() devices.MemoryPeak {
	var m devices.MemoryPeak
	d.do(func() error {
		m = devices.MemoryPeak{Total: d.peakN, Weights: d.peak[memWeight], KVCache: d.peak[memKV],
			Streaming: d.peak[memSlot], Buffers: d.peak[memBuffer], Scratch: d.peak[memScratch], Runtime: d.driver}
		// The driver's share grows after the context is made (graphs,
		// kernels loaded at first launch): what it holds now, if more.
		if free, err := memFreeBytes(); err == nil {
			m.Runtime = max(m.Runtime, d.total-free-d.used)
		}
		return nil
	})
	return m
}

// Close implements devices.Device: it frees everything, destroys the context
// and ends the device's thread.
func (d *Device) Close() error {
	err := d.do(func() error {
		var errs []error
		if d.k != nil {
			synchronize()
			d.k.unload()
		}
		if debugGraph {
			fmt.Fprintf(os.Stderr, "cuda: %s: batches: %d graph replays, %d captures, %d failed captures (%v), %d eager; launched %d fused units and %d ops alone\n", d.name, d.stats.replays, d.stats.captures, d.stats.failed, d.stats.lastErr, d.stats.eager, d.stats.fused, d.stats.alone)
			st := &d.stats
			st.replayGPU.collect()
			if st.replayGPU.n > 0 && st.flushes > 0 {
				fmt.Fprintf(os.Stderr, "cuda: %s: %d replays took %v each on the GPU (%v per call that waits); %d such calls: %v from a step's first Run to the call, %v in its flush, each\n",
					d.name, st.replayGPU.n, st.replayGPU.total/time.Duration(st.replayGPU.n), st.replayGPU.total/time.Duration(st.flushes), st.flushes, st.queue/time.Duration(st.flushes), st.flush/time.Duration(st.flushes))
			}
			st.replayGPU.free()
		}
		d.freeGraphs()
		synchronize()
		d.blas.close()
		d.blas = nil
		d.freeSlots()
		if err := d.unpin(); err != nil {
			errs = append(errs, err)
		}
		d.stream.destroy()
		d.stream = stream{}
		for p := range d.allocs {
			if err := memFree(p); err != nil {
				errs = append(errs, err)
			}
		}
		hostFree(d.stage)
		d.chain.free()
		d.allocs, d.kv, d.stage, d.nstage, d.used, d.held = nil, nil, nil, 0, 0, [nMemKinds]int64{}
		d.slots2, d.kvs = streamSlots{}, kvStream{}
		d.wmu.Lock()
		d.weights = map[string]*weight{}
		d.wgen++
		d.freqs = nil
		d.wmu.Unlock()
		d.k = nil
		if d.hasCtx {
			if err := d.ctx.destroy(); err != nil {
				errs = append(errs, err)
			}
			d.hasCtx = false
		}
		return errors.Join(errs...)
	})
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		close(d.work)
	}
	d.mu.Unlock()
	if err != nil {
		return fmt.Errorf("cuda: closing %s: %w", d.name, err)
	}
	return nil
}

func (d *Device) buf(b devices.Buffer) (*Buffer, error) {
	cb, ok := b.(*Buffer)
	if !ok || cb.dev != d {
		return nil, fmt.Errorf("cuda: %s got a buffer of another device (%T)", d.name, b)
	}
	return cb, nil
}
