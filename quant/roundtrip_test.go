package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// quantTypes are the block-quantized types (the float types round trip
// exactly or nearly so and are tested in f16_test.go).
var quantTypes = []Type{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS}

// quantizeFnsData is tests/test-quantize-fns.cpp's generate_data: 0.1 +
// amplitude*cosf(i + offset), summed in double and stored as float.
func quantizeFnsData(offset float32, n int, amplitude float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		c := float32(math.Cos(float64(float32(i) + offset)))
		x[i] = float32(0.1 + float64(amplitude*c))
	}
	return x
}

// quantizeFnsRMSE is test-quantize-fns.cpp's array_rmse: note it divides the
// root of the summed squares by n, not the sum.
func quantizeFnsRMSE(a, b []float32) float64 {
	var sum float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		sum += d * d
	}
	return float64(float32(math.Sqrt(sum))) / float64(len(a))
}

func roundTrip(t *testing.T, typ Type, x []float32) []float32 {
	t.Helper()
	nb, err := RowBytes(typ, len(x))
	if err != nil {
		t.Fatal(err)
	}
	q := make([]byte, nb)
	if err := Quantize(typ, x, q); err != nil {
		t.Fatal(err)
	}
	y := make([]float32, len(x))
	if err := Dequantize(typ, q, y); err != nil {
		t.Fatal(err)
	}
	return y
}

// TestQuantizeFnsTotalError is test-quantize-fns's "absolute quantization
// error" check with its data (32*128 values, offset 0, amplitude 2) and its
// bounds: MAX_QUANTIZATION_TOTAL_ERROR = 0.002 for every type here but Q2_K
// (MAX_QUANTIZATION_TOTAL_ERROR_2BITS = 0.0075) and Q3_K (_3BITS = 0.0040).
func TestQuantizeFnsTotalError(t *testing.T) {
	x := quantizeFnsData(0, 32*128, 2)
	for _, typ := range append([]Type{F16, BF16}, quantTypes...) {
		maxTotalError := map[Type]float64{Q2_K: 0.0075, Q3_K: 0.0040}[typ]
		if maxTotalError == 0 {
			maxTotalError = 0.002
		}
		t.Run(typ.String(), func(t *testing.T) {
			err := quantizeFnsRMSE(x, roundTrip(t, typ, x))
			t.Logf("error %.6f (llama.cpp's bound %g)", err, maxTotalError)
			if !(err < maxTotalError) {
				t.Errorf("total quantization error %g, want < %g", err, maxTotalError)
			}
		})
	}
}

// TestRoundTripRandom measures the relative RMS error, sqrt(mean((y-x)²) /
// mean(x²)), on seeded gaussian and uniform data. Each bound is 1.25x the
// worse of the two errors measured here (llama.cpp's quantizers give the same
// bytes, hence the same errors): a b-bit quantizer of a block scaled to its
// largest value has a relative error of roughly 2^-b, less for the K-quants'
// finer scales.
func TestRoundTripRandom(t *testing.T) {
	bounds := map[Type]float64{
		Q4_0: 0.105, Q4_1: 0.095, Q5_0: 0.053, Q5_1: 0.047, Q8_0: 0.0066,
		Q2_K: 0.366, Q3_K: 0.188, Q4_K: 0.088, Q5_K: 0.045, Q6_K: 0.022,
		IQ4_NL: 0.094, IQ4_XS: 0.095,
	}
	rng := rand.New(rand.NewPCG(42, 7))
	const n = 4096
	gauss, uniform := make([]float32, n), make([]float32, n)
	for i := range n {
		gauss[i] = float32(rng.NormFloat64())
		uniform[i] = float32(2*rng.Float64() - 1)
	}
	for _, data := range []struct {
		name string
		x    []float32
	}{{"gauss", gauss}, {"uniform", uniform}} {
		for _, typ := range quantTypes {
			t.Run(data.name+"/"+typ.String(), func(t *testing.T) {
				y := roundTrip(t, typ, data.x)
				var se, ss float64
				for i, v := range data.x {
					d := float64(y[i]) - float64(v)
					se += d * d
					ss += float64(v) * float64(v)
				}
				rel := math.Sqrt(se / ss)
				t.Logf("relative RMS error %.5f (bound %g)", rel, bounds[typ])
				if !(rel < bounds[typ]) {
					t.Errorf("relative RMS error %g, want < %g", rel, bounds[typ])
				}
			})
		}
	}
}
