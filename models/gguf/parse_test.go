package gguf

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"hybrid/quant"
)

// allTypesKVs holds one value of every metadata type, arrays of every element
// type, and arrays of arrays.
var allTypesKVs = []KV{
	{"u8", uint8(200)},
	{"i8", int8(-100)},
	{"u16", uint16(60000)},
	{"i16", int16(-30000)},
	{"u32", uint32(4000000000)},
	{"i32", int32(-2000000000)},
	{"f32", float32(0.25)},
	{"bool", true},
	{"str", "héllo"},
	{"u64", uint64(math.MaxUint64)},
	{"i64", int64(math.MinInt64)},
	{"f64", math.Pi},
	{"empty", ""},
	{"nan", float32(math.NaN())},
	{"a.u8", Array{TypeUint8, []uint8{1, 2}}},
	{"a.i8", Array{TypeInt8, []int8{-1}}},
	{"a.u16", Array{TypeUint16, []uint16{1, 65535}}},
	{"a.i16", Array{TypeInt16, []int16{-2}}},
	{"a.u32", Array{TypeUint32, []uint32{7}}},
	{"a.i32", Array{TypeInt32, []int32{1, -1, 3}}},
	{"a.f32", Array{TypeFloat32, []float32{1.5, -2}}},
	{"a.bool", Array{TypeBool, []bool{true, false}}},
	{"a.str", Array{TypeString, []string{"a", "", "ccc"}}},
	{"a.u64", Array{TypeUint64, []uint64{1 << 40}}},
	{"a.i64", Array{TypeInt64, []int64{-1 << 40}}},
	{"a.f64", Array{TypeFloat64, []float64{math.Inf(-1)}}},
	{"a.empty", Array{TypeString, []string{}}},
	{"a.nested", Array{TypeArray, []Array{
		{TypeInt32, []int32{1, 2}},
		{TypeString, []string{"x"}},
		{TypeArray, []Array{{TypeUint8, []uint8{}}}},
	}}},
}

// writeMem writes a file with the given metadata and tensors, whose data is
// data[i], into memory.
func writeMem(t *testing.T, kvs []KV, tensors []TensorInfo, data [][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, kvs, tensors)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range data {
		if err := w.WriteTensor(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestAllValueTypes(t *testing.T) {
	b := writeMem(t, allTypesKVs, nil, nil)
	f, err := Parse(b, "all")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.KV) != len(allTypesKVs) {
		t.Fatalf("%d keys, want %d", len(f.KV), len(allTypesKVs))
	}
	for i, kv := range allTypesKVs {
		if f.KV[i].Key != kv.Key || !equalValues(f.KV[i].Value, kv.Value) {
			t.Errorf("kv[%d] = %s: %#v, want %s: %#v", i, f.KV[i].Key, f.KV[i].Value, kv.Key, kv.Value)
		}
	}
	if len(f.Tensors) != 0 || f.DataOffset%DefaultAlignment != 0 || f.DataOffset != int64(len(b)) {
		t.Errorf("%d tensors, data at %d, file of %d bytes", len(f.Tensors), f.DataOffset, len(b))
	}
}

func TestAccessors(t *testing.T) {
	f, err := Parse(writeMem(t, allTypesKVs, nil, nil), "all")
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, got, want any, ok bool) {
		t.Helper()
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v, %v; want %v", name, got, ok, want)
		}
	}
	s, ok := f.String("str")
	check("String(str)", s, "héllo", ok)
	for key, want := range map[string]uint64{"u8": 200, "u16": 60000, "u32": 4000000000, "u64": math.MaxUint64} {
		u, ok := f.Uint(key)
		check("Uint("+key+")", u, want, ok)
	}
	for key, want := range map[string]int64{"i8": -100, "i16": -30000, "i32": -2000000000, "i64": math.MinInt64, "u32": 4000000000} {
		n, ok := f.Int(key)
		check("Int("+key+")", n, want, ok)
	}
	x, ok := f.Float("f32")
	check("Float(f32)", x, 0.25, ok)
	x, ok = f.Float("f64")
	check("Float(f64)", x, math.Pi, ok)
	bv, ok := f.Bool("bool")
	check("Bool", bv, true, ok)
	ss, ok := f.Strings("a.str")
	check("Strings", ss, []string{"a", "", "ccc"}, ok)
	fs, ok := f.Float32s("a.f32")
	check("Float32s", fs, []float32{1.5, -2}, ok)
	is, ok := f.Int32s("a.i32")
	check("Int32s", is, []int32{1, -1, 3}, ok)
	v, ok := f.Value("u16")
	check("Value", v, uint16(60000), ok)

	for _, c := range []struct {
		name string
		get  func() error
		msg  string
	}{
		{"missing", func() error { _, err := f.GetString("nope"); return err }, "gguf: all: metadata key nope is missing"},
		{"string as uint", func() error { _, err := f.GetUint("str"); return err }, "gguf: all: metadata key str is string, want an unsigned integer"},
		{"negative uint", func() error { _, err := f.GetUint("i8"); return err }, "gguf: all: metadata key i8 is -100, want a non-negative integer"},
		{"uint64 as int", func() error { _, err := f.GetInt("u64"); return err }, "gguf: all: metadata key u64 is 18446744073709551615, which overflows an int64"},
		{"int as float", func() error { _, err := f.GetFloat("u32"); return err }, "gguf: all: metadata key u32 is uint32, want a float"},
		{"float32 array as strings", func() error { _, err := f.GetStrings("a.f32"); return err }, "gguf: all: metadata key a.f32 is array of float32, want array of string"},
		{"scalar as int32s", func() error { _, err := f.GetInt32s("i32"); return err }, "gguf: all: metadata key i32 is int32, want array of int32"},
		{"bool", func() error { _, err := f.GetBool("u8"); return err }, "gguf: all: metadata key u8 is uint8, want bool"},
	} {
		err := c.get()
		var ke *KeyError
		if !errors.As(err, &ke) || err.Error() != c.msg {
			t.Errorf("%s: %v, want %q", c.name, err, c.msg)
		}
		if (c.name == "missing") != errors.Is(err, ErrMissingKey) {
			t.Errorf("%s: errors.Is(ErrMissingKey) = %v", c.name, errors.Is(err, ErrMissingKey))
		}
	}
	if _, ok := f.Uint("str"); ok {
		t.Error("Uint(str) succeeded")
	}
}

// TestGoodFile reads the hand-made file: layout, tensors and data.
func TestGoodFile(t *testing.T) {
	g := goodFile()
	f, err := Parse(g.b, "good")
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || f.Alignment != 32 || f.DataOffset != int64(g.marks["data"]) {
		t.Errorf("version %d, alignment %d, data at %d; want 3, 32, %d", f.Version, f.Alignment, f.DataOffset, g.marks["data"])
	}
	want := []TensorInfo{
		{Name: "a", Dims: []uint64{8}, Type: quant.F32, Offset: 0},
		{Name: "b", Dims: []uint64{32, 2}, Type: quant.Q8_0, Offset: 32},
	}
	if !reflect.DeepEqual(f.Tensors, want) {
		t.Errorf("tensors %+v, want %+v", f.Tensors, want)
	}
	b, err := f.TensorDataByName("b")
	if err != nil || len(b) != 68 || b[0] != 100 || b[67] != 167 || cap(b) != 68 {
		t.Errorf("tensor b: %d bytes (cap %d), %v", len(b), cap(b), err)
	}
	if _, err := f.TensorDataByName("c"); err == nil {
		t.Error("TensorDataByName(c) succeeded")
	}
	if ti, _ := f.Tensor("b"); ti.Elements() != 64 || ti.Size() != 68 {
		t.Errorf("b: %d elements, %d bytes", ti.Elements(), ti.Size())
	}
	if !bytes.Equal(rewrite(t, f), g.b) {
		t.Error("rewriting the good file changed its bytes")
	}
}

// TestVersion2 reads a v2 file, whose layout matches v3 for little-endian.
func TestVersion2(t *testing.T) {
	g := goodFile()
	g.b[4] = 2
	f, err := Parse(g.b, "v2")
	if err != nil || f.Version != 2 {
		t.Fatalf("version %v: %v", f, err)
	}
}

// TestAlignment reads a file whose data is aligned to 64, not the default.
func TestAlignment(t *testing.T) {
	kvs := []KV{{"general.alignment", uint32(64)}, {"x", "y"}}
	tensors := []TensorInfo{{Name: "a", Dims: []uint64{3}, Type: quant.F32}, {Name: "b", Dims: []uint64{1, 1, 1, 1}, Type: quant.F16}}
	b := writeMem(t, kvs, tensors, [][]byte{make([]byte, 12), {1, 2}})
	f, err := Parse(b, "a64")
	if err != nil {
		t.Fatal(err)
	}
	if f.Alignment != 64 || f.DataOffset%64 != 0 || f.Tensors[1].Offset != 64 || len(b)%64 != 0 {
		t.Errorf("alignment %d, data at %d, offset of b %d, size %d", f.Alignment, f.DataOffset, f.Tensors[1].Offset, len(b))
	}
	if d := f.TensorData(&f.Tensors[1]); !bytes.Equal(d, []byte{1, 2}) {
		t.Errorf("b = %v", d)
	}
}

// TestOutOfOrderOffsets reads a file whose tensors are stored in a different
// order from their infos, with a gap: allowed by the spec.
func TestOutOfOrderOffsets(t *testing.T) {
	b := newBuilder(3, 2, 0).
		tensor("a", []uint64{4}, quant.F32, 64).
		tensor("b", []uint64{4}, quant.F32, 0).
		pad(32).fill(16, 10).pad(32).fill(32, 0).fill(16, 20).b
	f, err := Parse(b, "order")
	if err != nil {
		t.Fatal(err)
	}
	if a := f.TensorData(&f.Tensors[0]); a[0] != 20 {
		t.Errorf("a starts with %d, want 20", a[0])
	}
	g, err := Parse(rewrite(t, f), "copy")
	if err != nil {
		t.Fatal(err)
	}
	if diff := sameContents(f, g); diff != "" {
		t.Error(diff)
	}
}

// TestOpen maps a file, reads it, and closes it.
func TestOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "good.gguf")
	if err := os.WriteFile(path, goodFile().b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := f.TensorDataByName("a"); err != nil || a[0] != 1 {
		t.Fatalf("a: %v, %v", a, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if d := f.TensorData(&f.Tensors[0]); d != nil {
		t.Errorf("TensorData after Close = %v", d)
	}
	if _, err := f.TensorDataByName("a"); err == nil {
		t.Error("TensorDataByName after Close succeeded")
	}
	if s, ok := f.String("general.architecture"); !ok || s != "llama" {
		t.Errorf("metadata after Close: %q, %v", s, ok)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing.gguf")); err == nil {
		t.Error("Open of a missing file succeeded")
	}
	empty := filepath.Join(t.TempDir(), "empty.gguf")
	os.WriteFile(empty, nil, 0o644)
	if _, err := Open(empty); errorField(err) != "magic" || !errors.Is(err, ErrTruncated) {
		t.Errorf("Open of an empty file: %v", err)
	}
}
