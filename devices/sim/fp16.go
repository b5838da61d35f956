package sim

import (
	"fmt"

	"hybrid/devices"
	"hybrid/devices/cpu"
	"hybrid/ops"
	"hybrid/quant"
)

// An fp16 device (a profile's "fp16: true", the Neural Engine) is simulated
// at its boundary: every f32 value an op reads is rounded to binary16 as it
// enters the op, every weight is stored as binary16 (its dequantized values
// rounded, as CoreML expands a model's weights to fp16 when it loads them),
// and the op's output is rounded to binary16 as it leaves. Between those the
// op computes with the CPU's kernels, in f32. The real Neural Engine also
// keeps its intermediates in fp16 (CoreML documents fp16 compute; whether
// accumulations are wider is not published), so this is the least error an
// fp16 device can have: the rounding every fp16 design pays at its inputs,
// weights and outputs, not a bound on the rest.
//
// Rounding is to nearest, ties to even, with overflow to infinity and
// binary16 subnormals kept (quant.F32ToF16, checked against ggml for every
// float32 class). Rounding twice changes nothing, so a value passed between
// two ops of the same fp16 device is rounded once, whichever of them rounds
// it.

// round16 rounds every element of x to the nearest binary16 value, in place.
func round16(x []float32) {
	t := quant.F16Table()
	for i, v := range x {
		x[i] = t[quant.F32ToF16(v)]
	}
}

// weightF16 re-encodes a weight as binary16: each row dequantized, then
// rounded. The result is what an fp16 device holds, 2 bytes per element.
func weightF16(w *ops.Weight, data []byte) (*ops.Weight, []byte, error) {
	rb, err := quant.RowBytes(w.Type, w.Cols)
	if err != nil {
		return nil, nil, fmt.Errorf("weight %s: %w", w.Name, err)
	}
	if int64(len(data)) != int64(rb)*int64(w.Rows) {
		return nil, nil, fmt.Errorf("weight %s: %d bytes, want %d for %d×%d %s", w.Name, len(data), int64(rb)*int64(w.Rows), w.Rows, w.Cols, w.Type)
	}
	hb, err := quant.RowBytes(quant.F16, w.Cols)
	if err != nil {
		return nil, nil, fmt.Errorf("weight %s: %w", w.Name, err)
	}
	out := make([]byte, hb*w.Rows)
	row := make([]float32, w.Cols)
	for r := range w.Rows {
		if err := quant.Dequantize(w.Type, data[r*rb:(r+1)*rb], row); err != nil {
			return nil, nil, fmt.Errorf("weight %s row %d: %w", w.Name, r, err)
		}
		if err := quant.Quantize(quant.F16, row, out[r*hb:(r+1)*hb]); err != nil {
			return nil, nil, fmt.Errorf("weight %s row %d: %w", w.Name, r, err)
		}
	}
	return &ops.Weight{Name: w.Name, Type: quant.F16, Rows: w.Rows, Cols: w.Cols}, out, nil
}

// runF16 runs op as an fp16 device does: on rounded copies of its inputs
// (the buffers themselves are left as they are), then rounds the output.
func (d *Device) runF16(op *ops.Op, st ops.Step, in []devices.Buffer, out devices.Buffer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.scratch) < len(in) {
		d.scratch = append(d.scratch, nil)
	}
	rounded := make([]devices.Buffer, len(in))
	for i, b := range in {
		cb, ok := b.(*cpu.Buffer)
		if !ok {
			return fmt.Errorf("%s: op %s: input %d is a buffer of another device (%T)", d.Name(), op, i, b)
		}
		if cap(d.scratch[i]) < len(cb.F) {
			d.scratch[i] = make([]float32, len(cb.F))
		}
		s := d.scratch[i][:len(cb.F)]
		copy(s, cb.F)
		round16(s)
		rounded[i] = &cpu.Buffer{F: s}
	}
	if err := d.Device.Run(op, st, rounded, out); err != nil {
		return err
	}
	ob, ok := out.(*cpu.Buffer)
	if !ok {
		return fmt.Errorf("%s: op %s: its output is a buffer of another device (%T)", d.Name(), op, out)
	}
	round16(ob.F)
	return nil
}
