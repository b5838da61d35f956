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
	start := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	if r, ok := s.pinned[name]; ok {
		if r.n == 0 || uintptr(r.p) == start+uintptr(r.off) {
			return r
		}
		// Other bytes under the same name: pinned afresh.
		if err := hostUnregister(r.p); err != nil {
			return pinnedRange{}
		}
	}
	if s.pinned == nil {
		s.pinned = map[string]pinnedRange{}
	}
	var r pinnedRange
	page := uintptr(os.Getpagesize())
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
	res, rb, err := weightLayout(w, data)
	if err != nil {
		return err
	}
	res.streamed = true
	var up []byte // a norm's row, as f32
	if w.Rows == 1 {
		if up, err = hostBytes(res, rb, data); err != nil {
			return err
		}
	}
	return d.do(func() error {
		s := &d.slots2
		k := s.next
		s.next = 1 - k
		if err := d.takeSlot(k, int64(res.rowBytes*w.Rows)+16); err != nil {
			return fmt.Errorf("cuda: streaming weight %s: %w", w.Name, err)
		}
		err := d.streamRows(w.Name, s.ptr[k], data, w.Rows, rb, res.rowBytes)
		if up != nil {
			err = d.upload(s.ptr[k], up)
		}
		if err != nil {
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

// takeSlot empties streaming slot k of its weight and grows it to need
// bytes (device thread only). The slot's last weight is gone from it (while
// its pointer still tells it from a later copy of the same weight in the
// other slot).
func (d *Device) takeSlot(k int, need int64) error {
	s := &d.slots2
	d.wmu.Lock()
	if old := s.name[k]; old != "" {
		if ow := d.weights[old]; ow != nil && ow.streamed && ow.ptr == s.ptr[k] {
			delete(d.weights, old)
		}
	}
	s.name[k] = ""
	d.wmu.Unlock()
	if s.size[k] >= need {
		return nil
	}
	if s.ptr[k] != 0 {
		if err := d.release(s.ptr[k]); err != nil {
			return err
		}
		s.ptr[k], s.size[k] = 0, 0
	}
	p, err := d.alloc(need)
	if err != nil {
		return err
	}
	s.ptr[k], s.size[k] = p, need
	return nil
}

// streamRows copies a weight's rows, rb bytes each at data, to p with a
// stride of pitch bytes (device thread only): the rows inside the pages pin
// registers straight from there, at the link's rate, the others through
// the staging buffer.
func (d *Device) streamRows(name string, p dptr, data []byte, rows, rb, pitch int) error {
	r := d.pin(name, data)
	lo, hi := 0, 0 // the rows wholly inside the pinned pages
	if r.n > 0 {
		lo, hi = (r.off+rb-1)/rb, (r.off+r.n)/rb
	}
	if hi <= lo {
		return d.uploadPadded(p, data, rows, rb, pitch)
	}
	if err := d.uploadPadded(p, data[:lo*rb], lo, rb, pitch); err != nil {
		return err
	}
	src := unsafe.Pointer(&data[lo*rb])
	var err error
	if pitch == rb {
		err = memcpyHtoD(p+dptr(lo*pitch), src, int64((hi-lo)*rb))
	} else {
		err = memcpyHtoD2D(p+dptr(lo*pitch), pitch, src, rb, rb, hi-lo)
	}
	if err != nil {
		return err
	}
	return d.uploadPadded(p+dptr(hi*pitch), data[hi*rb:], rows-hi, rb, pitch)
}

// uploadPadded is upload of rows of rb bytes into a stride of pitch, through
// the staging buffer, the bytes past each row zero.
func (d *Device) uploadPadded(p dptr, data []byte, rows, rb, pitch int) error {
	if pitch == rb {
		return d.upload(p, data)
	}
	per := max(1, uploadChunk/pitch)
	for r0 := 0; r0 < rows; r0 += per {
		n := min(per, rows-r0)
		s, err := d.staging(n * pitch)
		if err != nil {
			return err
		}
		for r := range n {
			if err := copyGuarded(s[r*pitch:r*pitch+rb], data[(r0+r)*rb:(r0+r+1)*rb]); err != nil {
				return err
			}
			clear(s[r*pitch+rb : (r+1)*pitch])
		}
		if err := memcpyHtoD(p+dptr(r0*pitch), d.stage, int64(n*pitch)); err != nil {
			return err
		}
	}
	return nil
}
