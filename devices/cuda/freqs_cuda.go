//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"hybrid/ops"
)

// Rope frequency factors (Llama 3.1+, ops.RopeParams.Freqs) live on the GPU
// for the rope kernels to read. Every RoPE op of a graph shares one slice, so
// a model uploads its factors once: Run uploads a set the first time it sees
// it, keyed by its bytes (a slice's address could be reused by another set
// once the first is collected), and the copy stays until Close.

// maxFreqs bounds the distinct sets of factors a device keeps (a model has
// one).
const maxFreqs = 64

// freqBytes is f's bytes, the key of its copy.
func freqBytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}

// uploadFreqs makes sure op's frequency factors, if it has any, are on the
// GPU. It runs on the caller's side of Run, before the op is queued: the
// upload goes through the device's thread (after the ops queued before it)
// and never inside a captured graph.
func (d *Device) uploadFreqs(op *ops.Op) error {
	if op.Kind != ops.RoPE || op.Rope.Freqs == nil {
		return nil
	}
	key := freqBytes(op.Rope.Freqs)
	if key == nil {
		return nil
	}
	d.wmu.Lock()
	_, ok := d.freqs[string(key)]
	n := len(d.freqs)
	d.wmu.Unlock()
	if ok {
		return nil
	}
	if n >= maxFreqs {
		return fmt.Errorf("cuda: op %s: more than %d distinct sets of rope frequency factors", op, maxFreqs)
	}
	return d.do(func() error {
		p, err := d.alloc(int64(len(key)), memScratch)
		if err != nil {
			return fmt.Errorf("cuda: op %s: rope frequency factors: %w", op, err)
		}
		if err := d.upload(p, key); err != nil {
			return errors.Join(fmt.Errorf("cuda: op %s: rope frequency factors: upload: %w", op, err), d.release(p))
		}
		d.wmu.Lock()
		if d.freqs == nil {
			d.freqs = map[string]dptr{}
		}
		d.freqs[string(key)] = p
		d.wmu.Unlock()
		return nil
	})
}

// freqsOf returns the GPU address of r's frequency factors, 0 where it has
// none (device thread only; Run uploaded them).
func (d *Device) freqsOf(r ops.RopeParams) (dptr, error) {
	key := freqBytes(r.Freqs)
	if key == nil {
		return 0, nil
	}
	d.wmu.Lock()
	p, ok := d.freqs[string(key)]
	d.wmu.Unlock()
	if !ok {
		return 0, errors.New("rope frequency factors were not uploaded")
	}
	return p, nil
}

// b2i is a kernel's int flag.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
