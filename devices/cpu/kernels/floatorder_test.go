package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"hybrid/quant"
)

// TestFloatOrderAssembly checks that the float row kernels in use (assembly
// on amd64) give exactly, bit for bit, what the Go definition of llama.cpp's
// order gives, for both the single-input and the batch order, at lengths
// with and without leftovers.
func TestFloatOrderAssembly(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, typ := range []quant.Type{quant.F32, quant.F16} {
		for _, n := range []int{8, 16, 48, 64, 100, 172, 256, 2048, 5632} {
			const rows = 5
			rb, _ := quant.RowBytes(typ, n)
			w := make([]byte, rows*rb)
			for i := 0; i < rows*n; i++ {
				v := float32(rng.NormFloat64())
				if typ == quant.F32 {
					binary.LittleEndian.PutUint32(w[4*i:], math.Float32bits(v))
				} else {
					binary.LittleEndian.PutUint16(w[2*i:], quant.F32ToF16(v))
				}
			}
			x := &xrow{f: make([]float32, n)}
			for i := range x.f {
				x.f[i] = float32(rng.NormFloat64())
			}
			k, def := kernelFor[typ], portable[typ]
			for _, order := range []string{"vec", "tiny"} {
				got, want := make([]float32, rows), make([]float32, rows)
				if order == "vec" {
					k.rows(w, rb, x, got)
					def.rows(w, rb, x, want)
				} else {
					k.rowsN(w, rb, x, got)
					def.rowsN(w, rb, x, want)
				}
				for r := range got {
					if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
						t.Errorf("%s n=%d %s row %d: %g, definition %g", typ, n, order, r, got[r], want[r])
					}
				}
			}
			if typ == quant.F16 {
				kv := make([]uint16, n)
				for i := range kv {
					kv[i] = binary.LittleEndian.Uint16(w[2*i:])
				}
				if g, d := DotF16(kv, x.f), dotF16vGo(kv, x.f); math.Float32bits(g) != math.Float32bits(d) {
					t.Errorf("DotF16 n=%d: %g, definition %g", n, g, d)
				}
			}
		}
	}
}

// TestReduce16 checks the lane sum against its definition on values whose
// sum depends on the order.
func TestReduce16(t *testing.T) {
	var l [16]float32
	for i := range l {
		l[i] = float32(i + 1)
	}
	l[3] = 1e8
	l[11] = -1e8
	// (l[8+i]+l[i]) pairs 3 with 11 first, so the big values cancel exactly.
	if got := reduce16(&l); got != 136-4-12 {
		t.Fatalf("reduce16 = %g, want %d", got, 136-4-12)
	}
}
