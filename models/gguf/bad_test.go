package gguf

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hybrid/quant"
)

var update = flag.Bool("update", false, "rewrite the hand-made files in testdata/bad")

// badCase is a hand-made malformed file and the error it must get.
type badCase struct {
	name  string
	build func() []byte
	field string // ParseError.Field
	is    error  // a sentinel the error wraps, or nil
	msg   string // a substring of the message
}

// cut returns the good file cut just before its mark plus extra bytes.
func cut(mark string, extra int) func() []byte {
	return func() []byte {
		g := goodFile()
		return g.b[:g.marks[mark]+extra]
	}
}

// nested returns the bytes of an array value nested depth arrays deep.
func nested(b *builder, depth int) *builder {
	if depth == 1 {
		return b.u32(uint32(TypeUint8)).u64(0)
	}
	b.u32(uint32(TypeArray)).u64(1)
	return nested(b, depth-1)
}

var badCases = []badCase{
	{"empty", func() []byte { return nil }, "magic", ErrTruncated, ""},
	{"bad_magic", func() []byte { return []byte("GGUX\x03\x00\x00\x00") }, "magic", ErrBadMagic, `"GGUX"`},
	{"legacy_ggjt", func() []byte { return []byte("tjgg\x03\x00\x00\x00") }, "magic", ErrBadMagic, "legacy GGJT"},
	{"version_1", func() []byte { return newBuilder(1, 0, 0).b }, "version", ErrUnsupportedVersion, "version 1"},
	{"version_4", func() []byte { return newBuilder(4, 0, 0).b }, "version", ErrUnsupportedVersion, "version 4"},
	{"big_endian", func() []byte { return newBuilder(0x03000000, 0, 0).b }, "version", ErrUnsupportedVersion, "big-endian"},
	{"truncated_version", cut("", 6), "version", ErrTruncated, ""},
	{"truncated_tensor_count", cut("", 12), "tensor_count", ErrTruncated, ""},
	{"truncated_kv_count", cut("", 20), "metadata_kv_count", ErrTruncated, ""},
	{"huge_kv_count", func() []byte { return newBuilder(3, 0, 1<<62).b }, "metadata_kv_count", nil, "key-value pairs need"},
	{"huge_tensor_count", func() []byte { return newBuilder(3, 1<<40, 0).fill(64, 0).b }, "tensor_count", nil, "tensor infos need"},
	{"counts_exceed_file", func() []byte { return newBuilder(3, 2, 3).fill(64, 0).b }, "tensor_count", nil, "after the metadata"},
	{"truncated_key", func() []byte {
		return newBuilder(3, 0, 1).u64(20).fill(13, 'a').b
	}, "kv[0].key", ErrTruncated, "string of 20 bytes, 13 remain"},
	{"key_past_end", func() []byte {
		return newBuilder(3, 0, 1).u64(1<<40).fill(16, 'a').b
	}, "kv[0].key", ErrTruncated, "string of 1099511627776 bytes"},
	{"truncated_value_type", func() []byte {
		return newBuilder(3, 0, 2).kv("a", TypeUint8).u8(1).str("general.name").raw(8, 0).b
	}, "kv[1].type", ErrTruncated, ""},
	{"unknown_value_type", func() []byte {
		return newBuilder(3, 0, 1).kv("x", 13).fill(8, 0).b
	}, "kv[0].type", nil, "unknown value type 13"},
	{"truncated_value", func() []byte {
		return newBuilder(3, 0, 1).kv(alignmentKey, TypeUint32).raw(32, 0).b
	}, "kv[0].value", ErrTruncated, "need 4 bytes, 2 remain"},
	{"string_value_past_end", func() []byte {
		return newBuilder(3, 0, 1).kv("general.name", TypeString).u64(1000).fill(10, 'a').b
	}, "kv[0].value", ErrTruncated, "string of 1000 bytes"},
	{"bad_bool", func() []byte {
		return newBuilder(3, 0, 1).kv("flag", TypeBool).u8(2).b
	}, "kv[0].value", nil, "bool value 2"},
	{"duplicate_key", func() []byte {
		return newBuilder(3, 0, 2).kv("a", TypeUint8).u8(1).kv("a", TypeUint8).u8(2).b
	}, "kv[1].key", nil, "duplicate key (also kv[0])"},
	{"array_huge_count", func() []byte {
		return newBuilder(3, 0, 1).kv("a", TypeArray).u32(uint32(TypeUint32)).u64(1<<61).fill(16, 0).b
	}, "kv[0].value.count", nil, "2305843009213693952 elements of uint32"},
	{"array_bad_element_type", func() []byte {
		return newBuilder(3, 0, 1).kv("a", TypeArray).u32(99).u64(1).fill(16, 0).b
	}, "kv[0].value.type", nil, "unknown element type 99"},
	{"array_string_past_end", func() []byte {
		return newBuilder(3, 0, 1).kv("tokens", TypeArray).u32(uint32(TypeString)).u64(2).str("ok").u64(50).fill(10, 'a').b
	}, "kv[0].value[1]", ErrTruncated, "string of 50 bytes"},
	{"array_bad_bool", func() []byte {
		return newBuilder(3, 0, 1).kv("flags", TypeArray).u32(uint32(TypeBool)).u64(3).raw(0, 1, 7).b
	}, "kv[0].value[2]", nil, "bool value 7"},
	{"nested_array_count", func() []byte {
		return newBuilder(3, 0, 1).kv("a", TypeArray).u32(uint32(TypeArray)).u64(1).u32(uint32(TypeInt64)).u64(3).fill(16, 0).b
	}, "kv[0].value[0].count", nil, "3 elements of int64"},
	{"arrays_too_deep", func() []byte {
		return nested(newBuilder(3, 0, 1).kv("deep", TypeArray), maxArrayDepth+1).b
	}, "kv[0].value" + strings.Repeat("[0]", maxArrayDepth), nil, "nested more than 8 deep"},
	{"alignment_zero", func() []byte {
		return newBuilder(3, 0, 1).kv(alignmentKey, TypeUint32).u32(0).b
	}, "kv[0].value", nil, "alignment 0 is not a power of two"},
	{"alignment_not_power_of_two", func() []byte {
		return newBuilder(3, 0, 1).kv(alignmentKey, TypeUint32).u32(48).b
	}, "kv[0].value", nil, "alignment 48 is not a power of two"},
	{"alignment_too_large", func() []byte {
		return newBuilder(3, 0, 1).kv(alignmentKey, TypeUint32).u32(1 << 30).b
	}, "kv[0].value", nil, "above the limit"},
	{"alignment_wrong_type", func() []byte {
		return newBuilder(3, 0, 1).kv(alignmentKey, TypeUint64).u64(32).b
	}, "kv[0].type", nil, "is uint64, want uint32"},
	{"truncated_tensor_name", cut("ti0", 4), "tensor_info[0].name", ErrTruncated, ""},
	{"truncated_dims", cut("ti1", 8+1+4+10), "tensor_info[1].dims[1]", ErrTruncated, ""},
	{"truncated_tensor_type", cut("ti1", 8+1+4+16+2), "tensor_info[1].type", ErrTruncated, ""},
	{"truncated_offset", cut("end_infos", -3), "tensor_info[1].offset", ErrTruncated, ""},
	{"truncated_data", cut("data1", 40), "tensor_info[1].offset", nil, "ends past the end of the file"},
	{"n_dims_zero", func() []byte {
		return newBuilder(3, 1, 0).tensor("t", nil, quant.F32, 0).pad(32).fill(32, 0).b
	}, "tensor_info[0].n_dims", nil, "0 dimensions"},
	{"n_dims_five", func() []byte {
		return newBuilder(3, 1, 0).tensor("t", []uint64{1, 1, 1, 1, 1}, quant.F32, 0).pad(32).fill(32, 0).b
	}, "tensor_info[0].n_dims", nil, "5 dimensions"},
	{"dim_zero", func() []byte {
		return newBuilder(3, 1, 0).tensor("t", []uint64{4, 0}, quant.F32, 0).pad(32).fill(32, 0).b
	}, "tensor_info[0].dims[1]", nil, "dimension 1 is 0"},
	{"dims_overflow", func() []byte {
		return newBuilder(3, 1, 0).tensor("t", []uint64{1 << 32, 1 << 20, 1 << 20}, quant.F32, 0).pad(32).fill(32, 0).b
	}, "tensor_info[0].dims[2]", nil, "overflows"},
	{"size_overflow", func() []byte {
		return newBuilder(3, 1, 0).tensor("t", []uint64{1 << 31, 1 << 31}, quant.F32, 0).pad(32).fill(32, 0).b
	}, "tensor_info[0].type", nil, "more than 2^63 bytes"},
	{"unknown_tensor_type", func() []byte {
		return newBuilder(3, 1, 0).tensor("t", []uint64{4}, 99, 0).pad(32).fill(32, 0).b
	}, "tensor_info[0].type", nil, "unknown tensor type 99"},
	{"row_not_block_multiple", func() []byte {
		return newBuilder(3, 1, 0).tensor("t", []uint64{33}, quant.Q4_0, 0).pad(32).fill(64, 0).b
	}, "tensor_info[0].dims[0]", nil, "row length 33 is not a multiple of Q4_0's block size 32"},
	{"misaligned_offset", func() []byte {
		return newBuilder(3, 2, 0).tensor("a", []uint64{4}, quant.F32, 0).tensor("b", []uint64{4}, quant.F32, 16).pad(32).fill(64, 0).b
	}, "tensor_info[1].offset", nil, "offset 16 is not a multiple of the alignment 32"},
	{"offset_past_end", func() []byte {
		return newBuilder(3, 1, 0).tensor("t", []uint64{4}, quant.F32, 1<<60).pad(32).fill(32, 0).b
	}, "tensor_info[0].offset", nil, "ends past the end of the file"},
	{"overlapping_tensors", func() []byte {
		return newBuilder(3, 2, 0).tensor("a", []uint64{16}, quant.F32, 0).tensor("b", []uint64{4}, quant.F32, 32).pad(32).fill(64, 0).b
	}, "tensor_info[1].offset", nil, "overlaps tensor_info[0] (a)"},
	{"same_offset", func() []byte {
		return newBuilder(3, 2, 0).tensor("a", []uint64{4}, quant.F32, 0).tensor("b", []uint64{4}, quant.F32, 0).pad(32).fill(32, 0).b
	}, "tensor_info[1].offset", nil, "overlaps"},
	{"duplicate_tensor_name", func() []byte {
		return newBuilder(3, 2, 0).tensor("a", []uint64{4}, quant.F32, 0).tensor("a", []uint64{4}, quant.F32, 32).pad(32).fill(64, 0).b
	}, "tensor_info[1].name", nil, "duplicate tensor name (also tensor_info[0])"},
}

// TestBadFiles parses each hand-made file in testdata/bad and checks that it
// gets its own error: the field, a sentinel where one applies, and a message.
// With -update the files are first rewritten from badCases.
func TestBadFiles(t *testing.T) {
	dir := filepath.Join("testdata", "bad")
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		old, _ := filepath.Glob(filepath.Join(dir, "*.gguf"))
		for _, p := range old {
			os.Remove(p)
		}
		for _, c := range badCases {
			if err := os.WriteFile(filepath.Join(dir, c.name+".gguf"), c.build(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.gguf"))
	if len(files) != len(badCases) {
		t.Errorf("testdata/bad has %d files, badCases %d: run go test -run TestBadFiles -update", len(files), len(badCases))
	}
	for _, c := range badCases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".gguf")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestBadFiles -update)", err)
			}
			if !bytes.Equal(data, c.build()) {
				t.Errorf("%s differs from what badCases builds (run go test -run TestBadFiles -update)", path)
			}
			f, err := Parse(data, path)
			if err == nil {
				t.Fatalf("parsed without error: %d keys, %d tensors", len(f.KV), len(f.Tensors))
			}
			t.Log(err)
			checkBad(t, c, err, len(data))
			// Open maps the file (or reads it, off Linux and macOS) and
			// must fail the same way.
			if _, err2 := Open(path); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("Open: %v\nParse: %v", err2, err)
			}
		})
	}
}

func checkBad(t *testing.T, c badCase, err error, size int) {
	t.Helper()
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *ParseError", err, err)
	}
	if pe.Field != c.field {
		t.Errorf("field %q, want %q; error: %v", pe.Field, c.field, err)
	}
	if c.is != nil && !errors.Is(err, c.is) {
		t.Errorf("error does not wrap %v: %v", c.is, err)
	}
	if !strings.Contains(err.Error(), c.msg) {
		t.Errorf("error %q does not say %q", err, c.msg)
	}
	if pe.Offset < 0 || pe.Offset > int64(size) {
		t.Errorf("offset %d outside the file of %d bytes", pe.Offset, size)
	}
	if !strings.HasPrefix(err.Error(), "gguf: "+pe.Path+": "+pe.Field) {
		t.Errorf("error %q does not start with the path and field", err)
	}
}

// TestTruncatedEverywhere cuts the good file at every length short of its
// last tensor's end: each cut must fail with a *ParseError, and no cut may
// panic.
func TestTruncatedEverywhere(t *testing.T) {
	g := goodFile()
	end := g.marks["data1"] + 68
	if _, err := Parse(g.b[:end], "good"); err != nil {
		t.Fatalf("the good file without trailing padding: %v", err)
	}
	for n := range end {
		_, err := Parse(g.b[:n], "cut")
		if errorField(err) == "" {
			t.Fatalf("cut at %d: %v, want a *ParseError", n, err)
		}
	}
}
