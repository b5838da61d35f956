package quant

import (
	"errors"
	"math"
	"testing"
)

func quantizeOrFatal(t *testing.T, typ Type, x []float32) []byte {
	t.Helper()
	nb, err := RowBytes(typ, len(x))
	if err != nil {
		t.Fatal(err)
	}
	q := make([]byte, nb)
	if err := Quantize(typ, x, q); err != nil {
		t.Fatal(err)
	}
	return q
}

func TestEdgeCases(t *testing.T) {
	const n = 2 * QK_K
	cases := map[string]func(i int) float32{
		"zero":    func(int) float32 { return 0 },
		"negzero": func(int) float32 { return float32(math.Copysign(0, -1)) },
		"tiny":    func(i int) float32 { return 1e-20 * float32(i%7-3) },
		"one huge": func(i int) float32 {
			if i == 100 {
				return 3e4
			}
			return 1e-3 * float32(i%5-2)
		},
		"negative max": func(i int) float32 {
			if i%32 == 9 {
				return -3
			}
			return 0.001 * float32(i%32)
		},
		"constant":   func(int) float32 { return 0.7 },
		"f16 limits": func(i int) float32 { return 60000 * float32(i%3-1) },
	}
	for name, gen := range cases {
		x := make([]float32, n)
		for i := range x {
			x[i] = gen(i)
		}
		var amax float64
		for _, v := range x {
			amax = max(amax, math.Abs(float64(v)))
		}
		for _, typ := range append([]Type{F16, BF16}, quantTypes...) {
			t.Run(name+"/"+typ.String(), func(t *testing.T) {
				q := quantizeOrFatal(t, typ, x)
				y := make([]float32, n)
				if err := Dequantize(typ, q, y); err != nil {
					t.Fatal(err)
				}
				for i, v := range y {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						t.Fatalf("element %d decodes to %g", i, v)
					}
					// No element may decode further out than the block's
					// largest magnitude, allowing for the f16 scale's rounding
					// and, for the types that fit their scale by least
					// squares over levels that are not symmetric about zero,
					// for the overshoot of the far end: values ±A alone fit
					// Q3_K's -4..3 with scale 7A/25, putting -4 at 1.12A,
					// and IQ4's -127..113 with 240A/(127²+113²), putting
					// -127 at 1.055A.
					over := map[Type]float64{Q3_K: 1.12, IQ4_NL: 1.055, IQ4_XS: 1.055}[typ]
					if over == 0 {
						over = 1
					}
					if math.Abs(float64(v)) > amax*over*1.002+1e-6 {
						t.Fatalf("element %d = %g beyond the input's max magnitude %g", i, v, amax)
					}
				}
				if name == "zero" || name == "negzero" {
					for i, v := range y {
						if v != 0 {
							t.Fatalf("element %d = %g, want 0", i, v)
						}
					}
				}
			})
		}
	}
}

// TestSignedMax checks that Q4_0 and Q5_0 scale by the signed value of
// largest magnitude, so a negative maximum decodes exactly (it maps to the
// lowest level), and that Q8_0, which scales by the magnitude, is symmetric.
func TestSignedMax(t *testing.T) {
	x := make([]float32, 32)
	for i := range x {
		x[i] = 0.01 * float32(i)
	}
	x[9] = -3 // d = -3/-8 = 0.375 and -3/-16 = 0.1875, both exact in f16
	for _, typ := range []Type{Q4_0, Q5_0} {
		y := make([]float32, 32)
		if err := Dequantize(typ, quantizeOrFatal(t, typ, x), y); err != nil {
			t.Fatal(err)
		}
		if y[9] != -3 {
			t.Errorf("%s: the negative maximum decodes to %g, want -3", typ, y[9])
		}
	}
	neg := make([]float32, 32)
	for i := range x {
		neg[i] = -x[i]
	}
	a, b := quantizeOrFatal(t, Q8_0, x), quantizeOrFatal(t, Q8_0, neg)
	if a[0] != b[0] || a[1] != b[1] {
		t.Errorf("Q8_0 scale differs for negated input: %x vs %x", a[:2], b[:2])
	}
	for i := range 32 {
		if int8(a[2+i]) != -int8(b[2+i]) {
			t.Errorf("Q8_0 quant %d: %d for x, %d for -x", i, int8(a[2+i]), int8(b[2+i]))
		}
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name   string
		typ    Type
		n      int // elements
		nbytes int
		want   error
	}{
		{"unsupported Q8_K", Q8_K, 256, 292, ErrUnsupported},
		{"unsupported Q8_1", Q8_1, 32, 36, ErrUnsupported},
		{"unknown type", Type(99), 32, 32, ErrUnsupported},
		{"partial block", Q4_0, 31, 18, ErrSize},
		{"partial super-block", Q4_K, 128, 72, ErrSize},
		{"short bytes", Q8_0, 64, 67, ErrSize},
		{"long bytes", Q6_K, 256, 211, ErrSize},
		{"short f32 bytes", F32, 4, 15, ErrSize},
		{"bytes for no elements", F16, 0, 2, ErrSize},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Dequantize(c.typ, make([]byte, c.nbytes), make([]float32, c.n))
			if !errors.Is(err, c.want) {
				t.Errorf("Dequantize: got %v, want %v", err, c.want)
			}
			err = Quantize(c.typ, make([]float32, c.n), make([]byte, c.nbytes))
			if !errors.Is(err, c.want) {
				t.Errorf("Quantize: got %v, want %v", err, c.want)
			}
		})
	}
	for _, typ := range SupportedTypes() {
		if err := Dequantize(typ, nil, nil); err != nil {
			t.Errorf("%s: empty Dequantize: %v", typ, err)
		}
		if err := Quantize(typ, nil, nil); err != nil {
			t.Errorf("%s: empty Quantize: %v", typ, err)
		}
	}
}

// FuzzDequantize feeds arbitrary bytes (NaN and infinite scales included) to
// every decoder: none may panic, and re-encoding the output must not either.
func FuzzDequantize(f *testing.F) {
	f.Add([]byte{0x00, 0x3c, 0x12, 0x34}, uint8(2))
	f.Add(make([]byte, 210), uint8(14))
	f.Fuzz(func(t *testing.T, data []byte, ti uint8) {
		types := SupportedTypes()
		typ := types[int(ti)%len(types)]
		nb := len(data) / typ.BlockBytes()
		src := data[:nb*typ.BlockBytes()]
		y := make([]float32, nb*typ.BlockSize())
		if err := Dequantize(typ, src, y); err != nil {
			t.Fatal(err)
		}
		if err := Quantize(typ, y, make([]byte, len(src))); err != nil {
			t.Fatal(err)
		}
	})
}
