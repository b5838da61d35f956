package gguf

import (
	"hybrid/internal/testmodels"

	"bytes"
	"os"
	"path/filepath"
	"testing"

	"hybrid/quant"
)

// TestModels opens each shared model, checks what a loader reads from it,
// and writes it back: the copy must parse to the same metadata, tensor infos
// and tensor bytes, and, since llama.cpp lays files out as the Writer does,
// be byte for byte the original.
func TestModels(t *testing.T) {
	for _, path := range testModels(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if arch, ok := f.String("general.architecture"); !ok || arch != "llama" {
				t.Errorf("general.architecture = %q, %v", arch, ok)
			}
			if n, ok := f.Uint("llama.block_count"); !ok || n != 5 {
				t.Errorf("llama.block_count = %d, %v; want 5", n, ok)
			}
			if eps, ok := f.Float("llama.attention.layer_norm_rms_epsilon"); !ok || eps <= 0 {
				t.Errorf("llama.attention.layer_norm_rms_epsilon = %g, %v", eps, ok)
			}
			tokens, ok := f.Strings("tokenizer.ggml.tokens")
			scores, ok2 := f.Float32s("tokenizer.ggml.scores")
			types, ok3 := f.Int32s("tokenizer.ggml.token_type")
			if !ok || !ok2 || !ok3 || len(tokens) != 512 || len(scores) != 512 || len(types) != 512 {
				t.Errorf("tokenizer arrays: %d tokens (%v), %d scores (%v), %d types (%v); want 512 each", len(tokens), ok, len(scores), ok2, len(types), ok3)
			}
			emb, ok := f.Tensor("token_embd.weight")
			if !ok || len(emb.Dims) != 2 || emb.Dims[0] != 64 || emb.Dims[1] != 512 {
				t.Fatalf("token_embd.weight = %+v, %v; want dims [64 512]", emb, ok)
			}
			if data, err := f.TensorDataByName("token_embd.weight"); err != nil || int64(len(data)) != emb.Size() {
				t.Errorf("token_embd.weight: %d bytes, %v; want %d", len(data), err, emb.Size())
			}
			var total int64
			for i := range f.Tensors {
				total += int64(len(f.TensorData(&f.Tensors[i])))
			}
			t.Logf("v%d, %d keys, %d tensors, %d data bytes, alignment %d", f.Version, len(f.KV), len(f.Tensors), total, f.Alignment)

			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "copy.gguf")
			if err := copyFile(f, out); err != nil {
				t.Fatal(err)
			}
			g, err := Open(out)
			if err != nil {
				t.Fatalf("copy: %v", err)
			}
			defer g.Close()
			if diff := sameContents(f, g); diff != "" {
				t.Fatalf("copy: %s", diff)
			}
			copied, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(orig, copied) {
				t.Errorf("copy is not byte-identical (%d vs %d bytes, first difference at %d)", len(orig), len(copied), firstDiff(orig, copied))
			}
		})
	}
}

// copyFile writes f to path with Create, tensor by tensor.
func copyFile(f *File, path string) error {
	w, err := Create(path, f.KV, f.Tensors)
	if err != nil {
		return err
	}
	for i := range f.Tensors {
		if err := w.WriteTensor(f.TensorData(&f.Tensors[i])); err != nil {
			w.Abort()
			return err
		}
	}
	return w.Close()
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestModelsTypes checks that the mixed-type model holds the types its
// README says, so that the round trip covered quantized layouts.
func TestModelsTypes(t *testing.T) {
	path := filepath.Join(testmodels.Dir(t), "stories260K-Q4_K_M.gguf")
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[quant.Type]int{}
	for _, ti := range f.Tensors {
		seen[ti.Type]++
	}
	for _, want := range []quant.Type{quant.F32, quant.Q5_0, quant.Q8_0} {
		if seen[want] == 0 {
			t.Errorf("no %s tensor; types seen: %v", want, seen)
		}
	}
}
