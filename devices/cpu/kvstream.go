package cpu

import (
	"fmt"

	"hybrid/devices"
	"hybrid/ops"
)

var (
	_ devices.KVHost     = (*Device)(nil)
	_ devices.KVStreamer = (*Device)(nil)
)

// streamedKV is the cache StreamKV gives the next attention of one op: the
// sequence's cells from 0, its own, not the layer's resident cache.
type streamedKV struct {
	op    string   // the attention op it is for; "" once used
	cache *kvCache // grown to the longest sequence streamed
	pos   int      // cells before the step
	n     int      // cells the step appended (after the Run)
}

// KVCells implements devices.KVHost: the layer's cells in place.
func (d *Device) KVCells(op *ops.Op, cell, n int) (k, v []uint16, err error) {
	if op.Kind != ops.Attention {
		return nil, nil, fmt.Errorf("cpu: op %s has no KV cache", op)
	}
	a := op.Attn
	if cell < 0 || n < 0 || cell+n > a.Context {
		return nil, nil, fmt.Errorf("cpu: op %s: KV cells %d..%d outside its context of %d", op, cell, cell+n, a.Context)
	}
	c := d.cache(op.Layer, a)
	lo, hi := cell*c.dim, (cell+n)*c.dim
	return c.k[lo:hi], c.v[lo:hi], nil
}

// StreamKV implements devices.KVStreamer: the next attention of op attends
// over a cache of its own, k and v in its first cells.
func (d *Device) StreamKV(op *ops.Op, st ops.Step, k, v []uint16) error {
	if op.Kind != ops.Attention || st.Rows != nil {
		return fmt.Errorf("cpu: op %s: a KV cache is streamed for a prompt's attention only", op)
	}
	a := op.Attn
	dim := a.KVHeads * a.HeadDim
	if st.Pos < 0 || st.Pos+len(st.Tokens) > a.Context || len(k) != st.Pos*dim || len(v) != len(k) {
		return fmt.Errorf("cpu: op %s: %d and %d streamed KV elements for %d cells before a step of %d in a context of %d", op, len(k), len(v), st.Pos, len(st.Tokens), a.Context)
	}
	if err := d.flush(); err != nil {
		return err
	}
	s := &d.kvs
	if s.cache == nil || s.cache.dim != dim || len(s.cache.k) < a.Context*dim {
		d.mu.Lock()
		if s.cache != nil {
			d.mem -= 4 * int64(len(s.cache.k))
		}
		s.cache = &kvCache{k: make([]uint16, a.Context*dim), v: make([]uint16, a.Context*dim), dim: dim}
		d.mem += 4 * int64(a.Context*dim)
		d.mu.Unlock()
	}
	copy(s.cache.k, k)
	copy(s.cache.v, v)
	s.op, s.pos, s.n = op.Name, st.Pos, 0
	return nil
}

// StreamedKV implements devices.KVStreamer.
func (d *Device) StreamedKV(op *ops.Op, st ops.Step, k, v []uint16) error {
	s := &d.kvs
	n := len(st.Tokens)
	if s.cache == nil || s.op != "" || s.n != n || s.pos != st.Pos || len(k) != n*s.cache.dim || len(v) != len(k) {
		return fmt.Errorf("cpu: op %s: no streamed KV cells of a step of %d at %d to copy out", op, n, st.Pos)
	}
	lo := s.pos * s.cache.dim
	copy(k, s.cache.k[lo:])
	copy(v, s.cache.v[lo:])
	s.n = 0
	return nil
}
