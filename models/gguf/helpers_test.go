package gguf

import (
	"hybrid/internal/testmodels"

	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"testing"

	"hybrid/quant"
)

// testModels returns the paths of the shared *.gguf models.
func testModels(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(testmodels.Dir(t), "*.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no *.gguf files in %s", testmodels.Dir(t))
	}
	return paths
}

// errorField returns the Field of the *ParseError in err, or "".
func errorField(err error) string {
	var pe *ParseError
	if errors.As(err, &pe) {
		return pe.Field
	}
	return ""
}

// builder assembles GGUF bytes field by field, valid or not.
type builder struct {
	b     []byte
	marks map[string]int
}

func newBuilder(version uint32, nTensors, nKV uint64) *builder {
	b := &builder{b: []byte(magic), marks: map[string]int{}}
	return b.u32(version).u64(nTensors).u64(nKV)
}

func (b *builder) mark(name string) *builder { b.marks[name] = len(b.b); return b }
func (b *builder) raw(p ...byte) *builder    { b.b = append(b.b, p...); return b }
func (b *builder) u8(v uint8) *builder       { return b.raw(v) }
func (b *builder) u32(v uint32) *builder {
	b.b = binary.LittleEndian.AppendUint32(b.b, v)
	return b
}
func (b *builder) u64(v uint64) *builder {
	b.b = binary.LittleEndian.AppendUint64(b.b, v)
	return b
}
func (b *builder) f32(v float32) *builder { return b.u32(math.Float32bits(v)) }
func (b *builder) str(s string) *builder  { return b.u64(uint64(len(s))).raw([]byte(s)...) }

// kv writes a key and a value type; the caller writes the value.
func (b *builder) kv(key string, t ValueType) *builder { return b.str(key).u32(uint32(t)) }

// tensor writes a tensor info.
func (b *builder) tensor(name string, dims []uint64, t quant.Type, off uint64) *builder {
	b.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		b.u64(d)
	}
	return b.u32(uint32(t)).u64(off)
}

// pad writes zeros up to a multiple of align.
func (b *builder) pad(align int) *builder {
	for len(b.b)%align != 0 {
		b.b = append(b.b, 0)
	}
	return b
}

// fill writes n bytes counting up from seed.
func (b *builder) fill(n int, seed byte) *builder {
	for i := range n {
		b.b = append(b.b, seed+byte(i))
	}
	return b
}

// goodFile builds a small valid file: three KVs (a string, the alignment, a
// float32 array) and two tensors, F32 [8] and Q8_0 [32 2], laid out as
// llama.cpp would. Its marks name where each part starts.
func goodFile() *builder {
	b := newBuilder(3, 2, 3)
	b.mark("kv0").kv("general.architecture", TypeString).str("llama")
	b.mark("kv1").kv(alignmentKey, TypeUint32).mark("kv1.value").u32(32)
	b.mark("kv2").kv("tokenizer.ggml.scores", TypeArray).u32(uint32(TypeFloat32)).u64(3).f32(1).f32(-2).f32(0.5)
	b.mark("ti0").tensor("a", []uint64{8}, quant.F32, 0)
	b.mark("ti1").tensor("b", []uint64{32, 2}, quant.Q8_0, 32)
	b.mark("end_infos").pad(32).mark("data")
	b.fill(32, 1).pad(32).mark("data1").fill(68, 100).pad(32)
	return b
}

// equalValues compares metadata values, floats by their bits so that NaNs
// compare equal to themselves.
func equalValues(a, b any) bool {
	return equalReflect(reflect.ValueOf(a), reflect.ValueOf(b))
}

func equalReflect(a, b reflect.Value) bool {
	if a.IsValid() != b.IsValid() {
		return false
	}
	if !a.IsValid() {
		return true
	}
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		return math.Float64bits(a.Float()) == math.Float64bits(b.Float())
	case reflect.Slice:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !equalReflect(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Interface:
		return equalReflect(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range a.NumField() {
			if !equalReflect(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// rewrite writes f with a Writer into memory.
func rewrite(t testing.TB, f *File) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, f.KV, f.Tensors)
	if err != nil {
		t.Fatalf("NewWriter: %v", err)
	}
	for i := range f.Tensors {
		if err := w.WriteTensor(f.TensorData(&f.Tensors[i])); err != nil {
			t.Fatalf("WriteTensor %s: %v", f.Tensors[i].Name, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if int64(buf.Len()) != w.Size() {
		t.Fatalf("wrote %d bytes, Size says %d", buf.Len(), w.Size())
	}
	return buf.Bytes()
}

// sameContents reports how two files differ in metadata, tensor infos
// (offsets aside) or tensor data, or "" when they do not.
func sameContents(a, b *File) string {
	if len(a.KV) != len(b.KV) {
		return "metadata counts differ"
	}
	for i := range a.KV {
		if a.KV[i].Key != b.KV[i].Key || !equalValues(a.KV[i].Value, b.KV[i].Value) {
			return "kv " + a.KV[i].Key + " differs"
		}
	}
	if len(a.Tensors) != len(b.Tensors) {
		return "tensor counts differ"
	}
	for i := range a.Tensors {
		ta, tb := &a.Tensors[i], &b.Tensors[i]
		if ta.Name != tb.Name || ta.Type != tb.Type || !reflect.DeepEqual(ta.Dims, tb.Dims) {
			return "tensor info " + ta.Name + " differs"
		}
		if !bytes.Equal(a.TensorData(ta), b.TensorData(tb)) {
			return "tensor data " + ta.Name + " differs"
		}
	}
	return ""
}
