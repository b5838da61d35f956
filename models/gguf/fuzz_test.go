package gguf

import (
	"hybrid/internal/testmodels"

	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse parses arbitrary bytes: it must never panic, and a file it
// accepts must survive a round trip through the Writer with the same
// metadata, tensor infos and tensor data, and the Writer's output must be a
// fixed point (writing it again gives the same bytes).
//
// Seeds: the shared models, the hand-made good file, the files in
// testdata/bad, and a file with every metadata type.
func FuzzParse(f *testing.F) {
	if dir, ok := testmodels.Find(); ok {
		paths, _ := filepath.Glob(filepath.Join(dir, "*.gguf"))
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add(goodFile().b)
	bad, _ := filepath.Glob(filepath.Join("testdata", "bad", "*.gguf"))
	for _, p := range bad {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	var all bytes.Buffer
	if w, err := NewWriter(&all, allTypesKVs, nil); err == nil && w.Close() == nil {
		f.Add(all.Bytes())
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		orig, err := Parse(data, "fuzz")
		if err != nil {
			if errorField(err) == "" {
				t.Fatalf("error is not a *ParseError: %v", err)
			}
			return
		}
		once := rewrite(t, orig)
		copied, err := Parse(once, "copy")
		if err != nil {
			t.Fatalf("the Writer's output does not parse: %v", err)
		}
		if diff := sameContents(orig, copied); diff != "" {
			t.Fatalf("round trip: %s", diff)
		}
		if twice := rewrite(t, copied); !bytes.Equal(once, twice) {
			t.Fatal("writing the copy again changed its bytes")
		}
	})
}
