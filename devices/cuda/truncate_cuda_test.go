//go:build cuda && (linux || darwin)

package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"hybrid/ops"
	"hybrid/quant"
)

// TestLoadWeightFromTruncatedFile uploads a weight whose bytes are a mapping
// of a file truncated after it was mapped, as a model file cut short during
// loading would be: the upload fails with ErrFault instead of a fault inside
// the driver ending the process, and the device stays usable: for a type
// whose rows go as they are (Q4_K) and the three the device regroups (Q8_0,
// Q4_0, Q6_K: layout.go).
func TestLoadWeightFromTruncatedFile(t *testing.T) {
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q8_0, quant.Q4_0, quant.Q6_K} {
		t.Run(typ.String(), func(t *testing.T) { truncatedLoad(t, typ) })
	}
}

func truncatedLoad(t *testing.T, typ quant.Type) {
	g := gpu(t)
	const rows, cols = 512, 256
	rb, err := quant.RowBytes(typ, cols)
	if err != nil {
		t.Fatal(err)
	}
	size := rows * rb
	path := filepath.Join(t.TempDir(), "w.bin")
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(data)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	used := g.MemoryUsed()
	w := &ops.Weight{Name: "truncated", Type: typ, Rows: rows, Cols: cols}
	if err := g.LoadWeight(w, data); !errors.Is(err, ErrFault) {
		t.Fatalf("LoadWeight over a truncated mapping: %v, want ErrFault", err)
	}
	if g.MemoryUsed() != used {
		t.Fatalf("the failed upload kept %d bytes", g.MemoryUsed()-used)
	}
	// Loaded with others in one allocation: none of them is kept.
	whole := &ops.Weight{Name: "whole", Type: typ, Rows: rows, Cols: cols}
	if err := g.LoadWeights([]*ops.Weight{whole, w}, [][]byte{make([]byte, size), data}); !errors.Is(err, ErrFault) {
		t.Fatalf("LoadWeights over a truncated mapping: %v, want ErrFault", err)
	}
	if g.MemoryUsed() != used {
		t.Fatalf("the failed LoadWeights kept %d bytes", g.MemoryUsed()-used)
	}
	g.wmu.Lock()
	_, kept := g.weights["whole"]
	g.wmu.Unlock()
	if kept {
		t.Fatal("the failed LoadWeights kept a weight")
	}
	b, err := g.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Free(b); err != nil {
		t.Fatal(err)
	}
}
