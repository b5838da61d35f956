// Package gguf reads and writes GGUF files, the container llama.cpp uses for
// models: ordered metadata key-value pairs, tensor infos, and aligned tensor
// data.
//
// Open memory-maps a file and Parse reads one already in memory; both check
// every count, length and offset against the bytes actually present before
// using it, so a truncated or hostile file gets a *ParseError that names the
// field and byte offset at fault, never a panic or an allocation sized by an
// unchecked header field. Tensor data is never copied: TensorData returns a
// slice of the mapping.
//
// Writer streams a GGUF v3 file: the metadata and tensor infos are declared up
// front, then tensor data is written one tensor at a time, so a model of many
// gigabytes never has to be held in memory. Create writes atomically through a
// temporary file in the target's directory.
//
// The format is described in ggml's docs/gguf.md. Only little-endian files of
// versions 2 and 3 are supported.
package gguf

import (
	"fmt"
	"math"
	"math/bits"

	"hybrid/quant"
)

// DefaultAlignment is the alignment of tensor data when a file has no
// general.alignment key.
const DefaultAlignment = 32

// Limits on what a file may declare. They are far above anything real, and
// exist so that hostile input cannot make the reader recurse or pad without
// bound.
const (
	// MaxDims is the most dimensions a tensor may have (GGML_MAX_DIMS).
	MaxDims = 4
	// maxAlignment bounds general.alignment: real files use 32, and no
	// page size is above 64 KiB.
	maxAlignment = 1 << 20
	// maxArrayDepth bounds the nesting of arrays of arrays.
	maxArrayDepth = 8
)

// alignmentKey is the metadata key that sets the alignment of tensor data.
const alignmentKey = "general.alignment"

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name string
	// Dims are the tensor's dimensions in ggml order: Dims[0] is the row
	// length, the contiguous (fastest-varying) dimension.
	Dims []uint64
	Type quant.Type
	// Offset is where the tensor's data starts, relative to the start of
	// the data section (File.DataOffset). A Writer computes it.
	Offset uint64
}

// Elements returns the number of elements in the tensor (the product of its
// dims), or 0 when that overflows.
func (ti *TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range ti.Dims {
		hi, lo := bits.Mul64(n, d)
		if hi != 0 {
			return 0
		}
		n = lo
	}
	return n
}

// Size returns the size of the tensor's data in bytes. It is -1 when the info
// is invalid (unknown type, bad dims); it never is for a parsed File's tensors.
func (ti *TensorInfo) Size() int64 {
	n, _, err := tensorSize(ti.Dims, ti.Type)
	if err != nil {
		return -1
	}
	return int64(n)
}

// tensorSize checks a tensor's dims and type and returns its size in bytes.
// On error, dim is the index of the dimension at fault, or -1 when the type
// is.
func tensorSize(dims []uint64, t quant.Type) (size uint64, dim int, err error) {
	if len(dims) == 0 || len(dims) > MaxDims {
		return 0, -1, fmt.Errorf("%d dimensions (want 1 to %d)", len(dims), MaxDims)
	}
	n := uint64(1)
	for i, d := range dims {
		if d == 0 {
			return 0, i, fmt.Errorf("dimension %d is 0", i)
		}
		hi, lo := bits.Mul64(n, d)
		if hi != 0 || lo > math.MaxInt64 {
			return 0, i, fmt.Errorf("element count of dims %v overflows", dims)
		}
		n = lo
	}
	if !t.Known() {
		return 0, -1, fmt.Errorf("unknown tensor type %d", uint32(t))
	}
	bs, bb := uint64(t.BlockSize()), uint64(t.BlockBytes())
	if dims[0]%bs != 0 {
		return 0, 0, fmt.Errorf("row length %d is not a multiple of %s's block size %d", dims[0], t, bs)
	}
	hi, lo := bits.Mul64(n/bs, bb)
	if hi != 0 || lo > math.MaxInt64 {
		return 0, -1, fmt.Errorf("%d elements of %s take more than 2^63 bytes", n, t)
	}
	return lo, 0, nil
}

// alignUp rounds n up to a multiple of align, a power of two. ok is false
// when that overflows.
func alignUp(n, align uint64) (m uint64, ok bool) {
	m = (n + align - 1) &^ (align - 1)
	return m, m >= n
}

// File is a parsed GGUF file. Its metadata and tensor infos are plain Go
// values, copied out of the file; tensor data stays in the file's bytes (a
// memory mapping for Open) until Close. A File is safe for concurrent reads.
type File struct {
	// Path names the file in errors: the path given to Open, or the name
	// given to Parse.
	Path    string
	Version uint32
	// KV holds the metadata in file order.
	KV []KV
	// Tensors holds the tensor infos in file order.
	Tensors []TensorInfo
	// Alignment is the alignment of tensor data (general.alignment, or
	// DefaultAlignment).
	Alignment int
	// DataOffset is the byte offset of the data section in the file.
	DataOffset int64

	data    []byte
	keys    map[string]int // key → index in KV
	names   map[string]int // tensor name → index in Tensors
	release func() error   // unmaps data; nil when the caller owns it
	origin  *origin        // the mapped file, for Check; nil when parsed from memory
}

// Tensor returns the info of the tensor called name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.names[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// TensorData returns the bytes of the tensor ti, in place in the file: the
// slice must not be modified, and is invalid after Close. It returns nil when
// ti does not lie inside the file (an info not from this File, or a File
// already closed).
func (f *File) TensorData(ti *TensorInfo) []byte {
	size := ti.Size()
	if size < 0 || ti.Offset > math.MaxInt64-uint64(f.DataOffset) {
		return nil
	}
	start := f.DataOffset + int64(ti.Offset)
	if start > int64(len(f.data)) || size > int64(len(f.data))-start {
		return nil
	}
	return f.data[start : start+size : start+size]
}

// TensorDataByName returns the bytes of the tensor called name, as TensorData
// does.
func (f *File) TensorDataByName(name string) ([]byte, error) {
	ti, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf: %s: no tensor %q", f.Path, name)
	}
	b := f.TensorData(ti)
	if b == nil {
		return nil, fmt.Errorf("gguf: %s: tensor %q: file is closed", f.Path, name)
	}
	return b, nil
}

// Close releases the file's memory mapping, if it has one. Tensor data
// slices are invalid afterwards; metadata and tensor infos stay usable.
func (f *File) Close() error {
	f.data = nil
	if f.origin != nil && f.origin.fd != nil {
		f.origin.fd.Close()
		f.origin.fd = nil
	}
	if f.release == nil {
		return nil
	}
	release := f.release
	f.release = nil
	if err := release(); err != nil {
		return fmt.Errorf("gguf: %s: %w", f.Path, err)
	}
	return nil
}
