package coreml

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"hybrid/quant"
)

// TestReadArray reads a 2×3 output in each type CoreML may return, packed and
// with padded rows (as the Neural Engine aligns them) or transposed strides.
func TestReadArray(t *testing.T) {
	want := []float32{1, -2, 3.5, 0.25, 100, -0.5}
	cases := []struct {
		name    string
		dtype   int
		strides []int
	}{
		{"f32 packed", arrayFloat32, []int{3, 1}},
		{"f16 packed", arrayFloat16, []int{3, 1}},
		{"f16 padded rows", arrayFloat16, []int{32, 1}},
		{"f32 padded rows", arrayFloat32, []int{16, 1}},
		{"f64 column-major", arrayFloat64, []int{1, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			size := elemSize(c.dtype)
			ext, err := arrayExtent([]int{2, 3}, c.strides)
			if err != nil {
				t.Fatal(err)
			}
			data := make([]byte, ext*size)
			for i := range data {
				data[i] = 0xff // NaN padding: read it and the test fails
			}
			for r := 0; r < 2; r++ {
				for col := 0; col < 3; col++ {
					v, off := want[r*3+col], (r*c.strides[0]+col*c.strides[1])*size
					switch c.dtype {
					case arrayFloat16:
						binary.LittleEndian.PutUint16(data[off:], quant.F32ToF16(v))
					case arrayFloat32:
						binary.LittleEndian.PutUint32(data[off:], math.Float32bits(v))
					case arrayFloat64:
						binary.LittleEndian.PutUint64(data[off:], math.Float64bits(float64(v)))
					}
				}
			}
			got := make([]float32, 6)
			if err := readArray(got, data, c.dtype, []int{2, 3}, c.strides); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("got %v, want %v", got, want)
				}
			}
		})
	}
}

func TestReadArrayRejects(t *testing.T) {
	data := make([]byte, 24)
	for _, c := range []struct {
		name    string
		dtype   int
		shape   []int
		strides []int
		n       int
		want    string
	}{
		{"int32", 0x20000 | 32, []int{2, 3}, []int{3, 1}, 6, "data type"},
		{"too few bytes", arrayFloat32, []int{2, 4}, []int{4, 1}, 8, "bytes"},
		{"wrong count", arrayFloat32, []int{2, 3}, []int{3, 1}, 5, "for 5 values"},
		{"strides", arrayFloat32, []int{2, 3}, []int{3}, 6, "strides"},
		{"negative stride", arrayFloat32, []int{2, 3}, []int{-3, 1}, 6, "strides"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := readArray(make([]float32, c.n), data, c.dtype, c.shape, c.strides)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}
