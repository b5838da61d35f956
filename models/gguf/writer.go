package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"hybrid/internal/atomicfile"
)

// Writer writes a GGUF v3 file. The metadata and tensor infos are fixed when
// it is made; the caller then writes the tensors' data in the order the infos
// were given, with Write (in pieces of any size, as io.Copy would) or
// WriteTensor (one whole tensor), and finally calls Close. The writer inserts
// the alignment padding, so only one tensor, or one piece of one, need be in
// memory at a time.
//
// Tensor offsets are computed from the sizes (each tensor padded to the
// alignment, as llama.cpp lays files out); the Offset fields of the infos
// given are ignored. The alignment is general.alignment when the metadata has
// it, else DefaultAlignment.
type Writer struct {
	// Progress, if not nil, is called after each write with the bytes
	// written so far and the size of the whole file.
	Progress func(done, total int64)

	header  []byte // everything before the data section, unpadded
	tensors []TensorInfo
	sizes   []int64
	align   int64
	total   int64
	done    int64
	started bool
	cur     int   // index of the tensor being written
	left    int64 // bytes of it still to come
	bw      *bufio.Writer
	err     error // the first error; every later call returns it
	closed  bool

	file *atomicfile.File // Create's temporary file; nil for NewWriter
	path string           // Create's destination
}

var errAborted = errors.New("gguf: write aborted")

// NewWriter returns a Writer that writes to w. It checks the metadata and
// tensor infos and returns an error naming the key or tensor at fault. Close
// flushes the Writer but does not close w.
func NewWriter(w io.Writer, kvs []KV, tensors []TensorInfo) (*Writer, error) {
	gw, err := newWriter(kvs, tensors)
	if err != nil {
		return nil, err
	}
	gw.bw = bufio.NewWriterSize(w, 1<<20)
	return gw, nil
}

// Create returns a Writer that writes the file at path atomically, with
// internal/atomicfile: it writes a temporary file beside path (beside the
// file a symbolic link at path names), and Close syncs it and renames it to
// path. A path that exists and is not a regular file (a device, a pipe, a
// directory) is refused here, before anything is written. A new file is made
// 0644 less the umask; a replaced one keeps its mode. If anything fails, or
// the Writer is aborted, or the process is interrupted and calls
// atomicfile.Cleanup (as the hybrid command does on SIGINT and SIGTERM), the
// temporary file is removed and path is left as it was.
func Create(path string, kvs []KV, tensors []TensorInfo) (*Writer, error) {
	gw, err := newWriter(kvs, tensors)
	if err != nil {
		return nil, err
	}
	tmp, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	gw.file, gw.path = tmp, path
	gw.bw = bufio.NewWriterSize(tmp, 1<<20)
	return gw, nil
}

// newWriter checks and encodes everything up to the tensor data.
func newWriter(kvs []KV, tensors []TensorInfo) (*Writer, error) {
	w := &Writer{align: DefaultAlignment}
	seen := make(map[string]bool, len(kvs))
	for _, kv := range kvs {
		if seen[kv.Key] {
			return nil, fmt.Errorf("gguf: metadata key %s appears twice", printable(kv.Key))
		}
		seen[kv.Key] = true
		if kv.Key == alignmentKey {
			a, ok := kv.Value.(uint32)
			if !ok || a == 0 || a&(a-1) != 0 || a > maxAlignment {
				return nil, fmt.Errorf("gguf: metadata key %s must be a uint32 power of two up to %d; got %s %v", alignmentKey, maxAlignment, typeName(kv.Value), kv.Value)
			}
			w.align = int64(a)
		}
	}
	h := []byte(magic)
	h = binary.LittleEndian.AppendUint32(h, 3)
	h = binary.LittleEndian.AppendUint64(h, uint64(len(tensors)))
	h = binary.LittleEndian.AppendUint64(h, uint64(len(kvs)))
	var err error
	for _, kv := range kvs {
		h = appendString(h, kv.Key)
		t, terr := TypeOf(kv.Value)
		if terr != nil {
			return nil, fmt.Errorf("gguf: metadata key %s: %w", printable(kv.Key), unstorable(kv.Value))
		}
		h = binary.LittleEndian.AppendUint32(h, uint32(t))
		if h, err = appendValue(h, kv.Value, 0); err != nil {
			return nil, fmt.Errorf("gguf: metadata key %s: %w", printable(kv.Key), err)
		}
	}

	w.tensors = make([]TensorInfo, len(tensors))
	w.sizes = make([]int64, len(tensors))
	names := make(map[string]bool, len(tensors))
	var off uint64
	for i, ti := range tensors {
		if names[ti.Name] {
			return nil, fmt.Errorf("gguf: tensor %s appears twice", printable(ti.Name))
		}
		names[ti.Name] = true
		size, _, err := tensorSize(ti.Dims, ti.Type)
		if err != nil {
			return nil, fmt.Errorf("gguf: tensor %s: %w", printable(ti.Name), err)
		}
		end, ok := alignUp(off+size, uint64(w.align))
		if !ok || off+size < off || end > math.MaxInt64/2 {
			return nil, fmt.Errorf("gguf: tensor %s: the data section exceeds 2^62 bytes", printable(ti.Name))
		}
		w.tensors[i] = TensorInfo{Name: ti.Name, Dims: append([]uint64(nil), ti.Dims...), Type: ti.Type, Offset: off}
		w.sizes[i] = int64(size)
		off = end

		h = appendString(h, ti.Name)
		h = binary.LittleEndian.AppendUint32(h, uint32(len(ti.Dims)))
		for _, d := range ti.Dims {
			h = binary.LittleEndian.AppendUint64(h, d)
		}
		h = binary.LittleEndian.AppendUint32(h, uint32(ti.Type))
		h = binary.LittleEndian.AppendUint64(h, w.tensors[i].Offset)
	}
	w.header = h
	start, _ := alignUp(uint64(len(h)), uint64(w.align))
	w.total = int64(start + off)
	if len(w.sizes) > 0 {
		w.left = w.sizes[0]
	}
	return w, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// appendValue encodes v, whose type id the caller has written already; depth
// counts the arrays around it.
func appendValue(b []byte, v any, depth int) ([]byte, error) {
	le := binary.LittleEndian
	switch x := v.(type) {
	case uint8:
		return append(b, x), nil
	case int8:
		return append(b, byte(x)), nil
	case uint16:
		return le.AppendUint16(b, x), nil
	case int16:
		return le.AppendUint16(b, uint16(x)), nil
	case uint32:
		return le.AppendUint32(b, x), nil
	case int32:
		return le.AppendUint32(b, uint32(x)), nil
	case float32:
		return le.AppendUint32(b, math.Float32bits(x)), nil
	case bool:
		if x {
			return append(b, 1), nil
		}
		return append(b, 0), nil
	case string:
		return appendString(b, x), nil
	case uint64:
		return le.AppendUint64(b, x), nil
	case int64:
		return le.AppendUint64(b, uint64(x)), nil
	case float64:
		return le.AppendUint64(b, math.Float64bits(x)), nil
	}
	a, ok := arrayOf(v)
	if !ok {
		return nil, unstorable(v)
	}
	if depth >= maxArrayDepth {
		return nil, fmt.Errorf("arrays nested more than %d deep", maxArrayDepth)
	}
	if inner, ok := arrayOf(a.Values); !ok || inner.Type != a.Type {
		return nil, fmt.Errorf("array of %s holds Go type %T", a.Type, a.Values)
	}
	b = le.AppendUint32(b, uint32(a.Type))
	b = le.AppendUint64(b, uint64(a.Len()))
	var err error
	each := func(n int, elem func(int) any) {
		for i := 0; i < n && err == nil; i++ {
			b, err = appendValue(b, elem(i), depth+1)
		}
	}
	switch vs := a.Values.(type) {
	case []uint8:
		b = append(b, vs...)
	case []Array:
		// Each element is an array header and elements, its type id
		// implied by the outer array's.
		each(len(vs), func(i int) any { return vs[i] })
	case []string:
		each(len(vs), func(i int) any { return vs[i] })
	case []bool:
		each(len(vs), func(i int) any { return vs[i] })
	case []int8:
		each(len(vs), func(i int) any { return vs[i] })
	case []uint16:
		each(len(vs), func(i int) any { return vs[i] })
	case []int16:
		each(len(vs), func(i int) any { return vs[i] })
	case []uint32:
		each(len(vs), func(i int) any { return vs[i] })
	case []int32:
		each(len(vs), func(i int) any { return vs[i] })
	case []float32:
		each(len(vs), func(i int) any { return vs[i] })
	case []uint64:
		each(len(vs), func(i int) any { return vs[i] })
	case []int64:
		each(len(vs), func(i int) any { return vs[i] })
	case []float64:
		each(len(vs), func(i int) any { return vs[i] })
	}
	return b, err
}

// Tensors returns the tensor infos as they will be written, with their
// offsets in the data section. The slice is the Writer's: do not modify it.
func (w *Writer) Tensors() []TensorInfo { return w.tensors }

// Size returns the size of the whole file in bytes.
func (w *Writer) Size() int64 { return w.total }

// fail records the first error.
func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// pad writes zeros up to the next multiple of the alignment.
func (w *Writer) pad() error {
	n := (w.align - w.done%w.align) % w.align
	var zeros [256]byte
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if _, err := w.bw.Write(zeros[:k]); err != nil {
			return w.fail(err)
		}
		w.done += k
		n -= k
	}
	return nil
}

// start writes the header once.
func (w *Writer) start() error {
	if w.err != nil || w.started {
		return w.err
	}
	if w.closed {
		return w.fail(errors.New("gguf: write after Close"))
	}
	w.started = true
	if _, err := w.bw.Write(w.header); err != nil {
		return w.fail(err)
	}
	w.done = int64(len(w.header))
	if err := w.pad(); err != nil {
		return err
	}
	w.progress()
	return nil
}

func (w *Writer) progress() {
	if w.Progress != nil {
		w.Progress(w.done, w.total)
	}
}

// Write writes tensor data: the bytes continue the current tensor and run on
// into the next ones, in the order of the infos. Writing more than the
// tensors hold is an error.
func (w *Writer) Write(p []byte) (int, error) {
	if err := w.start(); err != nil {
		return 0, err
	}
	n := 0
	for len(p) > 0 {
		if w.cur >= len(w.tensors) {
			return n, w.fail(fmt.Errorf("gguf: %d bytes written past the last tensor", len(p)))
		}
		k := int(min(int64(len(p)), w.left))
		if _, err := w.bw.Write(p[:k]); err != nil {
			return n, w.fail(err)
		}
		n += k
		p = p[k:]
		w.left -= int64(k)
		w.done += int64(k)
		if w.left == 0 {
			if err := w.pad(); err != nil {
				return n, err
			}
			w.cur++
			if w.cur < len(w.tensors) {
				w.left = w.sizes[w.cur]
			}
		}
	}
	w.progress()
	return n, nil
}

// WriteTensor writes the whole data of the next tensor; data must be exactly
// its size.
func (w *Writer) WriteTensor(data []byte) error {
	if err := w.start(); err != nil {
		return err
	}
	if w.cur >= len(w.tensors) {
		return w.fail(errors.New("gguf: WriteTensor after the last tensor"))
	}
	ti := &w.tensors[w.cur]
	if w.left != w.sizes[w.cur] {
		return w.fail(fmt.Errorf("gguf: WriteTensor: tensor %s is partly written (%d of %d bytes)", printable(ti.Name), w.sizes[w.cur]-w.left, w.sizes[w.cur]))
	}
	if int64(len(data)) != w.left {
		return w.fail(fmt.Errorf("gguf: tensor %s is %d bytes (%s %v), got %d", printable(ti.Name), w.left, ti.Type, ti.Dims, len(data)))
	}
	_, err := w.Write(data)
	return err
}

// Close finishes the file. It fails if any tensor's data is missing. For
// Create, it syncs the temporary file and renames it into place, or removes
// it on any error.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	err := w.finish()
	w.closed = true
	if w.file == nil {
		return err
	}
	if err != nil {
		w.file.Abort()
		return err
	}
	if err := w.file.Commit(); err != nil {
		return w.fail(fmt.Errorf("gguf: %s: %w", w.path, err))
	}
	return nil
}

func (w *Writer) finish() error {
	if err := w.start(); err != nil {
		return err
	}
	if w.cur < len(w.tensors) {
		ti := &w.tensors[w.cur]
		return w.fail(fmt.Errorf("gguf: tensor %s (%d of %d) is incomplete: %d of %d bytes written",
			printable(ti.Name), w.cur+1, len(w.tensors), w.sizes[w.cur]-w.left, w.sizes[w.cur]))
	}
	if err := w.bw.Flush(); err != nil {
		return w.fail(err)
	}
	return nil
}

// Abort abandons the file: for Create, the temporary file is removed and the
// destination left as it was. It does nothing after Close.
func (w *Writer) Abort() {
	if !w.closed {
		w.fail(errAborted)
		w.Close()
	}
}
