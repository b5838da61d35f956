package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"testing"
)

// This file holds just enough of a GGUF reader to load a tokenizer from a
// real model in tests, so that this package's tests do not depend on the
// gguf package.

// loadVocab reads the tokenizer metadata of the GGUF file at path.
func loadVocab(t *testing.T, path string) Vocab {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kv, err := readGGUFMetadata(bufio.NewReader(f))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return vocabFromMetadata(t, kv)
}

// vocabFromMetadata fills a Vocab from GGUF key-value pairs, starting from
// NewVocab's defaults.
func vocabFromMetadata(t *testing.T, kv map[string]any) Vocab {
	t.Helper()
	model, _ := kv["tokenizer.ggml.model"].(string)
	v := NewVocab(model)
	if a, ok := kv["tokenizer.ggml.tokens"].([]any); ok {
		for _, x := range a {
			v.Tokens = append(v.Tokens, x.(string))
		}
	}
	if a, ok := kv["tokenizer.ggml.scores"].([]any); ok {
		for _, x := range a {
			v.Scores = append(v.Scores, x.(float32))
		}
	}
	if a, ok := kv["tokenizer.ggml.token_type"].([]any); ok {
		for _, x := range a {
			v.Types = append(v.Types, x.(int32))
		}
	}
	for key, dst := range map[string]*int32{
		"tokenizer.ggml.bos_token_id":     &v.BOS,
		"tokenizer.ggml.eos_token_id":     &v.EOS,
		"tokenizer.ggml.unknown_token_id": &v.UNK,
		"tokenizer.ggml.padding_token_id": &v.PAD,
		"tokenizer.ggml.eot_token_id":     &v.EOT,
	} {
		if x, ok := kv[key].(uint32); ok {
			*dst = int32(x)
		}
	}
	for key, dst := range map[string]*string{
		"tokenizer.ggml.pre":   &v.Pre,
		"general.name":         &v.Name,
		"general.architecture": &v.Architecture,
	} {
		if x, ok := kv[key].(string); ok {
			*dst = x
		}
	}
	for key, dst := range map[string]*bool{
		"tokenizer.ggml.add_bos_token":    &v.AddBOS,
		"tokenizer.ggml.add_eos_token":    &v.AddEOS,
		"tokenizer.ggml.add_space_prefix": &v.AddSpacePrefix,
	} {
		if x, ok := kv[key].(bool); ok {
			*dst = x
		}
	}
	return v
}

// readGGUFMetadata reads a GGUF header and its key-value pairs (v2 and v3
// layout: 64-bit counts and lengths, little-endian).
func readGGUFMetadata(r io.Reader) (map[string]any, error) {
	var hdr struct {
		Magic    [4]byte
		Version  uint32
		NTensors uint64
		NKV      uint64
	}
	if err := binary.Read(r, binary.LittleEndian, &hdr); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if string(hdr.Magic[:]) != "GGUF" {
		return nil, fmt.Errorf("bad magic %q", hdr.Magic[:])
	}
	if hdr.Version < 2 {
		return nil, fmt.Errorf("GGUF version %d not supported", hdr.Version)
	}
	kv := make(map[string]any, hdr.NKV)
	for i := uint64(0); i < hdr.NKV; i++ {
		key, err := readGGUFString(r)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
		var typ uint32
		if err := binary.Read(r, binary.LittleEndian, &typ); err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
		val, err := readGGUFValue(r, typ)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
		kv[key] = val
	}
	return kv, nil
}

func readGGUFString(r io.Reader) (string, error) {
	var n uint64
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
		return "", err
	}
	if n > 1<<30 {
		return "", fmt.Errorf("string length %d too large", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

func readGGUFValue(r io.Reader, typ uint32) (any, error) {
	le := binary.LittleEndian
	var err error
	read := func(p any) { err = binary.Read(r, le, p) }
	switch typ {
	case 0:
		var x uint8
		read(&x)
		return x, err
	case 1:
		var x int8
		read(&x)
		return x, err
	case 2:
		var x uint16
		read(&x)
		return x, err
	case 3:
		var x int16
		read(&x)
		return x, err
	case 4:
		var x uint32
		read(&x)
		return x, err
	case 5:
		var x int32
		read(&x)
		return x, err
	case 6:
		var x uint32
		read(&x)
		return math.Float32frombits(x), err
	case 7:
		var x uint8
		read(&x)
		return x != 0, err
	case 8:
		return readGGUFString(r)
	case 9:
		var elem uint32
		var n uint64
		read(&elem)
		if err == nil {
			read(&n)
		}
		if err != nil {
			return nil, err
		}
		if n > 1<<28 {
			return nil, fmt.Errorf("array length %d too large", n)
		}
		a := make([]any, n)
		for i := range a {
			if a[i], err = readGGUFValue(r, elem); err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
		}
		return a, nil
	case 10:
		var x uint64
		read(&x)
		return x, err
	case 11:
		var x int64
		read(&x)
		return x, err
	case 12:
		var x float64
		read(&x)
		return x, err
	}
	return nil, fmt.Errorf("unknown value type %d", typ)
}

// ggufArrayOffset returns where the elements of the float32 array under
// key start in the GGUF file data, and how many there are.
func ggufArrayOffset(data []byte, key string) (off, n int, err error) {
	r := bytes.NewReader(data)
	var hdr [24]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, 0, err
	}
	nkv := binary.LittleEndian.Uint64(hdr[16:])
	for i := uint64(0); i < nkv; i++ {
		k, err := readGGUFString(r)
		if err != nil {
			return 0, 0, err
		}
		var typ uint32
		if err := binary.Read(r, binary.LittleEndian, &typ); err != nil {
			return 0, 0, err
		}
		if k == key {
			var arr struct {
				Elem uint32
				N    uint64
			}
			if err := binary.Read(r, binary.LittleEndian, &arr); err != nil {
				return 0, 0, err
			}
			if typ != 9 || arr.Elem != 6 {
				return 0, 0, fmt.Errorf("key %q is not an array of float32", key)
			}
			return int(r.Size()) - r.Len(), int(arr.N), nil
		}
		if _, err := readGGUFValue(r, typ); err != nil {
			return 0, 0, err
		}
	}
	return 0, 0, fmt.Errorf("key %q not found", key)
}
