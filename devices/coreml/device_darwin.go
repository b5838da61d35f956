//go:build darwin

package coreml

import (
	"fmt"
	"slices"
	"sync"
	"syscall"
	"unsafe"

	"hybrid/devices"
	"hybrid/devices/coreml/mlmodel"
	"hybrid/ops"
)

// Device runs ops as compiled CoreML models. Its buffers are host memory
// (the Neural Engine shares it) mapped outside the Go heap, so that CoreML
// may hold pointers to them.
type Device struct {
	units ComputeUnits
	cache cache

	mu      sync.Mutex
	weights map[string]*weight
	models  map[string]*model // by modelKey
	maps    [][]byte          // buffer mappings, unmapped by Close
	mem     int64             // bytes of buffers
	mapped  int64             // bytes of weights used in place from the file
}

// Buffer is a CoreML device buffer: f32 host memory outside the Go heap.
type Buffer struct {
	F   []float32
	mem []byte // the mapping of a buffer from Alloc; nil for a view or once freed
}

// Len implements devices.Buffer.
func (b *Buffer) Len() int { return len(b.F) }

var _ devices.Device = (*Device)(nil)

// New loads CoreML.framework and returns a device that runs models on units,
// keeping compiled models in dir.
func New(units ComputeUnits, dir string) (*Device, error) {
	if err := load(); err != nil {
		return nil, err
	}
	return &Device{units: units, cache: cache{dir: dir}, weights: map[string]*weight{}, models: map[string]*model{}}, nil
}

// Name implements devices.Device.
func (d *Device) Name() string { return "coreml" }

// Info implements devices.Device.
func (d *Device) Info() devices.Info {
	return devices.Info{
		Name: "coreml", Kind: "coreml", Precision: "f16",
		Detail: fmt.Sprintf("Neural Engine via CoreML (compute units %s, models cached in %s); compiled, unverified on a Mac", d.units, d.cache.dir),
	}
}

// Supports implements devices.Device.
func (d *Device) Supports(op *ops.Op) error { return supports(op) }

// LoadWeight implements devices.Device. The weight's bytes are kept as
// given (the mapped file) and hashed; models are made from them when an op
// first runs at a shape.
func (d *Device) LoadWeight(w *ops.Weight, data []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.weights[w.Name]; ok {
		return nil
	}
	res, err := newWeight(w, data)
	if err != nil {
		return err
	}
	d.weights[w.Name] = res
	d.mapped += int64(len(data))
	return nil
}

// Alloc implements devices.Device.
func (d *Device) Alloc(n int) (devices.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("coreml: negative buffer size %d", n)
	}
	if n == 0 {
		return &Buffer{}, nil
	}
	m, err := syscall.Mmap(-1, 0, 4*n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("coreml: buffer of %d floats: %w", n, err)
	}
	d.mu.Lock()
	d.maps = append(d.maps, m)
	d.mem += int64(len(m))
	d.mu.Unlock()
	return &Buffer{F: unsafe.Slice((*float32)(unsafe.Pointer(&m[0])), n), mem: m}, nil
}

// Free implements devices.Allocator: it unmaps the buffer (predictions are
// synchronous, so nothing still reads it).
func (d *Device) Free(b devices.Buffer) error {
	cb, err := d.buf(b)
	if err != nil {
		return err
	}
	if len(cb.F) == 0 && cb.mem == nil {
		return nil // an empty buffer holds no mapping
	}
	if cb.mem == nil {
		return fmt.Errorf("coreml: free of a view or of a buffer freed before")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	i := slices.IndexFunc(d.maps, func(m []byte) bool { return &m[0] == &cb.mem[0] })
	if i < 0 {
		return fmt.Errorf("coreml: free of a buffer this device does not hold")
	}
	d.maps = slices.Delete(d.maps, i, i+1)
	d.mem -= int64(len(cb.mem))
	err = syscall.Munmap(cb.mem)
	cb.F, cb.mem = nil, nil
	if err != nil {
		return fmt.Errorf("coreml: unmap buffer: %w", err)
	}
	return nil
}

// View implements devices.Device.
func (d *Device) View(b devices.Buffer, n int) (devices.Buffer, error) {
	cb, err := d.buf(b)
	if err != nil {
		return nil, err
	}
	f, err := devices.HostView("coreml", cb.F, n)
	if err != nil {
		return nil, err
	}
	return &Buffer{F: f}, nil
}

// Write implements devices.Device.
func (d *Device) Write(dst devices.Buffer, src []float32) error {
	b, err := d.buf(dst)
	if err != nil {
		return err
	}
	return devices.HostWrite("coreml", b.F, src)
}

// Read implements devices.Device.
func (d *Device) Read(dst []float32, src devices.Buffer) error {
	b, err := d.buf(src)
	if err != nil {
		return err
	}
	return devices.HostRead("coreml", dst, b.F)
}

// Run implements devices.Device: it finds or makes the compiled model of op
// at the shape of its buffers and runs one prediction.
func (d *Device) Run(op *ops.Op, st ops.Step, in []devices.Buffer, out devices.Buffer) error {
	if st.Multi() {
		return fmt.Errorf("coreml: op %s: steps of several sequences (server slots) are not supported on this device yet: %w", op, devices.ErrUnsupported)
	}
	if err := supports(op); err != nil {
		return err
	}
	want := op.Kind.Inputs()
	if len(in) != want {
		return fmt.Errorf("coreml: op %s: %d inputs, want %d", op, len(in), want)
	}
	ins := make([][]float32, len(in))
	for i, b := range in {
		cb, err := d.buf(b)
		if err != nil {
			return err
		}
		ins[i] = cb.F
	}
	ob, err := d.buf(out)
	if err != nil {
		return err
	}
	for i := range ins[1:] {
		if len(ins[i+1]) != len(ins[0]) {
			return fmt.Errorf("coreml: op %s: inputs of %d and %d elements", op, len(ins[0]), len(ins[i+1]))
		}
	}
	var w *weight
	if op.Weight != nil {
		d.mu.Lock()
		w = d.weights[op.Weight.Name]
		d.mu.Unlock()
		if w == nil {
			return fmt.Errorf("coreml: op %s: weight %s was not loaded", op, op.Weight.Name)
		}
	}
	s, err := opShape(op, len(ins[0]), len(ob.F), len(st.Tokens))
	if err != nil {
		return err
	}
	m, err := d.model(op, s, w)
	if err != nil {
		return err
	}
	if err := m.predict(ins, s.Rows, s.Cols, ob.F); err != nil {
		return fmt.Errorf("coreml: op %s: %w", op, err)
	}
	return nil
}

// model returns the loaded model of op at shape s: from memory, from the
// cache directory, or written and compiled now.
func (d *Device) model(op *ops.Op, s shape, w *weight) (*model, error) {
	key := modelKey(op, s, w)
	d.mu.Lock()
	m := d.models[key]
	d.mu.Unlock()
	if m != nil {
		return m, nil
	}
	path, err := d.cache.compiled(key, func() ([]byte, error) {
		mm, err := buildModel(op, s, w)
		if err != nil {
			return nil, err
		}
		return mlmodel.Marshal(mm)
	}, compileModel)
	if err != nil {
		return nil, fmt.Errorf("coreml: op %s: %w", op, err)
	}
	m, err = loadModel(path, d.units)
	if err != nil {
		return nil, fmt.Errorf("coreml: op %s: %w", op, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if old := d.models[key]; old != nil { // loaded meanwhile by another goroutine
		m.release()
		return old, nil
	}
	d.models[key] = m
	return m, nil
}

// Sync implements devices.Device; predictions finish before Run returns.
func (d *Device) Sync() error { return nil }

// MemoryUsed implements devices.Device: buffers, and weights at their file
// size. CoreML's own copies of compiled models are not visible here.
func (d *Device) MemoryUsed() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mem + d.mapped
}

// Close implements devices.Device: it releases the models and unmaps the
// buffers, which must not be used after.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range d.models {
		m.release()
	}
	var first error
	for _, m := range d.maps {
		if err := syscall.Munmap(m); err != nil && first == nil {
			first = fmt.Errorf("coreml: unmap buffer: %w", err)
		}
	}
	d.weights, d.models, d.maps = map[string]*weight{}, map[string]*model{}, nil
	d.mem, d.mapped = 0, 0
	return first
}

func (d *Device) buf(b devices.Buffer) (*Buffer, error) {
	cb, ok := b.(*Buffer)
	if !ok {
		return nil, fmt.Errorf("coreml: got a buffer of another device (%T)", b)
	}
	return cb, nil
}

func init() {
	devices.Register(devices.Backend{Kind: "coreml", Open: func(o devices.Options) ([]devices.Device, error) {
		units, err := unitsFromEnv()
		if o.CoreMLUnits != "" { // a policy's coreml_units
			units, err = ParseComputeUnits(o.CoreMLUnits)
		}
		if err != nil {
			return nil, err
		}
		dir, err := cacheDir()
		if err != nil {
			return nil, err
		}
		d, err := New(units, dir)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", err, devices.ErrNotAvailable)
		}
		return []devices.Device{d}, nil
	}})
}
