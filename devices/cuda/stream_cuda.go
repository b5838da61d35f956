//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"hybrid/devices"
	"hybrid/ops"
)

var _ devices.WeightStreamer = (*Device)(nil)

// streamSlots are the device memory StreamWeight copies weights into: two
// slots used in turn, each grown to the largest weight it has held, and the
// weight each holds.
type streamSlots struct {
	ptr    [2]dptr
	size   [2]int64
	name   [2]string
	next   int
	warned bool // a registration failed, and it was said
	// pinned holds, per weight streamed, the whole pages of its bytes
	// registered with the driver (pinned), or a failed registration.
	pinned map[string]pinnedRange
}

// pinnedRange is the part of a weight's host bytes, from off for n bytes,
// that is registered (page-locked) at p; n is 0 where it is not.
type pinnedRange struct {
	p      unsafe.Pointer
	off, n int
}

// minPinned is the smallest weight whose bytes are pinned for streaming:
// below it the staged copy costs less than registering.
const minPinned = 1 << 20

// pin registers the whole pages inside data, the bytes of weight name,
// once (device thread only). Pages shared with a neighbouring weight stay
// out, so that no page is registered twice; a failed registration is kept
// as such and the weight goes through the staging buffer.
func (d *Device) pin(name string, data []byte) pinnedRange {
	s := &d.slots2
	if r, ok := s.pinned[name]; ok {
		return r
	}
	if s.pinned == nil {
		s.pinned = map[string]pinnedRange{}
	}
	var r pinnedRange
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	lo, hi := (start+page-1)&^(page-1), (start+uintptr(len(data)))&^(page-1)
	if len(data) >= minPinned && hi > lo {
		p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(data)), lo-start)
		if err := hostRegister(p, int64(hi-lo)); err == nil {
			r = pinnedRange{p: p, off: int(lo - start), n: int(hi - lo)}
		} else if !s.warned {
			s.warned = true
			fmt.Fprintf(os.Stderr, "cuda: %s: streamed weights go through the staging buffer: %v\n", d.name, err)
		}
	}
	s.pinned[name] = r
	return r
}

// unpin releases every registration of pin (device thread only).
func (d *Device) unpin() error {
	var errs []error
	for _, r := range d.slots2.pinned {
		if r.n > 0 {
			errs = append(errs, hostUnregister(r.p))
		}
	}
	d.slots2.pinned = nil
	return errors.Join(errs...)
}

// StreamWeight implements devices.WeightStreamer: the weight's bytes go
// through the pinned staging buffer into the next of two slots, after the
// ops queued before it have been launched; the copy is on the legacy
// stream, which waits for the kernels already on the device's stream, so a
// slot is not overwritten while an op reads it. The weight is then what
// ops Run after it read, until the slot is used again two calls later.
// A weight resident here (LoadWeight) is left as it is.
func (d *Device) StreamWeight(w *ops.Weight, data []byte) error {
	d.wmu.Lock()
	cur, ok := d.weights[w.Name]
	d.wmu.Unlock()
	if ok && !cur.streamed {
		return nil
	}
	res, up, err := hostWeight(w, data)
	if err != nil {
		return err
	}
	// The caller's bytes themselves (a mapped file's), not a converted copy,
	// may be pinned.
	same := len(up) == len(data) && unsafe.SliceData(up) == unsafe.SliceData(data)
	data = up
	res.streamed = true
	return d.do(func() error {
		s := &d.slots2
		k := s.next
		s.next = 1 - k
		// The slot's last weight is gone from it (while its pointer still
		// tells it from a later copy of the same weight in the other slot).
		d.wmu.Lock()
		if old := s.name[k]; old != "" {
			if ow := d.weights[old]; ow != nil && ow.streamed && ow.ptr == s.ptr[k] {
				delete(d.weights, old)
			}
		}
		s.name[k] = ""
		d.wmu.Unlock()
		if need := int64(len(data)) + 16; s.size[k] < need {
			if s.ptr[k] != 0 {
				if err := d.release(s.ptr[k]); err != nil {
					return err
				}
				s.ptr[k], s.size[k] = 0, 0
			}
			p, err := d.alloc(need)
			if err != nil {
				return fmt.Errorf("cuda: streaming weight %s: %w", w.Name, err)
			}
			s.ptr[k], s.size[k] = p, need
		}
		if err := d.streamUpload(w.Name, s.ptr[k], data, same); err != nil {
			return fmt.Errorf("cuda: streaming weight %s: %w", w.Name, err)
		}
		res.ptr = s.ptr[k]
		d.wmu.Lock()
		d.weights[w.Name] = res
		s.name[k] = w.Name
		d.wmu.Unlock()
		return nil
	})
}

// streamUpload copies a weight's bytes to p (device thread only): the part
// pin registers straight from it, at the link's rate, the rest through the
// staging buffer. own says data is the caller's own bytes, which may be
// pinned.
func (d *Device) streamUpload(name string, p dptr, data []byte, own bool) error {
	var r pinnedRange
	if own {
		r = d.pin(name, data)
	}
	if r.n == 0 {
		return d.upload(p, data)
	}
	if err := d.upload(p, data[:r.off]); err != nil {
		return err
	}
	if err := memcpyHtoD(p+dptr(r.off), r.p, int64(r.n)); err != nil {
		return err
	}
	return d.upload(p+dptr(r.off+r.n), data[r.off+r.n:])
}
