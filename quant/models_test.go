package quant

import (
	"hybrid/internal/testmodels"

	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"testing"
)

// TestModelFilesLlamaQuantize re-quantizes every tensor of the F32
// stories260K.gguf with Quantize and compares the bytes with the files that
// llama.cpp's llama-quantize wrote (no importance matrix, so its reference
// quantizers): they must be identical.
func TestModelFilesLlamaQuantize(t *testing.T) {
	orig, err := readTinyGGUF(testmodels.Path(t, "stories260K.gguf"))
	if err != nil {
		t.Fatalf("test model: %v", err)
	}
	for _, name := range []string{"F16", "Q8_0", "Q4_0", "Q4_K_M"} {
		t.Run(name, func(t *testing.T) {
			q, err := readTinyGGUF(testmodels.Path(t, "stories260K-"+name+".gguf"))
			if err != nil {
				t.Fatalf("test model: %v", err)
			}
			checked := map[Type]int{}
			for tn, qt := range q {
				ot, ok := orig[tn]
				if !ok || ot.typ != F32 {
					t.Fatalf("tensor %s: not F32 in the original", tn)
				}
				if qt.typ == F32 || !qt.typ.Supported() {
					continue
				}
				x := make([]float32, len(ot.data)/4)
				if err := Dequantize(F32, ot.data, x); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, len(qt.data))
				if err := Quantize(qt.typ, x, got); err != nil {
					t.Fatalf("tensor %s: %v", tn, err)
				}
				if !bytes.Equal(got, qt.data) {
					t.Errorf("tensor %s (%s): differs from llama-quantize at %s", tn, qt.typ, firstBlockDiff(qt.typ, got, qt.data))
				}
				checked[qt.typ]++
			}
			if len(checked) == 0 {
				t.Fatal("no quantized tensors found")
			}
			t.Logf("tensors identical to llama-quantize's, by type: %v", checked)
		})
	}
}

type tinyTensor struct {
	typ  Type
	data []byte
}

// readTinyGGUF is a throwaway GGUF v2/v3 reader for these tests only (the
// project's real reader is package gguf): it returns each tensor's type and
// bytes.
func readTinyGGUF(path string) (map[string]tinyTensor, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := bytes.NewReader(raw)
	var hdr struct {
		Magic    [4]byte
		Version  uint32
		NTensors uint64
		NKV      uint64
	}
	if err := binary.Read(r, binary.LittleEndian, &hdr); err != nil || string(hdr.Magic[:]) != "GGUF" || hdr.Version < 2 {
		return nil, fmt.Errorf("%s: not a GGUF v2+ file", path)
	}
	// Reads past the end yield zeros; the bounds checks below catch the rest.
	u32 := func() (v uint32) {
		binary.Read(r, binary.LittleEndian, &v)
		return v
	}
	u64 := func() (v uint64) {
		binary.Read(r, binary.LittleEndian, &v)
		return v
	}
	str := func() string {
		n := u64()
		if n > uint64(r.Len()) {
			return ""
		}
		b := make([]byte, n)
		io.ReadFull(r, b)
		return string(b)
	}
	sizes := map[uint32]int64{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
	var skip func(vt uint32) error
	skip = func(vt uint32) error {
		switch {
		case vt == 8:
			str()
		case vt == 9:
			et, n := u32(), u64()
			for range n {
				if err := skip(et); err != nil {
					return err
				}
			}
		case sizes[vt] > 0:
			r.Seek(sizes[vt], io.SeekCurrent)
		default:
			return fmt.Errorf("%s: bad metadata value type %d", path, vt)
		}
		return nil
	}
	align := uint64(32)
	for range hdr.NKV {
		key, vt := str(), u32()
		if key == "general.alignment" && vt == 4 {
			align = uint64(u32())
			continue
		}
		if err := skip(vt); err != nil {
			return nil, err
		}
	}
	type info struct {
		name string
		n    int
		typ  Type
		off  uint64
	}
	var infos []info
	for range hdr.NTensors {
		in := info{name: str(), n: 1}
		for range u32() {
			in.n *= int(u64())
		}
		in.typ, in.off = Type(u32()), u64()
		infos = append(infos, in)
	}
	pos := uint64(len(raw) - r.Len())
	base := (pos + align - 1) / align * align
	out := map[string]tinyTensor{}
	for _, in := range infos {
		nb, err := RowBytes(in.typ, in.n)
		if err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %w", path, in.name, err)
		}
		start := base + in.off
		if start+uint64(nb) > uint64(len(raw)) {
			return nil, fmt.Errorf("%s: tensor %s runs past the end", path, in.name)
		}
		out[in.name] = tinyTensor{in.typ, raw[start : start+uint64(nb)]}
	}
	return out, nil
}
