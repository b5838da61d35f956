package gguf

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"hybrid/quant"
)

const magic = "GGUF"

// Smallest encodings, used to reject counts that the remaining bytes cannot
// hold before anything is allocated for them.
const (
	minKVBytes     = 8 + 4 + 1         // empty key, value type, 1-byte value
	minTensorBytes = 8 + 4 + 8 + 4 + 8 // empty name, n_dims, one dim, type, offset
)

// Parse reads a GGUF file held in memory; name identifies it in errors. The
// File refers to b for tensor data, without copying: b must stay unchanged
// while the File is in use. Close on the result does nothing.
func Parse(b []byte, name string) (*File, error) {
	p := &parser{b: b, path: name}
	return p.file()
}

// parser reads a file front to back; pos is the next byte to read.
type parser struct {
	b    []byte
	pos  int
	path string
}

func (p *parser) fail(field, name string, off int, err error) *ParseError {
	return &ParseError{Path: p.path, Field: field, Name: name, Offset: int64(off), Err: err}
}

func (p *parser) failf(field, name string, off int, format string, args ...any) *ParseError {
	return p.fail(field, name, off, fmt.Errorf(format, args...))
}

func (p *parser) remaining() int { return len(p.b) - p.pos }

// take returns the next n bytes.
func (p *parser) take(n uint64) ([]byte, error) {
	if n > uint64(p.remaining()) {
		return nil, fmt.Errorf("%w: need %d bytes, %d remain", ErrTruncated, n, p.remaining())
	}
	s := p.b[p.pos : p.pos+int(n)]
	p.pos += int(n)
	return s, nil
}

func (p *parser) u32() (uint32, error) {
	s, err := p.take(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(s), nil
}

func (p *parser) u64() (uint64, error) {
	s, err := p.take(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(s), nil
}

// str reads a GGUF string (uint64 length, bytes) and copies it out of the
// file, so that it outlives a mapping.
func (p *parser) str() (string, error) {
	n, err := p.u64()
	if err != nil {
		return "", err
	}
	if n > uint64(p.remaining()) {
		return "", fmt.Errorf("%w: string of %d bytes, %d remain", ErrTruncated, n, p.remaining())
	}
	s, _ := p.take(n)
	return string(s), nil
}

// file parses the whole file.
func (p *parser) file() (*File, error) {
	f := &File{Path: p.path, data: p.b, Alignment: DefaultAlignment}
	nTensors, nKV, err := p.header(f)
	if err != nil {
		return nil, err
	}
	if err := p.metadata(f, nKV); err != nil {
		return nil, err
	}
	if err := p.tensorInfos(f, nTensors); err != nil {
		return nil, err
	}
	return f, nil
}

// header reads magic, version and the two counts, and checks the counts
// against the bytes left.
func (p *parser) header(f *File) (nTensors, nKV uint64, err error) {
	m, err := p.take(4)
	if err != nil {
		return 0, 0, p.fail("magic", "", 0, err)
	}
	if string(m) != magic {
		if legacy := map[string]string{"lmgg": "GGML", "fmgg": "GGMF", "tjgg": "GGJT"}[string(m)]; legacy != "" {
			return 0, 0, p.fail("magic", "", 0, fmt.Errorf("%w: a legacy %s file; convert it to GGUF with llama.cpp", ErrBadMagic, legacy))
		}
		return 0, 0, p.fail("magic", "", 0, fmt.Errorf("%w: magic %q, want %q", ErrBadMagic, m, magic))
	}
	v, err := p.u32()
	if err != nil {
		return 0, 0, p.fail("version", "", 4, err)
	}
	switch {
	case v == 2 || v == 3:
	case v&0xffff == 0 && bits.ReverseBytes32(v) <= 3:
		return 0, 0, p.fail("version", "", 4, fmt.Errorf("%w: a big-endian GGUF file (version %d); only little-endian files are supported", ErrUnsupportedVersion, bits.ReverseBytes32(v)))
	default:
		return 0, 0, p.fail("version", "", 4, fmt.Errorf("%w %d (only 2 and 3 are supported)", ErrUnsupportedVersion, v))
	}
	f.Version = v
	if nTensors, err = p.u64(); err != nil {
		return 0, 0, p.fail("tensor_count", "", 8, err)
	}
	if nKV, err = p.u64(); err != nil {
		return 0, 0, p.fail("metadata_kv_count", "", 16, err)
	}
	rem := uint64(p.remaining())
	if nKV > rem/minKVBytes {
		return 0, 0, p.failf("metadata_kv_count", "", 16, "%d key-value pairs need at least %d bytes each, but only %d bytes remain", nKV, minKVBytes, rem)
	}
	if nTensors > rem/minTensorBytes || nTensors*minTensorBytes > rem-nKV*minKVBytes {
		return 0, 0, p.failf("tensor_count", "", 8, "%d tensor infos need at least %d bytes each, but only %d bytes remain after the metadata's minimum", nTensors, minTensorBytes, rem-nKV*minKVBytes)
	}
	return nTensors, nKV, nil
}

// metadata reads the key-value pairs, and general.alignment among them.
func (p *parser) metadata(f *File, n uint64) error {
	f.KV = make([]KV, 0, n)
	f.keys = make(map[string]int, n)
	for i := range int(n) {
		off := p.pos
		key, err := p.str()
		if err != nil {
			return p.fail(fmt.Sprintf("kv[%d].key", i), "", off, err)
		}
		if j, dup := f.keys[key]; dup {
			return p.failf(fmt.Sprintf("kv[%d].key", i), key, off, "duplicate key (also kv[%d])", j)
		}
		off = p.pos
		t, err := p.u32()
		if err != nil {
			return p.fail(fmt.Sprintf("kv[%d].type", i), key, off, err)
		}
		vt := ValueType(t)
		if !vt.valid() {
			return p.failf(fmt.Sprintf("kv[%d].type", i), key, off, "unknown value type %d", t)
		}
		off = p.pos
		v, verr := p.value(vt, 0)
		if verr != nil {
			return p.fail(fmt.Sprintf("kv[%d].value%s", i, verr.sub), key, verr.off, verr.err)
		}
		if key == alignmentKey {
			a, ok := v.(uint32)
			switch {
			case !ok:
				return p.failf(fmt.Sprintf("kv[%d].type", i), key, off-4, "%s is %s, want uint32", alignmentKey, vt)
			case a == 0 || a&(a-1) != 0:
				return p.failf(fmt.Sprintf("kv[%d].value", i), key, off, "alignment %d is not a power of two", a)
			case a > maxAlignment:
				return p.failf(fmt.Sprintf("kv[%d].value", i), key, off, "alignment %d is above the limit of %d", a, maxAlignment)
			}
			f.Alignment = int(a)
		}
		f.keys[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Value: v})
	}
	return nil
}

// valueError locates an error inside a value: sub is the path below the
// value ("[3].count"), off the byte offset.
type valueError struct {
	sub string
	off int
	err error
}

// value reads one value of type t; depth counts the arrays around it.
func (p *parser) value(t ValueType, depth int) (any, *valueError) {
	off := p.pos
	fail := func(err error) (any, *valueError) { return nil, &valueError{off: off, err: err} }
	if size := t.fixedSize(); size > 0 {
		s, err := p.take(uint64(size))
		if err != nil {
			return fail(err)
		}
		switch t {
		case TypeUint8:
			return s[0], nil
		case TypeInt8:
			return int8(s[0]), nil
		case TypeBool:
			if s[0] > 1 {
				return fail(fmt.Errorf("bool value %d is neither 0 nor 1", s[0]))
			}
			return s[0] == 1, nil
		case TypeUint16:
			return binary.LittleEndian.Uint16(s), nil
		case TypeInt16:
			return int16(binary.LittleEndian.Uint16(s)), nil
		case TypeUint32:
			return binary.LittleEndian.Uint32(s), nil
		case TypeInt32:
			return int32(binary.LittleEndian.Uint32(s)), nil
		case TypeFloat32:
			return math.Float32frombits(binary.LittleEndian.Uint32(s)), nil
		case TypeUint64:
			return binary.LittleEndian.Uint64(s), nil
		case TypeInt64:
			return int64(binary.LittleEndian.Uint64(s)), nil
		case TypeFloat64:
			return math.Float64frombits(binary.LittleEndian.Uint64(s)), nil
		}
	}
	switch t {
	case TypeString:
		s, err := p.str()
		if err != nil {
			return fail(err)
		}
		return s, nil
	case TypeArray:
		if depth >= maxArrayDepth {
			return fail(fmt.Errorf("arrays nested more than %d deep", maxArrayDepth))
		}
		return p.array(depth)
	}
	return fail(fmt.Errorf("unknown value type %d", uint32(t)))
}

// array reads an array's element type, count and elements.
func (p *parser) array(depth int) (any, *valueError) {
	off := p.pos
	et, err := p.u32()
	if err != nil {
		return nil, &valueError{sub: ".type", off: off, err: err}
	}
	t := ValueType(et)
	if !t.valid() {
		return nil, &valueError{sub: ".type", off: off, err: fmt.Errorf("unknown element type %d", et)}
	}
	off = p.pos
	n, err := p.u64()
	if err != nil {
		return nil, &valueError{sub: ".count", off: off, err: err}
	}
	if min := uint64(t.minSize()); n > uint64(p.remaining())/min {
		return nil, &valueError{sub: ".count", off: off, err: fmt.Errorf("%d elements of %s need at least %d bytes each, but only %d bytes remain", n, t, min, p.remaining())}
	}
	if size := t.fixedSize(); size > 0 && t != TypeBool {
		s, _ := p.take(n * uint64(size))
		return Array{Type: t, Values: decodeFixed(t, s, int(n))}, nil
	}
	// Elements that may fail one by one.
	elem := func(j int) (any, *valueError) {
		v, verr := p.value(t, depth+1)
		if verr != nil {
			verr.sub = fmt.Sprintf("[%d]%s", j, verr.sub)
		}
		return v, verr
	}
	switch t {
	case TypeBool:
		return collect[bool](t, int(n), elem)
	case TypeString:
		return collect[string](t, int(n), elem)
	default: // TypeArray
		return collect[Array](t, int(n), elem)
	}
}

// collect reads n elements of type T with elem.
func collect[T any](t ValueType, n int, elem func(int) (any, *valueError)) (any, *valueError) {
	vs := make([]T, n)
	for j := range vs {
		v, verr := elem(j)
		if verr != nil {
			return nil, verr
		}
		vs[j] = v.(T)
	}
	return Array{Type: t, Values: vs}, nil
}

// decodeFixed decodes n little-endian numbers of type t from s.
func decodeFixed(t ValueType, s []byte, n int) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return slices.Clone(s)
	case TypeInt8:
		return mapSlice(n, func(i int) int8 { return int8(s[i]) })
	case TypeUint16:
		return mapSlice(n, func(i int) uint16 { return le.Uint16(s[2*i:]) })
	case TypeInt16:
		return mapSlice(n, func(i int) int16 { return int16(le.Uint16(s[2*i:])) })
	case TypeUint32:
		return mapSlice(n, func(i int) uint32 { return le.Uint32(s[4*i:]) })
	case TypeInt32:
		return mapSlice(n, func(i int) int32 { return int32(le.Uint32(s[4*i:])) })
	case TypeFloat32:
		return mapSlice(n, func(i int) float32 { return math.Float32frombits(le.Uint32(s[4*i:])) })
	case TypeUint64:
		return mapSlice(n, func(i int) uint64 { return le.Uint64(s[8*i:]) })
	case TypeInt64:
		return mapSlice(n, func(i int) int64 { return int64(le.Uint64(s[8*i:])) })
	case TypeFloat64:
		return mapSlice(n, func(i int) float64 { return math.Float64frombits(le.Uint64(s[8*i:])) })
	}
	panic("gguf: decodeFixed of " + t.String())
}

func mapSlice[T any](n int, f func(int) T) []T {
	vs := make([]T, n)
	for i := range vs {
		vs[i] = f(i)
	}
	return vs
}

// tensorInfos reads the tensor infos and checks that every tensor's data
// lies inside the file, aligned, without overlapping another's.
func (p *parser) tensorInfos(f *File, n uint64) error {
	f.Tensors = make([]TensorInfo, n)
	f.names = make(map[string]int, n)
	offsetAt := make([]int, n) // byte offset of each info's offset field
	sizes := make([]uint64, n)
	align := uint64(f.Alignment)
	for i := range f.Tensors {
		field := func(name string) string { return fmt.Sprintf("tensor_info[%d].%s", i, name) }
		ti := &f.Tensors[i]
		off := p.pos
		name, err := p.str()
		if err != nil {
			return p.fail(field("name"), "", off, err)
		}
		if j, dup := f.names[name]; dup {
			return p.failf(field("name"), name, off, "duplicate tensor name (also tensor_info[%d])", j)
		}
		ti.Name = name
		f.names[name] = i

		off = p.pos
		nd, err := p.u32()
		if err != nil {
			return p.fail(field("n_dims"), name, off, err)
		}
		if nd == 0 || nd > MaxDims {
			return p.failf(field("n_dims"), name, off, "%d dimensions (want 1 to %d)", nd, MaxDims)
		}
		dimAt := p.pos
		ti.Dims = make([]uint64, nd)
		for k := range ti.Dims {
			if ti.Dims[k], err = p.u64(); err != nil {
				return p.fail(fmt.Sprintf("tensor_info[%d].dims[%d]", i, k), name, dimAt+8*k, err)
			}
		}

		off = p.pos
		t, err := p.u32()
		if err != nil {
			return p.fail(field("type"), name, off, err)
		}
		ti.Type = quant.Type(t)
		size, k, err := tensorSize(ti.Dims, ti.Type)
		if err != nil {
			if k < 0 {
				return p.fail(field("type"), name, off, err)
			}
			return p.fail(fmt.Sprintf("tensor_info[%d].dims[%d]", i, k), name, dimAt+8*k, err)
		}
		sizes[i] = size

		off = p.pos
		if ti.Offset, err = p.u64(); err != nil {
			return p.fail(field("offset"), name, off, err)
		}
		offsetAt[i] = off
		if ti.Offset%align != 0 {
			return p.failf(field("offset"), name, off, "offset %d is not a multiple of the alignment %d", ti.Offset, align)
		}
	}

	start, _ := alignUp(uint64(p.pos), align) // cannot overflow: pos and align are small
	f.DataOffset = int64(start)
	fileSize := uint64(len(p.b))
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if ti.Offset > fileSize || sizes[i] > fileSize || start+ti.Offset+sizes[i] > fileSize {
			return p.failf(fmt.Sprintf("tensor_info[%d].offset", i), ti.Name, offsetAt[i],
				"data of %d bytes at offset %d (byte %d) ends past the end of the file (%d bytes)", sizes[i], ti.Offset, start+ti.Offset, fileSize)
		}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(f.Tensors[a].Offset, f.Tensors[b].Offset) })
	for k := 1; k < len(order); k++ {
		a, b := order[k-1], order[k]
		if end := f.Tensors[a].Offset + sizes[a]; end > f.Tensors[b].Offset {
			return p.failf(fmt.Sprintf("tensor_info[%d].offset", b), f.Tensors[b].Name, offsetAt[b],
				"data [%d, %d) overlaps tensor_info[%d] (%s) at [%d, %d)", f.Tensors[b].Offset, f.Tensors[b].Offset+sizes[b], a, printable(f.Tensors[a].Name), f.Tensors[a].Offset, end)
		}
	}
	return nil
}
