package devices

import "fmt"

// HostView, HostWrite and HostRead are View, Write and Read for devices whose
// buffers are f32 slices in host memory (the CPU device, the CoreML device);
// dev names the device in errors.

// HostView returns the first n elements of f, sharing its memory.
func HostView(dev string, f []float32, n int) ([]float32, error) {
	if n < 0 || n > len(f) {
		return nil, fmt.Errorf("%s: view of %d elements of a buffer of %d", dev, n, len(f))
	}
	return f[:n:n], nil
}

// HostWrite copies src into the start of dst.
func HostWrite(dev string, dst, src []float32) error {
	if len(src) > len(dst) {
		return fmt.Errorf("%s: write of %d elements into a buffer of %d", dev, len(src), len(dst))
	}
	copy(dst, src)
	return nil
}

// HostRead copies the start of src into dst.
func HostRead(dev string, dst, src []float32) error {
	if len(dst) > len(src) {
		return fmt.Errorf("%s: read of %d elements from a buffer of %d", dev, len(dst), len(src))
	}
	copy(dst, src)
	return nil
}
