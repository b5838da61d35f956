//go:build darwin

package mtl

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/ebitengine/purego/objc"
)

// Queue is an id<MTLCommandQueue>.
type Queue struct {
	id objc.ID
}

// NewQueue makes a command queue; its command buffers run in the order they
// are committed.
func (d *Device) NewQueue() (*Queue, error) {
	if d == nil || d.id == 0 {
		return nil, ErrReleased
	}
	id := msgID(d.id, selNewQueue)
	if id == 0 {
		return nil, errors.New("mtl: newCommandQueue failed")
	}
	return &Queue{id: id}, nil
}

// Release releases the queue.
func (q *Queue) Release() {
	if q != nil {
		release(q.id)
		q.id = 0
	}
}

// CommandBuffer is an id<MTLCommandBuffer>, retained: it outlives the
// autorelease pool it was made in, so that one can collect the kernels of
// several calls before it is committed.
type CommandBuffer struct {
	id objc.ID
}

// CommandBuffer makes a command buffer that holds strong references to the
// resources its commands use.
func (q *Queue) CommandBuffer() (*CommandBuffer, error) {
	if q == nil || q.id == 0 {
		return nil, ErrReleased
	}
	cb := &CommandBuffer{}
	err := WithPool(func() error {
		cb.id = msgID(q.id, selCommandBuffer)
		if cb.id == 0 {
			return errors.New("mtl: commandBuffer failed")
		}
		msgID(cb.id, selRetain)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return cb, nil
}

// Encoder makes a compute command encoder on the command buffer. Its
// dispatches run one after another, each seeing the memory writes of the
// ones before (the default, serial dispatch type), which is what a chain of
// ops reading each other's outputs needs.
func (cb *CommandBuffer) Encoder() (*Encoder, error) {
	if cb == nil || cb.id == 0 {
		return nil, ErrReleased
	}
	e := &Encoder{}
	err := WithPool(func() error {
		e.id = msgID(cb.id, selComputeEncoder)
		if e.id == 0 {
			return errors.New("mtl: computeCommandEncoder failed")
		}
		msgID(e.id, selRetain)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Commit sends the command buffer to the GPU.
func (cb *CommandBuffer) Commit() error {
	if cb == nil || cb.id == 0 {
		return ErrReleased
	}
	msgVoid(cb.id, selCommit)
	return nil
}

// Wait blocks until the GPU has finished the command buffer, and returns
// its error if it failed.
func (cb *CommandBuffer) Wait() error {
	if cb == nil || cb.id == 0 {
		return ErrReleased
	}
	msgVoid(cb.id, selWait)
	return cb.Err()
}

// Status is the command buffer's stage.
func (cb *CommandBuffer) Status() CommandBufferStatus {
	if cb == nil || cb.id == 0 {
		return StatusNotEnqueued
	}
	return CommandBufferStatus(msgU64(cb.id, selStatus))
}

// Err is the command buffer's error (nil unless its status is error): the
// GPU's reason, such as a fault or a timeout, in Metal's words.
func (cb *CommandBuffer) Err() error {
	if cb == nil || cb.id == 0 {
		return ErrReleased
	}
	var err error
	WithPool(func() error {
		nserr := msgID(cb.id, selError)
		if st := cb.Status(); nserr != 0 || st == StatusError {
			err = fmt.Errorf("mtl: command buffer %s: %s", st, errorText(nserr))
		}
		return nil
	})
	return err
}

// GPUTime is the time the GPU spent on the command buffer (GPUEndTime −
// GPUStartTime), once it has completed.
func (cb *CommandBuffer) GPUTime() time.Duration {
	if cb == nil || cb.id == 0 {
		return 0
	}
	return GPUDuration(msgF64(cb.id, selGPUStart), msgF64(cb.id, selGPUEnd))
}

// Release releases the command buffer.
func (cb *CommandBuffer) Release() {
	if cb != nil {
		release(cb.id)
		cb.id = 0
	}
}

// Encoder is an id<MTLComputeCommandEncoder>, retained. It checks what
// Metal would otherwise fail on or crash with (no pipeline set, too many
// threads for the kernel, too much threadgroup memory, over 4 KiB of inline
// bytes) and returns a Go error instead.
type Encoder struct {
	id    objc.ID
	pipe  *Pipeline
	ended bool
}

// MaxInlineBytes is the most setBytes may pass (Metal's limit for inline
// constant data).
const MaxInlineBytes = 4096

func (e *Encoder) live() error {
	if e == nil || e.id == 0 {
		return ErrReleased
	}
	if e.ended {
		return errors.New("mtl: encoder already ended")
	}
	return nil
}

// SetPipeline sets the kernel the next dispatches run.
func (e *Encoder) SetPipeline(p *Pipeline) error {
	if err := e.live(); err != nil {
		return err
	}
	if p == nil || p.id == 0 {
		return fmt.Errorf("mtl: set pipeline: %w", ErrReleased)
	}
	msgVoidID(e.id, selSetPipeline, p.id)
	e.pipe = p
	return nil
}

// SetBuffer binds b at byte offset off to buffer argument index.
func (e *Encoder) SetBuffer(b *Buffer, off int, index int) error {
	if err := e.live(); err != nil {
		return err
	}
	if b == nil || b.id == 0 {
		return fmt.Errorf("mtl: set buffer %d: %w", index, ErrReleased)
	}
	if off < 0 || off > b.length || index < 0 || index > 30 {
		return fmt.Errorf("mtl: set buffer %d at offset %d of a buffer of %d bytes", index, off, b.length)
	}
	msgVoidIDU64x2(e.id, selSetBuffer, b.id, uint64(off), uint64(index))
	return nil
}

// SetBytes copies data into the command stream as buffer argument index.
func (e *Encoder) SetBytes(data []byte, index int) error {
	if err := e.live(); err != nil {
		return err
	}
	if len(data) == 0 || len(data) > MaxInlineBytes || index < 0 || index > 30 {
		return fmt.Errorf("mtl: set %d inline bytes at index %d (1..%d allowed)", len(data), index, MaxInlineBytes)
	}
	msgVoidPtrU64x2(e.id, selSetBytes, unsafe.Pointer(&data[0]), uint64(len(data)), uint64(index))
	return nil
}

// SetThreadgroupMemory reserves n bytes of threadgroup memory for
// threadgroup argument index (Metal wants a multiple of 16; n is rounded up).
func (e *Encoder) SetThreadgroupMemory(n, index int, limit int) error {
	if err := e.live(); err != nil {
		return err
	}
	n = (n + 15) &^ 15
	if n <= 0 || (limit > 0 && n > limit) {
		return fmt.Errorf("mtl: %d bytes of threadgroup memory (limit %d)", n, limit)
	}
	msgVoidU64(e.id, selSetTGMemory, uint64(n), uint64(index))
	return nil
}

// Dispatch runs the current kernel on groups threadgroups of threads each.
func (e *Encoder) Dispatch(groups, threads Size) error {
	if err := e.live(); err != nil {
		return err
	}
	if e.pipe == nil {
		return errors.New("mtl: dispatch with no pipeline set")
	}
	if groups.Count() == 0 || threads.Count() == 0 {
		return fmt.Errorf("mtl: %s: empty dispatch %v × %v", e.pipe.name, groups, threads)
	}
	if int(threads.Count()) > e.pipe.MaxThreads {
		return fmt.Errorf("mtl: %s: %v = %d threads per threadgroup, over the kernel's maximum of %d", e.pipe.name, threads, threads.Count(), e.pipe.MaxThreads)
	}
	msgVoidSize2(e.id, selDispatch, groups, threads)
	return nil
}

// End ends encoding; the command buffer can then be committed.
func (e *Encoder) End() error {
	if err := e.live(); err != nil {
		return err
	}
	msgVoid(e.id, selEndEncoding)
	e.ended = true
	return nil
}

// Release releases the encoder (ending it first if needed: Metal requires
// endEncoding before an encoder is deallocated).
func (e *Encoder) Release() {
	if e == nil || e.id == 0 {
		return
	}
	if !e.ended {
		msgVoid(e.id, selEndEncoding)
		e.ended = true
	}
	release(e.id)
	e.id = 0
}
