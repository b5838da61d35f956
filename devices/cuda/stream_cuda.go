//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"hybrid/devices"
	"hybrid/ops"
	"hybrid/quant"
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
	// The copies run on a stream of their own, so that a weight's copy
	// overlaps the kernels before the op that reads it: free[k] marks the
	// point of the device's stream after which nothing reads slot k (its
	// reader launched), ready[k] the end of slot k's copy on the copy
	// stream, which the device's stream waits for. edge[k] is slot k's
	// pinned host buffer for the bytes not pinned in place.
	copy            stream
	free, ready     [2]event
	freeOK, readyOK [2]bool
	edge            [2]unsafe.Pointer
	nedge           [2]int
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

// syncStream (HYBRID_CUDA_STREAM_SYNC=1) makes each streamed weight's copy
// wait for every kernel queued before it and the host wait for the copy,
// as before the copy stream: to measure what the overlap gains.
var syncStream = os.Getenv("HYBRID_CUDA_STREAM_SYNC") == "1"

// StreamWeight implements devices.WeightStreamer: the weight's bytes are
// copied into the next of two slots on the copy stream, after the op that
// read the slot's last weight (two calls ago) and while the kernels queued
// since run; the ops Run after it wait for the copy on the device's stream.
// The weight is then what ops Run after it read, until the slot is used
// again two calls later. A weight resident here (LoadWeight) is left as it
// is.
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
		if err := d.copyStream(); err != nil {
			return err
		}
		k := s.next
		s.next = 1 - k
		// The queue was flushed: the reader of slot 1-k's weight is
		// launched, and a later copy into that slot waits for it.
		if err := d.slotRead(1 - k); err != nil {
			return err
		}
		if syncStream {
			if err := d.slotRead(k); err != nil {
				return err
			}
		}
		if err := d.takeSlot(k, int64(res.rowBytes*w.Rows)+16); err != nil {
			return fmt.Errorf("cuda: streaming weight %s: %w", w.Name, err)
		}
		if err := d.streamRows(k, w.Name, data, w.Rows, rb, res.rowBytes, res.typ, res.regroup, up); err != nil {
			return fmt.Errorf("cuda: streaming weight %s: %w", w.Name, err)
		}
		if syncStream {
			if err := s.ready[k].sync(); err != nil {
				return err
			}
		}
		res.ptr = s.ptr[k]
		d.wmu.Lock()
		d.weights[w.Name] = res
		d.wgen++
		s.name[k] = w.Name
		d.wmu.Unlock()
		return nil
	})
}

// copyStream makes the copy stream and the slots' events, once (device
// thread only).
func (d *Device) copyStream() error {
	s := &d.slots2
	if s.copy.s != nil {
		return nil
	}
	var err error
	if s.copy, err = newStream(); err != nil {
		return err
	}
	for k := range 2 {
		if s.free[k], err = newEvent(); err != nil {
			return err
		}
		if s.ready[k], err = newEvent(); err != nil {
			return err
		}
	}
	return nil
}

// slotRead marks the work queued on the device's stream so far as the last
// that reads slot k (device thread only): its next copy waits for it.
func (d *Device) slotRead(k int) error {
	s := &d.slots2
	if s.copy.s == nil {
		return nil
	}
	if err := s.free[k].record(d.stream); err != nil {
		return err
	}
	s.freeOK[k] = true
	return nil
}

// freeSlots releases the copy stream, the events and the pinned edge
// buffers (device thread only, after a synchronize).
func (d *Device) freeSlots() {
	s := &d.slots2
	for k := range 2 {
		s.free[k].destroy()
		s.ready[k].destroy()
		hostFree(s.edge[k])
	}
	s.copy.destroy()
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
			d.wgen++
		}
	}
	s.name[k] = ""
	d.wmu.Unlock()
	if s.size[k] >= need {
		return nil
	}
	if s.ptr[k] != 0 {
		// A kernel or a copy may still use it.
		if err := synchronize(); err != nil {
			return err
		}
		if err := d.release(s.ptr[k]); err != nil {
			return err
		}
		s.ptr[k], s.size[k] = 0, 0
	}
	p, err := d.alloc(need, memSlot)
	if err != nil {
		return err
	}
	s.ptr[k], s.size[k] = p, need
	return nil
}

// streamRows queues slot k's copy of a weight's rows, rb bytes each at
// data, to the slot with a stride of pitch bytes, then, for a norm, its f32
// row up over them, on the copy stream after the slot's last reader, and
// records ready[k] (device thread only). The rows inside the pages pin
// registers go straight from there, at the link's rate; the others, and
// up, through the slot's pinned edge buffer, each row padded with zeros.
// Rows to regroup (regroup: regroupRow, rows of type t) all go through the
// edge buffer, regrouped there.
func (d *Device) streamRows(k int, name string, data []byte, rows, rb, pitch int, t quant.Type, regroup bool, up []byte) error {
	s := &d.slots2
	lo, hi := 0, 0 // the rows wholly inside the pinned pages
	if !regroup {
		if r := d.pin(name, data); r.n > 0 {
			lo, hi = (r.off+rb-1)/rb, (r.off+r.n)/rb
		}
	}
	if hi <= lo {
		lo, hi = rows, rows // none: all through the edge buffer
	}
	// The edge buffer's last copy is done before it is written again.
	if s.readyOK[k] {
		if err := s.ready[k].sync(); err != nil {
			return err
		}
	}
	need := (lo+rows-hi)*pitch + len(up)
	if need > s.nedge[k] {
		hostFree(s.edge[k])
		s.edge[k], s.nedge[k] = nil, 0
		p, err := hostAlloc(max(need, 1<<20))
		if err != nil {
			return err
		}
		s.edge[k], s.nedge[k] = p, max(need, 1<<20)
	}
	edge := unsafe.Slice((*byte)(s.edge[k]), s.nedge[k])
	if s.freeOK[k] {
		if err := s.copy.wait(s.free[k]); err != nil {
			return err
		}
	}
	p := s.ptr[k]
	off := 0
	// through copies rows [r0, r1) through the edge buffer.
	through := func(r0, r1 int) error {
		if r1 <= r0 {
			return nil
		}
		n := (r1 - r0) * pitch
		for r := r0; r < r1; r++ {
			o := off + (r-r0)*pitch
			if regroup {
				if err := guarded(func() { regroupRow(edge[o:o+pitch], data[r*rb:(r+1)*rb], t) }); err != nil {
					return err
				}
				continue
			}
			if err := copyGuarded(edge[o:o+rb], data[r*rb:(r+1)*rb]); err != nil {
				return err
			}
			clear(edge[o+rb : o+pitch])
		}
		err := s.copy.copyHtoD(p+dptr(r0*pitch), unsafe.Pointer(&edge[off]), n)
		off += n
		return err
	}
	if err := through(0, lo); err != nil {
		return err
	}
	if hi > lo {
		src := unsafe.Pointer(&data[lo*rb])
		var err error
		if pitch == rb {
			err = s.copy.copyHtoD(p+dptr(lo*pitch), src, (hi-lo)*rb)
		} else {
			err = s.copy.copyHtoD2D(p+dptr(lo*pitch), pitch, src, rb, rb, hi-lo)
		}
		if err != nil {
			return err
		}
	}
	if err := through(hi, rows); err != nil {
		return err
	}
	if len(up) > 0 {
		copy(edge[off:], up)
		if err := s.copy.copyHtoD(p, unsafe.Pointer(&edge[off]), len(up)); err != nil {
			return err
		}
	}
	if err := s.ready[k].record(s.copy); err != nil {
		return err
	}
	s.readyOK[k] = true
	return d.stream.wait(s.ready[k])
}
