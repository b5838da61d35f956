package llama

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hybrid/models/builtin"
	"hybrid/models/gguf"
)

// withKV returns the built-in model's file with key set to v (added if it is
// not there), parsed under the name "m.gguf".
func withKV(t *testing.T, key string, v any) *gguf.File {
	t.Helper()
	f, err := gguf.Parse(builtin.Model(), builtin.Name)
	if err != nil {
		t.Fatal(err)
	}
	kvs := append([]gguf.KV(nil), f.KV...)
	found := false
	for i := range kvs {
		if kvs[i].Key == key {
			kvs[i].Value, found = v, true
		}
	}
	if !found {
		kvs = append(kvs, gguf.KV{Key: key, Value: v})
	}
	return rewritten(t, f, kvs, f.Tensors, nil)
}

// rewritten writes f's tensors, then extra's data for the tensors beyond
// f's (one []byte each), under kvs and tensors as a new file, parsed under
// the name "m.gguf".
func rewritten(t *testing.T, f *gguf.File, kvs []gguf.KV, tensors []gguf.TensorInfo, extra [][]byte) *gguf.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	w, err := gguf.Create(path, kvs, tensors)
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.Tensors {
		if err := w.WriteTensor(f.TensorData(&f.Tensors[i])); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range extra {
		if err := w.WriteTensor(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Parse(data, "m.gguf")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestConfigNamesWrongTypes checks that a key of the wrong type is reported
// with the type found and the type wanted, not as missing, and not replaced
// by a default when the key has one; and that the error names the file once.
func TestConfigNamesWrongTypes(t *testing.T) {
	for name, tc := range map[string]struct {
		key  string
		val  any
		want string
	}{
		"head_count f32":      {"llama.attention.head_count", float32(8), "llama.attention.head_count is float32, want an unsigned integer"},
		"block_count string":  {"llama.block_count", "5", "llama.block_count is string, want an unsigned integer"},
		"block_count -1":      {"llama.block_count", int32(-1), "llama.block_count is -1, want a non-negative integer"},
		"architecture uint32": {"general.architecture", uint32(1), "general.architecture is uint32, want string"},
		// Keys with a default: a value of the wrong type is not the default.
		"head_count_kv f32":  {"llama.attention.head_count_kv", float32(4), "llama.attention.head_count_kv is float32, want an unsigned integer"},
		"context_length f32": {"llama.context_length", float32(2048), "llama.context_length is float32, want an unsigned integer"},
		"rope dims bool":     {"llama.rope.dimension_count", true, "llama.rope.dimension_count is bool, want an unsigned integer"},
		"freq_base string":   {"llama.rope.freq_base", "1e4", "llama.rope.freq_base is string, want a float"},
		"freq_base int":      {"llama.rope.freq_base", uint32(10000), "llama.rope.freq_base is uint32, want a float"},
		"epsilon f32 array":  {"llama.attention.layer_norm_rms_epsilon", gguf.Array{Type: gguf.TypeFloat32, Values: []float32{1e-5}}, "is array of float32, want a float"},
		"vocab_size f32":     {"llama.vocab_size", float32(512), "llama.vocab_size is float32, want an unsigned integer"},
		"key_length f32":     {"llama.attention.key_length", float32(32), "llama.attention.key_length is float32, want an unsigned integer"},
		"value_length str":   {"llama.attention.value_length", "32", "llama.attention.value_length is string, want an unsigned integer"},
		"scaling type u32":   {"llama.rope.scaling.type", uint32(1), "llama.rope.scaling.type is uint32, want string"},
		"scaling factor str": {"llama.rope.scaling.factor", "4", "llama.rope.scaling.factor is string, want a float"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := FromFile(withKV(t, tc.key, tc.val), "m.gguf")
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not say %q", msg, tc.want)
			}
			if n := strings.Count(msg, "m.gguf"); n != 1 {
				t.Errorf("error %q names the file %d times, want once", msg, n)
			}
		})
	}
	// Keys of the right type, including signed integers, still load.
	if _, err := FromFile(withKV(t, "llama.rope.dimension_count", int32(8)), "m.gguf"); err != nil {
		t.Errorf("an int32 rope.dimension_count: %v", err)
	}
	if _, err := FromFile(withKV(t, "llama.vocab_size", uint32(512)), "m.gguf"); err != nil {
		t.Errorf("a matching vocab_size: %v", err)
	}
}
