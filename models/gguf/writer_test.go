package gguf

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hybrid/quant"
)

var (
	writerKVs     = []KV{{"general.architecture", "llama"}, {"tokens", []string{"a", "b"}}, {"scores", []float32{1, 2}}}
	writerTensors = []TensorInfo{
		{Name: "a", Dims: []uint64{5}, Type: quant.F32},
		{Name: "b", Dims: []uint64{32, 3}, Type: quant.Q4_0},
		{Name: "c", Dims: []uint64{1}, Type: quant.F16},
	}
	writerData = [][]byte{bytes.Repeat([]byte{1}, 20), bytes.Repeat([]byte{2}, 54), {3, 3}}
)

// TestWriteChunks writes the tensors through io.Copy in pieces that cross
// tensor boundaries: the result must equal writing them whole.
func TestWriteChunks(t *testing.T) {
	want := writeMem(t, writerKVs, writerTensors, writerData)
	var buf bytes.Buffer
	w, err := NewWriter(&buf, writerKVs, writerTensors)
	if err != nil {
		t.Fatal(err)
	}
	var progress []int64
	w.Progress = func(done, total int64) {
		if total != w.Size() {
			t.Errorf("progress total %d, want %d", total, w.Size())
		}
		progress = append(progress, done)
	}
	all := bytes.Join(writerData, nil)
	if _, err := io.CopyBuffer(w, struct{ io.Reader }{bytes.NewReader(all)}, make([]byte, 7)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Error("chunked writes differ from WriteTensor")
	}
	for i := 1; i < len(progress); i++ {
		if progress[i] < progress[i-1] {
			t.Fatalf("progress went back: %v", progress)
		}
	}
	if len(progress) < 3 || progress[len(progress)-1] != int64(len(want)) {
		t.Errorf("progress %v, want it to end at %d", progress, len(want))
	}
	f, err := Parse(buf.Bytes(), "chunks")
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Tensors(); got[2].Offset != f.Tensors[2].Offset || got[1].Offset != 32 || got[2].Offset != 96 {
		t.Errorf("offsets %d %d %d", got[0].Offset, got[1].Offset, got[2].Offset)
	}
	if s, _ := f.Strings("tokens"); len(s) != 2 {
		t.Errorf("tokens = %v", s)
	}
}

// TestCreateAtomic checks that Create leaves the destination alone, and no
// temporary file behind, unless Close succeeds.
func TestCreateAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.gguf")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	unchanged := func(when string) {
		t.Helper()
		if b, _ := os.ReadFile(path); string(b) != "old" {
			t.Errorf("%s: destination changed", when)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("%s: %d files in the directory, want 1", when, len(ents))
		}
	}

	w, err := Create(path, writerKVs, writerTensors)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteTensor(writerData[0])
	w.Abort()
	unchanged("Abort")
	if err := w.Close(); err == nil {
		t.Error("Close after Abort succeeded")
	}

	w, _ = Create(path, writerKVs, writerTensors)
	w.WriteTensor(writerData[0])
	w.Write(writerData[1][:10])
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "tensor b (2 of 3) is incomplete: 10 of 54 bytes written") {
		t.Errorf("Close of an incomplete file: %v", err)
	}
	unchanged("incomplete Close")

	w, _ = Create(path, writerKVs, writerTensors)
	if err := w.WriteTensor(writerData[1]); err == nil || !strings.Contains(err.Error(), "tensor a is 20 bytes (F32 [5]), got 54") {
		t.Errorf("WriteTensor of the wrong size: %v", err)
	}
	if err := w.WriteTensor(writerData[0]); err == nil {
		t.Error("the writer went on after an error")
	}
	w.Close()
	unchanged("wrong size")

	w, _ = Create(path, writerKVs, writerTensors)
	for _, d := range writerData {
		if err := w.WriteTensor(d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Write([]byte{0}); err == nil {
		t.Error("Write past the last tensor succeeded")
	}
	w.Close()
	unchanged("too much data")

	w, _ = Create(path, writerKVs, writerTensors)
	for _, d := range writerData {
		w.WriteTensor(d)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, writeMem(t, writerKVs, writerTensors, writerData)) {
		t.Error("Create wrote different bytes from NewWriter")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files in the directory after Close, want 1", len(ents))
	}
	if _, err := Create(filepath.Join(dir, "no", "such", "dir.gguf"), nil, nil); err == nil {
		t.Error("Create in a missing directory succeeded")
	}
}

// TestWriterRejects checks that the Writer refuses what the reader would.
func TestWriterRejects(t *testing.T) {
	f32 := func(name string, dims ...uint64) TensorInfo {
		return TensorInfo{Name: name, Dims: dims, Type: quant.F32}
	}
	deep := Array{TypeUint8, []uint8{}}
	for range maxArrayDepth {
		deep = Array{TypeArray, []Array{deep}}
	}
	for _, c := range []struct {
		name    string
		kvs     []KV
		tensors []TensorInfo
		msg     string
	}{
		{"duplicate key", []KV{{"a", uint8(1)}, {"a", uint8(2)}}, nil, "metadata key a appears twice"},
		{"int", []KV{{"n", 3}}, nil, "gguf: metadata key n: a value of Go type int cannot be stored"},
		{"array type", []KV{{"a", Array{TypeInt32, []float32{1}}}}, nil, "array of int32 holds Go type []float32"},
		{"nested array type", []KV{{"a", []Array{{TypeString, []int8{1}}}}}, nil, "array of string holds Go type []int8"},
		{"too deep", []KV{{"a", deep}}, nil, "nested more than 8 deep"},
		{"alignment type", []KV{{alignmentKey, uint64(32)}}, nil, "general.alignment must be a uint32 power of two"},
		{"alignment value", []KV{{alignmentKey, uint32(24)}}, nil, "general.alignment must be a uint32 power of two"},
		{"duplicate tensor", nil, []TensorInfo{f32("t", 1), f32("t", 1)}, "tensor t appears twice"},
		{"no dims", nil, []TensorInfo{f32("t")}, "tensor t: 0 dimensions"},
		{"zero dim", nil, []TensorInfo{f32("t", 2, 0)}, "tensor t: dimension 1 is 0"},
		{"unknown type", nil, []TensorInfo{{Name: "t", Dims: []uint64{1}, Type: 77}}, "tensor t: unknown tensor type 77"},
		{"block", nil, []TensorInfo{{Name: "t", Dims: []uint64{100}, Type: quant.Q4_K}}, "row length 100 is not a multiple of Q4_K's block size 256"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewWriter(io.Discard, c.kvs, c.tensors)
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %v, want %q", err, c.msg)
			}
		})
	}
}

// TestWriterNoTensors writes a metadata-only file, padded as llama.cpp pads
// one.
func TestWriterNoTensors(t *testing.T) {
	b := writeMem(t, []KV{{"k", "v"}}, nil, nil)
	if len(b)%DefaultAlignment != 0 {
		t.Errorf("%d bytes, want a multiple of %d", len(b), DefaultAlignment)
	}
	f, err := Parse(b, "meta")
	if err != nil || len(f.KV) != 1 {
		t.Fatalf("%v, %v", f, err)
	}
}
