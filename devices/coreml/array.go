package coreml

import (
	"encoding/binary"
	"fmt"
	"math"

	"hybrid/devices/coreml/mlmodel"
	"hybrid/quant"
)

// MLMultiArrayDataType values (MLMultiArray.h): 0x10000|bits for floats,
// 0x20000|bits for integers. The float ones equal mlmodel's ArrayType.
const (
	arrayFloat16 = int(mlmodel.ArrayFloat16)
	arrayFloat32 = int(mlmodel.ArrayFloat32)
	arrayFloat64 = 0x10000 | 64
)

// elemSize is the size in bytes of an element of a multi-array data type, or
// 0 for a type the device cannot read.
func elemSize(dtype int) int {
	switch dtype {
	case arrayFloat16:
		return 2
	case arrayFloat32:
		return 4
	case arrayFloat64:
		return 8
	}
	return 0
}

// arrayExtent is the number of elements from a multi-array's first element
// to one past its last, given its shape and strides in elements.
func arrayExtent(shape, strides []int) (int, error) {
	if len(shape) != len(strides) {
		return 0, fmt.Errorf("coreml: array of shape %v has strides %v", shape, strides)
	}
	last := 0
	for i, n := range shape {
		if n <= 0 || strides[i] < 0 {
			return 0, fmt.Errorf("coreml: array of shape %v and strides %v", shape, strides)
		}
		last += (n - 1) * strides[i]
	}
	return last + 1, nil
}

// readArray copies a CoreML output array into dst in row-major order. data
// is its memory, dtype its MLMultiArrayDataType, shape and strides (in
// elements) as the array reports them: CoreML may return fp16 or f32 and may
// pad rows (the Neural Engine aligns them), so neither is assumed.
func readArray(dst []float32, data []byte, dtype int, shape, strides []int) error {
	size := elemSize(dtype)
	if size == 0 {
		return fmt.Errorf("coreml: output array of data type %#x, want fp16, f32 or f64", dtype)
	}
	ext, err := arrayExtent(shape, strides)
	if err != nil {
		return err
	}
	n := 1
	for _, d := range shape {
		n *= d
	}
	if n != len(dst) || ext*size > len(data) {
		return fmt.Errorf("coreml: output array of shape %v (%d bytes) for %d values", shape, len(data), len(dst))
	}
	idx := make([]int, len(shape))
	for i := range dst {
		off := 0
		for d, v := range idx {
			off += v * strides[d]
		}
		p := data[off*size:]
		switch dtype {
		case arrayFloat16:
			dst[i] = quant.F16ToF32(binary.LittleEndian.Uint16(p))
		case arrayFloat32:
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(p))
		case arrayFloat64:
			dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(p)))
		}
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return nil
}
