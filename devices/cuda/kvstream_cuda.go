//go:build cuda

package cuda

import (
	"fmt"
	"unsafe"

	"hybrid/devices"
	"hybrid/ops"
)

var _ devices.KVStreamer = (*Device)(nil)

// kvStream is the cache StreamKV gives the next attention of one op: the
// sequence's cells from 0, not the layer's resident cache (a layer whose
// cache lives in host memory, attending here for a prompt's step). Its
// keys and values lie in the two streaming slots (StreamWeight's), which no
// op reads while attention runs (the weights streamed before it were the
// projections' it reads), so a streamed cache costs no memory where the
// slots already hold a weight the size of its cells.
type kvStream struct {
	op    string   // the attention op it is for; "" once launched
	cache *kvCache // in the slots: keys in the first, values in the second
	pos   int      // cells before the step
	n     int      // cells the step appended (after the launch)
}

// StreamKV implements devices.KVStreamer: the cells before the step go
// through the pinned staging buffer into the streaming slots, after the ops
// queued before it.
func (d *Device) StreamKV(op *ops.Op, st ops.Step, k, v []uint16) error {
	if op.Kind != ops.Attention || st.Rows != nil {
		return fmt.Errorf("cuda: op %s: a KV cache is streamed for a prompt's attention only", op)
	}
	a := op.Attn
	dim := a.KVHeads * a.HeadDim
	cells := st.Pos + len(st.Tokens)
	if st.Pos < 0 || cells > a.Context || len(k) != st.Pos*dim || len(v) != len(k) {
		return fmt.Errorf("cuda: op %s: %d and %d streamed KV elements for %d cells before a step of %d in a context of %d", op, len(k), len(v), st.Pos, len(st.Tokens), a.Context)
	}
	return d.do(func() error {
		s := &d.kvs
		for i := range 2 {
			if err := d.takeSlot(i, 2*int64(cells*dim)); err != nil {
				return fmt.Errorf("cuda: op %s: streamed KV cache: %w", op, err)
			}
		}
		s.cache = &kvCache{k: d.slots2.ptr[0], v: d.slots2.ptr[1], ctx: cells, dim: dim}
		if err := d.attScratch(a); err != nil {
			return err
		}
		if len(k) > 0 {
			if err := d.upload(s.cache.k, u16Bytes(k)); err != nil {
				return fmt.Errorf("cuda: op %s: streaming its KV cache in: %w", op, err)
			}
			if err := d.upload(s.cache.v, u16Bytes(v)); err != nil {
				return fmt.Errorf("cuda: op %s: streaming its KV cache in: %w", op, err)
			}
		}
		s.op, s.pos, s.n = op.Name, st.Pos, 0
		return nil
	})
}

// StreamedKV implements devices.KVStreamer: the step's cells, after its
// attention, through the pinned staging buffer.
func (d *Device) StreamedKV(op *ops.Op, st ops.Step, k, v []uint16) error {
	n := len(st.Tokens)
	return d.do(func() error {
		s := &d.kvs
		if s.cache == nil || s.op != "" || s.n != n || s.pos != st.Pos || len(k) != n*s.cache.dim || len(v) != len(k) {
			return fmt.Errorf("cuda: op %s: no streamed KV cells of a step of %d at %d to copy out", op, n, st.Pos)
		}
		off := dptr(2 * s.pos * s.cache.dim)
		for _, part := range []struct {
			dst []uint16
			src dptr
		}{{k, s.cache.k + off}, {v, s.cache.v + off}} {
			b := u16Bytes(part.dst)
			st, err := d.staging(len(b))
			if err != nil {
				return err
			}
			if err := memcpyDtoH(d.stage, part.src, int64(len(b))); err != nil {
				return fmt.Errorf("cuda: op %s: streaming its KV cells out: %w", op, err)
			}
			copy(b, st)
		}
		s.n = 0
		// The next weights copied into the slots wait for this attention.
		if err := d.copyStream(); err != nil {
			return err
		}
		if err := d.slotRead(0); err != nil {
			return err
		}
		return d.slotRead(1)
	})
}

// u16Bytes is s's memory as bytes.
func u16Bytes(s []uint16) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 2*len(s))
}
