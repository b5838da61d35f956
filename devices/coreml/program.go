package coreml

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"

	"hybrid/devices"
	"hybrid/devices/coreml/mlmodel"
	"hybrid/ops"
	"hybrid/quant"
)

// formatVersion changes whenever the programs written for the same op change
// (package mlmodel's builders, the fp16 rounding), so that cached compiled
// models of an older writer are not reused.
const formatVersion = 1

// supports returns nil if the device runs op, or an error naming the op and
// saying why not (see the package doc).
func supports(op *ops.Op) error {
	why := ""
	switch op.Kind {
	case ops.MatMul, ops.RMSNorm, ops.AddBias:
		if op.Weight == nil {
			return fmt.Errorf("coreml: op %s has no weight: %w", op, devices.ErrUnsupported)
		}
		if !op.Weight.Type.Supported() {
			return fmt.Errorf("coreml: op %s: weight type %s %w", op, op.Weight.Type, devices.ErrUnsupported)
		}
		if op.Kind != ops.MatMul && (op.Weight.Rows != 1 || op.Weight.Cols <= 0) {
			return fmt.Errorf("coreml: op %s: %s weight of %d×%d, not one row, %w", op, op.Kind, op.Weight.Rows, op.Weight.Cols, devices.ErrUnsupported)
		}
		return nil
	case ops.SiLUMul, ops.Add:
		return nil
	case ops.Embed:
		why = "a gather by token id, not arithmetic; the CPU copies rows faster than CoreML is called"
	case ops.RoPE:
		why = "its angles depend on the step's position, so a compiled model would fit one position"
	case ops.Attention:
		why = "its KV cache must persist across calls, and a CoreML model is a pure function"
	case ops.LastRow:
		why = "a copy of one row, nothing to compute"
	default:
		why = "unknown kind"
	}
	return fmt.Errorf("coreml: op %s is %w on CoreML: %s", op, devices.ErrUnsupported, why)
}

// weight is a resident weight: the file's bytes (kept, not copied) and the
// hash that names the models built from them.
type weight struct {
	w    ops.Weight
	raw  []byte
	hash [sha256.Size]byte
}

func newWeight(w *ops.Weight, data []byte) (*weight, error) {
	rb, err := quant.RowBytes(w.Type, w.Cols)
	if err != nil {
		return nil, fmt.Errorf("coreml: weight %s: %w", w.Name, err)
	}
	if w.Rows <= 0 || int64(len(data)) != int64(rb)*int64(w.Rows) {
		return nil, fmt.Errorf("coreml: weight %s: %d bytes, want %d for %d×%d %s", w.Name, len(data), int64(rb)*int64(w.Rows), w.Rows, w.Cols, w.Type)
	}
	return &weight{w: *w, raw: data, hash: sha256.Sum256(data)}, nil
}

// f16 dequantizes the weight with package quant and rounds every element to
// binary16 (nearest, ties to even; beyond ±65504 becomes ±Inf, which no
// weight of a working model reaches).
func (w *weight) f16() ([]uint16, error) {
	rb, _ := quant.RowBytes(w.w.Type, w.w.Cols)
	row := make([]float32, w.w.Cols)
	out := make([]uint16, w.w.Rows*w.w.Cols)
	for r := 0; r < w.w.Rows; r++ {
		if err := quant.Dequantize(w.w.Type, w.raw[r*rb:(r+1)*rb], row); err != nil {
			return nil, fmt.Errorf("coreml: weight %s row %d: %w", w.w.Name, r, err)
		}
		o := out[r*w.w.Cols : (r+1)*w.w.Cols]
		for i, v := range row {
			o[i] = quant.F32ToF16(v)
		}
	}
	return out, nil
}

// shape is the shape of one op's model: Rows × Cols inputs, and for MatMul
// Out output features.
type shape struct {
	Kind ops.Kind
	Rows int
	Cols int
	Out  int
}

// opShape works out the model shape of op from its buffers' lengths: in is
// the length of In[0], out that of the output, tokens the step's token count.
// Element-wise ops have no weight to fix their width, but their result does
// not depend on how the elements are split into rows, so rows is the token
// count when it divides the length and 1 otherwise (a layout choice only).
func opShape(op *ops.Op, in, out, tokens int) (shape, error) {
	s := shape{Kind: op.Kind}
	bad := func() (shape, error) {
		return shape{}, fmt.Errorf("coreml: op %s: buffers of %d and %d elements do not fit its weight", op, in, out)
	}
	switch op.Kind {
	case ops.MatMul:
		k, m := op.Weight.Cols, op.Weight.Rows
		if in <= 0 || in%k != 0 || out != in/k*m {
			return bad()
		}
		s.Rows, s.Cols, s.Out = in/k, k, m
	case ops.RMSNorm, ops.AddBias:
		// A per-head norm is the norm of rows of one head: the heads of a
		// row are contiguous and share the weight, so its model is the
		// whole-row norm's over tokens × heads rows.
		d := op.Weight.Cols
		if in <= 0 || in%d != 0 || out != in {
			return bad()
		}
		s.Rows, s.Cols = in/d, d
	case ops.SiLUMul, ops.Add:
		if in <= 0 || out != in {
			return shape{}, fmt.Errorf("coreml: op %s: input of %d elements, output of %d", op, in, out)
		}
		s.Rows = 1
		if tokens > 0 && in%tokens == 0 {
			s.Rows = tokens
		}
		s.Cols = in / s.Rows
	default:
		return shape{}, supports(op)
	}
	return s, nil
}

// modelKey names the compiled model of op at shape s: readable kind and
// shape, then a hash of everything that determines the model's bytes (the
// writer's format version, the shape, epsilon, the weight's type, size and
// SHA-256), so equal keys mean equal models.
func modelKey(op *ops.Op, s shape, w *weight) string {
	h := sha256.New()
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, formatVersion)
	for _, v := range []int{int(s.Kind), s.Rows, s.Cols, s.Out} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	if op.Kind == ops.RMSNorm {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(op.Eps))
	}
	if w != nil {
		b = binary.LittleEndian.AppendUint32(b, uint32(w.w.Type))
		b = binary.LittleEndian.AppendUint64(b, uint64(w.w.Rows))
		b = binary.LittleEndian.AppendUint64(b, uint64(w.w.Cols))
		b = append(b, w.hash[:]...)
	}
	h.Write(b)
	sum := hex.EncodeToString(h.Sum(nil))[:32]
	if s.Kind == ops.MatMul {
		return fmt.Sprintf("%s-%dx%dx%d-%s", s.Kind, s.Rows, s.Cols, s.Out, sum)
	}
	return fmt.Sprintf("%s-%dx%d-%s", s.Kind, s.Rows, s.Cols, sum)
}

// buildModel writes the ML Program of op at shape s.
func buildModel(op *ops.Op, s shape, w *weight) (*mlmodel.Model, error) {
	var wf []uint16
	if w != nil {
		var err error
		if wf, err = w.f16(); err != nil {
			return nil, err
		}
	}
	var m *mlmodel.Model
	var err error
	switch s.Kind {
	case ops.MatMul:
		m, err = mlmodel.MatMul(s.Rows, s.Cols, s.Out, wf)
	case ops.RMSNorm:
		m, err = mlmodel.RMSNorm(s.Rows, s.Cols, wf, op.Eps)
	case ops.AddBias:
		m, err = mlmodel.AddBias(s.Rows, s.Cols, wf)
	case ops.SiLUMul:
		m, err = mlmodel.SiLUMul(s.Rows, s.Cols)
	case ops.Add:
		m, err = mlmodel.Add(s.Rows, s.Cols)
	default:
		return nil, supports(op)
	}
	if err != nil {
		return nil, fmt.Errorf("coreml: op %s: %w", op, err)
	}
	return m, nil
}
