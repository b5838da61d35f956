package quant

import (
	"math/rand/v2"
	"testing"
)

// benchRow is one 4096-element row, the hidden size of a 7B Llama.
const benchRow = 4096

func benchData(b *testing.B, typ Type) ([]float32, []byte) {
	rng := rand.New(rand.NewPCG(9, 9))
	x := make([]float32, benchRow)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	nb, err := RowBytes(typ, benchRow)
	if err != nil {
		b.Fatal(err)
	}
	q := make([]byte, nb)
	if err := Quantize(typ, x, q); err != nil {
		b.Fatal(err)
	}
	return x, q
}

// BenchmarkDequantize reports bytes of f32 output per second.
func BenchmarkDequantize(b *testing.B) {
	for _, typ := range SupportedTypes() {
		b.Run(typ.String(), func(b *testing.B) {
			x, q := benchData(b, typ)
			b.SetBytes(int64(4 * len(x)))
			for b.Loop() {
				if err := Dequantize(typ, q, x); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQuantize reports bytes of f32 input per second.
func BenchmarkQuantize(b *testing.B) {
	for _, typ := range SupportedTypes() {
		b.Run(typ.String(), func(b *testing.B) {
			x, q := benchData(b, typ)
			b.SetBytes(int64(4 * len(x)))
			for b.Loop() {
				if err := Quantize(typ, x, q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
