//go:build darwin

package mtl

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego/objc"
)

// Device is an id<MTLDevice>: one GPU.
type Device struct {
	id   objc.ID
	name string
}

// SystemDefault returns the system's default GPU (MTLCreateSystemDefaultDevice,
// or the first of MTLCopyAllDevices where that gives none). The error wraps
// ErrNoDevice when there is no GPU or Metal does not load.
func SystemDefault() (*Device, error) {
	if err := load(); err != nil {
		return nil, err
	}
	d := &Device{}
	err := WithPool(func() error {
		d.id = createSystemDefaultDevice()
		if d.id == 0 {
			all := copyAllDevices() // +1 NSArray
			if all != 0 {
				if msgU64(all, selCount) > 0 {
					d.id = msgIDU64(all, selObjectAtIndex, 0)
					msgID(d.id, selRetain)
				}
				release(all)
			}
		}
		if d.id == 0 {
			return fmt.Errorf("%w: MTLCreateSystemDefaultDevice and MTLCopyAllDevices found none", ErrNoDevice)
		}
		d.name = goString(msgID(d.id, selName))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Name is the GPU's name, e.g. "Apple M4 Pro".
func (d *Device) Name() string { return d.name }

// RecommendedMaxWorkingSetSize is the bytes of memory the GPU can use
// without hurting performance (on Apple silicon, a share of system memory).
func (d *Device) RecommendedMaxWorkingSetSize() uint64 {
	if d == nil || d.id == 0 {
		return 0
	}
	return msgU64(d.id, selWorkingSet)
}

// HasUnifiedMemory reports whether CPU and GPU share memory.
func (d *Device) HasUnifiedMemory() bool {
	if d == nil || d.id == 0 {
		return false
	}
	return msgBool(d.id, selUnified)
}

// MaxBufferLength is the largest buffer the GPU can allocate, in bytes.
func (d *Device) MaxBufferLength() uint64 {
	if d == nil || d.id == 0 {
		return 0
	}
	return msgU64(d.id, selMaxBufferLen)
}

// MaxThreadgroupMemoryLength is the threadgroup memory one threadgroup may
// use, in bytes.
func (d *Device) MaxThreadgroupMemoryLength() uint64 {
	if d == nil || d.id == 0 {
		return 0
	}
	return msgU64(d.id, selMaxTGMemory)
}

// CurrentAllocatedSize is the bytes of memory Metal has allocated on this
// device for this process.
func (d *Device) CurrentAllocatedSize() uint64 {
	if d == nil || d.id == 0 {
		return 0
	}
	return msgU64(d.id, selAllocatedSize)
}

// Release releases the device; it must not be used afterwards.
func (d *Device) Release() {
	if d != nil {
		release(d.id)
		d.id = 0
	}
}

// Buffer is an id<MTLBuffer> with its length and CPU address.
type Buffer struct {
	id       objc.ID
	length   int
	contents unsafe.Pointer
	keep     []byte // memory a no-copy buffer wraps, kept alive with it
}

// ID is the buffer's Objective-C object, for encoders.
func (b *Buffer) ID() objc.ID {
	if b == nil {
		return 0
	}
	return b.id
}

// Length is the buffer's size in bytes.
func (b *Buffer) Length() int { return b.length }

// Contents is the CPU address of a shared buffer's first byte.
func (b *Buffer) Contents() unsafe.Pointer { return b.contents }

// Bytes is the buffer's memory as a slice (shared storage only). The slice
// is valid until the buffer is released; touching it while the GPU writes
// the buffer races with the GPU.
func (b *Buffer) Bytes() []byte {
	if b == nil || b.contents == nil {
		return nil
	}
	return unsafe.Slice((*byte)(b.contents), b.length)
}

// Release releases the buffer.
func (b *Buffer) Release() {
	if b != nil {
		release(b.id)
		b.id, b.contents, b.keep = 0, nil, nil
	}
}

func (d *Device) buffer(id objc.ID, n int, what string) (*Buffer, error) {
	if id == 0 {
		return nil, fmt.Errorf("mtl: %s of %d bytes failed (%d allocated, working set %d)", what, n, d.CurrentAllocatedSize(), d.RecommendedMaxWorkingSetSize())
	}
	return &Buffer{id: id, length: n, contents: msgPtr(id, selContents)}, nil
}

// NewBuffer allocates n zeroed bytes in shared storage.
func (d *Device) NewBuffer(n int) (*Buffer, error) {
	if d == nil || d.id == 0 {
		return nil, ErrReleased
	}
	if n < 0 {
		return nil, fmt.Errorf("mtl: buffer of %d bytes", n)
	}
	// Metal rejects empty buffers; one of 4 bytes stands for them.
	return d.buffer(msgIDU64x2(d.id, selNewBuffer, uint64(max(n, 4)), uint64(StorageModeShared)), n, "newBufferWithLength")
}

// NewBufferWithBytes allocates a shared buffer holding a copy of data.
func (d *Device) NewBufferWithBytes(data []byte) (*Buffer, error) {
	if d == nil || d.id == 0 {
		return nil, ErrReleased
	}
	if len(data) == 0 {
		return d.NewBuffer(0)
	}
	id := msgIDPtrU64x2(d.id, selNewBufferBytes, unsafe.Pointer(&data[0]), uint64(len(data)), uint64(StorageModeShared))
	runtime.KeepAlive(data)
	return d.buffer(id, len(data), "newBufferWithBytes")
}

// NewBufferNoCopy wraps the pages that hold data in a shared buffer without
// copying them (newBufferWithBytesNoCopy, no deallocator: the memory stays
// the caller's, typically a memory-mapped file, and must outlive the
// buffer; the buffer keeps data referenced). It returns the buffer and the
// byte offset of data[0] in it. Metal refuses memory it cannot wrap (not in
// one VM region); the caller then copies with NewBufferWithBytes.
func (d *Device) NewBufferNoCopy(data []byte) (*Buffer, int, error) {
	if d == nil || d.id == 0 {
		return nil, 0, ErrReleased
	}
	if len(data) == 0 {
		return nil, 0, fmt.Errorf("mtl: no-copy buffer of no bytes")
	}
	start, length, off := PageSpan(uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), uintptr(os.Getpagesize()))
	if max := d.MaxBufferLength(); max > 0 && uint64(length) > max {
		return nil, 0, fmt.Errorf("mtl: no-copy buffer of %d bytes is over the device's maximum of %d", length, max)
	}
	id := msgIDAddrU64x2ID(d.id, selNewBufferNoCpy, start, uint64(length), uint64(StorageModeShared), 0)
	if id == 0 {
		return nil, 0, fmt.Errorf("mtl: newBufferWithBytesNoCopy of %d bytes at %#x refused", length, start)
	}
	b, err := d.buffer(id, int(length), "newBufferWithBytesNoCopy")
	if err != nil {
		return nil, 0, err
	}
	b.keep = data
	return b, int(off), nil
}

// Library is an id<MTLLibrary> with its compute pipelines by function name.
type Library struct {
	dev   *Device
	id    objc.ID
	mu    sync.Mutex
	pipes map[string]*Pipeline
}

// CompileOptions are the MTLCompileOptions this package sets.
type CompileOptions struct {
	// FastMath lets the compiler assume no NaN or infinity and use the fast,
	// less accurate forms of exp, sin, cos and division (Metal's default).
	// Kernels checked against the CPU's f32 arithmetic want it off.
	FastMath bool
}

// NewLibrary compiles MSL source. A compile error carries the compiler's
// message (the NSError's localizedDescription, with file:line:column of
// each error); warnings alone do not fail.
func (d *Device) NewLibrary(source string, opts CompileOptions) (*Library, error) {
	if d == nil || d.id == 0 {
		return nil, ErrReleased
	}
	lib := &Library{dev: d, pipes: map[string]*Pipeline{}}
	err := WithPool(func() error {
		src, err := nsString(source)
		if err != nil {
			return err
		}
		defer release(src)
		co := msgID(msgID(objc.ID(objc.GetClass("MTLCompileOptions")), selAlloc), selInit)
		if co == 0 {
			return errors.New("mtl: making MTLCompileOptions failed")
		}
		defer release(co)
		msgVoidBool(co, selSetFastMath, opts.FastMath)
		var nserr objc.ID
		lib.id = msgIDIDIDErr(d.id, selNewLibrary, src, co, &nserr)
		if lib.id == 0 {
			return fmt.Errorf("mtl: compiling %d bytes of MSL: %s", len(source), errorText(nserr))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return lib, nil
}

// Pipeline is an id<MTLComputePipelineState> for one kernel function.
type Pipeline struct {
	id   objc.ID
	name string
	// MaxThreads is maxTotalThreadsPerThreadgroup: the most threads one
	// threadgroup of this kernel may have (its register use can lower it
	// below the device's 1024).
	MaxThreads int
	// ExecWidth is threadExecutionWidth: the SIMD-group width (32 on Apple
	// GPUs).
	ExecWidth int
	// StaticShared is the threadgroup memory the kernel declares itself.
	StaticShared int
}

// Name is the kernel function's name.
func (p *Pipeline) Name() string { return p.name }

// Pipeline returns the compute pipeline of the kernel function name,
// creating it on first use.
func (l *Library) Pipeline(name string) (*Pipeline, error) {
	if l == nil || l.id == 0 {
		return nil, ErrReleased
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.pipes[name]; p != nil {
		return p, nil
	}
	p := &Pipeline{name: name}
	err := WithPool(func() error {
		str, err := nsString(name)
		if err != nil {
			return err
		}
		defer release(str)
		fn := msgIDID(l.id, selNewFunction, str)
		if fn == 0 {
			return fmt.Errorf("mtl: no kernel function %q in the library", name)
		}
		defer release(fn)
		var nserr objc.ID
		p.id = msgIDIDErr(l.dev.id, selNewPipeline, fn, &nserr)
		if p.id == 0 {
			return fmt.Errorf("mtl: pipeline for kernel %q: %s", name, errorText(nserr))
		}
		p.MaxThreads = int(msgU64(p.id, selMaxThreads))
		p.ExecWidth = int(msgU64(p.id, selExecWidth))
		p.StaticShared = int(msgU64(p.id, selStaticTGMemory))
		return nil
	})
	if err != nil {
		return nil, err
	}
	l.pipes[name] = p
	return p, nil
}

// Release releases the library and its pipelines.
func (l *Library) Release() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.pipes {
		release(p.id)
		p.id = 0
	}
	l.pipes = map[string]*Pipeline{}
	release(l.id)
	l.id = 0
}
