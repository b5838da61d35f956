package kernels

import (
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"testing"

	"hybrid/quant"
)

// matmulCase is one llama.cpp mat-mul from testdata/llamacpp-matmul.golden.gz
// (written by testdata/gen_matmul.c).
type matmulCase struct {
	typ           quant.Type
	rows, cols, n int
	repacked      bool
	w             []byte
	x, y          []float32
}

func readMatmulGolden(t *testing.T) []matmulCase {
	t.Helper()
	f, err := os.Open("testdata/llamacpp-matmul.golden.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	next := func(n int) []byte {
		if n > len(raw) {
			t.Fatalf("golden: truncated")
		}
		p := raw[:n]
		raw = raw[n:]
		return p
	}
	u32 := func() int { return int(binary.LittleEndian.Uint32(next(4))) }
	f32s := func(n int) []float32 {
		p := next(4 * n)
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
		}
		return v
	}
	if string(next(4)) != "QMAT" {
		t.Fatal("golden: bad magic")
	}
	cases := make([]matmulCase, u32())
	for i := range cases {
		c := &cases[i]
		c.typ = quant.Type(u32())
		c.rows, c.cols, c.n, c.repacked = u32(), u32(), u32(), u32() == 1
		rb, err := quant.RowBytes(c.typ, c.cols)
		if err != nil {
			t.Fatal(err)
		}
		c.w = next(c.rows * rb)
		c.x = f32s(c.n * c.cols)
		c.y = f32s(c.n * c.rows)
	}
	if len(raw) != 0 {
		t.Fatalf("golden: %d bytes left over", len(raw))
	}
	return cases
}

// TestLlamaCppOrder checks MatMul, and the portable kernels, against
// llama.cpp's own mat-mul results for the types whose kernels follow its
// order of float additions on this kind of CPU: no tolerance at all. Each
// case is a decode step (one input) or a batch of six (for the repacked
// types four through llama.cpp's GEMM and two through its GEMV).
func TestLlamaCppOrder(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	for _, c := range readMatmulGolden(t) {
		name := fmt.Sprintf("%s/%dx%d/n=%d", c.typ, c.rows, c.cols, c.n)
		if c.repacked {
			name += "/repacked"
		}
		t.Run(name, func(t *testing.T) {
			fast := make([]float32, c.n*c.rows)
			MatMul(p, c.typ, c.w, c.rows, c.cols, c.x, c.n, fast)
			k := portable[c.typ]
			slow := make([]float32, c.n*c.rows)
			p.matMul(&k, c.w, c.rows, c.cols, c.x, c.n, slow)
			for i, want := range c.y {
				for name, got := range map[string]float32{"MatMul": fast[i], "portable": slow[i]} {
					if math.Float32bits(got) != math.Float32bits(want) {
						t.Errorf("%s: input %d row %d: %g (%#08x), llama.cpp %g (%#08x)", name, i/c.rows, i%c.rows,
							got, math.Float32bits(got), want, math.Float32bits(want))
					}
				}
			}
		})
	}
}
