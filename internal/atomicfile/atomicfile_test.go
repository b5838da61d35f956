package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.json")
	for _, c := range []struct {
		name string
		data string
		perm os.FileMode
	}{
		{"new", "first\n", 0o644},
		{"replace", "second, longer\n", 0o600},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := Write(path, []byte(c.data), c.perm); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil || string(b) != c.data {
				t.Fatalf("read %q, %v; want %q", b, err, c.data)
			}
			st, err := os.Stat(path)
			if err != nil || st.Mode().Perm() != c.perm {
				t.Fatalf("mode %v, %v; want %v", st.Mode().Perm(), err, c.perm)
			}
			ents, err := os.ReadDir(dir)
			if err != nil || len(ents) != 1 {
				t.Fatalf("folder holds %d entries (%v), want the file alone", len(ents), err)
			}
		})
	}
	t.Run("missing folder", func(t *testing.T) {
		if err := Write(filepath.Join(dir, "no", "out.json"), []byte("x"), 0o644); err == nil {
			t.Fatal("no error writing into a missing folder")
		}
	})
}
