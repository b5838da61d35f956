//go:build darwin

package metal

import (
	"fmt"
	"slices"
	"unsafe"

	"hybrid/devices"
	"hybrid/devices/metal/mtl"
)

// The device's memory half (devices.Allocator): shared-storage buffers, so
// a copy between host and GPU is a memcpy once the GPU is done with them.

// Buffer is an f32 buffer in shared memory: n elements from byte off of buf.
type Buffer struct {
	dev  *Device
	buf  *mtl.Buffer
	off  int
	n    int
	base bool // from Alloc, not View; false once freed
}

// Len implements devices.Buffer.
func (b *Buffer) Len() int { return b.n }

// alloc makes a shared buffer of n bytes (lock held).
func (d *Device) alloc(n int) (*mtl.Buffer, error) {
	b, err := d.gpu.NewBuffer(n)
	if err != nil {
		return nil, fmt.Errorf("metal: %w (%d bytes in use)", err, d.used)
	}
	d.bufs = append(d.bufs, b)
	d.used += int64(b.Length())
	return b, nil
}

// Free implements devices.Allocator: the work queued before it finishes,
// then the buffer is released.
func (d *Device) Free(b devices.Buffer) error {
	mb, err := d.buf(b)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.live(); err != nil {
		return err
	}
	if !mb.base {
		return fmt.Errorf("metal: free of a view or of a buffer freed before")
	}
	if err := d.flush(); err != nil {
		return err
	}
	i := slices.Index(d.bufs, mb.buf)
	if i < 0 {
		return fmt.Errorf("metal: free of a buffer this device does not hold")
	}
	d.bufs = slices.Delete(d.bufs, i, i+1)
	d.used -= int64(mb.buf.Length())
	mb.buf.Release()
	mb.base, mb.buf = false, nil
	return nil
}

// Alloc implements devices.Device.
func (d *Device) Alloc(n int) (devices.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("metal: negative buffer size %d", n)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.live(); err != nil {
		return nil, err
	}
	b, err := d.alloc(4 * n)
	if err != nil {
		return nil, err
	}
	return &Buffer{dev: d, buf: b, n: n, base: true}, nil
}

// View implements devices.Device.
func (d *Device) View(b devices.Buffer, n int) (devices.Buffer, error) {
	mb, err := d.buf(b)
	if err != nil {
		return nil, err
	}
	if n < 0 || n > mb.n {
		return nil, fmt.Errorf("metal: view of %d elements of a buffer of %d", n, mb.n)
	}
	return &Buffer{dev: d, buf: mb.buf, off: mb.off, n: n}, nil
}

func (d *Device) buf(b devices.Buffer) (*Buffer, error) {
	mb, ok := b.(*Buffer)
	if !ok || mb.dev != d {
		return nil, fmt.Errorf("metal: got a buffer of another device (%T)", b)
	}
	return mb, nil
}

// floats is the CPU's view of b's elements (valid while no GPU work on it
// is pending).
func (b *Buffer) floats() []float32 {
	if b.n == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Add(b.buf.Contents(), b.off)), b.n)
}

// Write implements devices.Device: after the GPU has finished the work
// queued before it, a memcpy into the shared buffer.
func (d *Device) Write(dst devices.Buffer, src []float32) error {
	b, err := d.buf(dst)
	if err != nil {
		return err
	}
	if len(src) > b.n {
		return fmt.Errorf("metal: write of %d elements into a buffer of %d", len(src), b.n)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.live(); err != nil {
		return err
	}
	err = d.flush()
	copy(b.floats(), src)
	return err
}

// Read implements devices.Device: it waits for the work queued before it,
// returns the error of any that failed, and copies from the shared buffer.
func (d *Device) Read(dst []float32, src devices.Buffer) error {
	b, err := d.buf(src)
	if err != nil {
		return err
	}
	if len(dst) > b.n {
		return fmt.Errorf("metal: read of %d elements from a buffer of %d", len(dst), b.n)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.live(); err != nil {
		return err
	}
	if err := d.flush(); err != nil {
		return err
	}
	copy(dst, b.floats())
	return nil
}
