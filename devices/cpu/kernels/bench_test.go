package kernels

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"hybrid/quant"
)

// TinyLlama's mat-vec shapes (rows×cols): attention q/o, MLP gate/up, MLP
// down, and the output head.
var benchShapes = []shape{{2048, 2048}, {5632, 2048}, {2048, 5632}, {32000, 2048}}

// benchWeights is random blocks with small finite scales: the kernels' speed
// does not depend on the values, and this is much faster to make than
// quantizing 65M floats.
func benchWeights(typ quant.Type, rows, cols int) []byte {
	rb, _ := quant.RowBytes(typ, cols)
	w := make([]byte, rows*rb)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i+8 <= len(w); i += 8 {
		binary.LittleEndian.PutUint64(w[i:], rng.Uint64())
	}
	if offs, ok := halfOffsets[typ]; ok {
		for b := 0; b < len(w); b += typ.BlockBytes() {
			for _, o := range offs {
				binary.LittleEndian.PutUint16(w[b+o:], quant.F32ToF16(0.01))
			}
		}
	} else if typ != quant.F32 {
		for i := 0; i < len(w); i += 2 { // keep floats finite
			w[i+1] &= 0x3b
		}
	} else {
		for i := 0; i < len(w); i += 4 {
			w[i+3] &= 0x3f
		}
	}
	return w
}

// BenchmarkMatVec reports weight bytes per second (the bound at batch 1 is
// memory bandwidth) for each type at TinyLlama's shapes, on 2 threads. The
// "go" variants run the portable kernels for comparison.
func BenchmarkMatVec(b *testing.B) {
	p := NewPool(2)
	defer p.Close()
	for _, typ := range allTypes {
		for _, sh := range benchShapes {
			w := benchWeights(typ, sh.rows, sh.cols)
			x := randomInput(rand.New(rand.NewPCG(7, 8)), sh.cols)
			y := make([]float32, sh.rows)
			for _, impl := range []string{"asm", "go"} {
				k := kernelFor[typ]
				if impl == "go" {
					if sh != benchShapes[0] {
						continue
					}
					pk := portable[typ]
					k = &pk
				}
				b.Run(fmt.Sprintf("%s/%s/%dx%d", typ, impl, sh.rows, sh.cols), func(b *testing.B) {
					b.SetBytes(int64(len(w)))
					for b.Loop() {
						p.matMul(k, w, sh.rows, sh.cols, x, 1, y)
					}
				})
			}
		}
	}
}

// BenchmarkMatMul is prefill: 32 inputs, so the kernels are compute bound;
// it reports weight bytes times inputs per second.
func BenchmarkMatMul(b *testing.B) {
	p := NewPool(2)
	defer p.Close()
	const n = 32
	sh := shape{2048, 2048}
	for _, typ := range allTypes {
		w := benchWeights(typ, sh.rows, sh.cols)
		x := randomInput(rand.New(rand.NewPCG(7, 8)), n*sh.cols)
		y := make([]float32, n*sh.rows)
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(n * len(w)))
			for b.Loop() {
				MatMul(p, typ, w, sh.rows, sh.cols, x, n, y)
			}
		})
	}
}

func BenchmarkDot(b *testing.B) {
	x := randomInput(rand.New(rand.NewPCG(1, 1)), 128)
	y := randomInput(rand.New(rand.NewPCG(1, 2)), 128)
	b.SetBytes(2 * 4 * 128)
	for b.Loop() {
		Dot(x, y)
	}
}

func BenchmarkAxpy(b *testing.B) {
	x := randomInput(rand.New(rand.NewPCG(1, 1)), 128)
	y := randomInput(rand.New(rand.NewPCG(1, 2)), 128)
	b.SetBytes(3 * 4 * 128)
	for b.Loop() {
		Axpy(0.5, x, y)
	}
}

// BenchmarkMatVecCold cycles through 256 MB of 5632×2048 weights, more than
// the last-level cache holds, as a decode step does with a model's layers: it
// measures what the kernels reach from DRAM.
func BenchmarkMatVecCold(b *testing.B) {
	p := NewPool(2)
	defer p.Close()
	sh := shape{5632, 2048}
	for _, typ := range allTypes {
		one := benchWeights(typ, sh.rows, sh.cols)
		ws := make([][]byte, max(2, (256<<20)/len(one)))
		for i := range ws {
			ws[i] = append([]byte(nil), one...)
		}
		x := randomInput(rand.New(rand.NewPCG(7, 8)), sh.cols)
		y := make([]float32, sh.rows)
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(len(one)))
			i := 0
			for b.Loop() {
				MatVec(p, typ, ws[i], sh.rows, sh.cols, x, y)
				i = (i + 1) % len(ws)
			}
		})
	}
}

// BenchmarkRows runs each kernel on one thread over weights that stay in L2,
// to see its compute bound apart from memory.
func BenchmarkRows(b *testing.B) {
	const rows, cols = 128, 2048
	p := NewPool(1)
	defer p.Close()
	for _, typ := range allTypes {
		w := benchWeights(typ, rows, cols)
		x := randomInput(rand.New(rand.NewPCG(7, 8)), cols)
		y := make([]float32, rows)
		k := kernelFor[typ]
		xs := p.scratch.prepare(p, k, x, 1, cols)
		b.Run(fmt.Sprint(typ), func(b *testing.B) {
			b.SetBytes(int64(len(w)))
			for b.Loop() {
				k.rows(w, len(w)/rows, &xs[0], y)
			}
		})
	}
}
