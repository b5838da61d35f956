package mlmodel

import (
	"fmt"
	"regexp"
)

// SpecVersion is the CoreML specification version of the models written here:
// 6 is the first with ML Programs (iOS 15, macOS 12).
const SpecVersion = 6

// Opset is the MIL operation set the programs use, the one that goes with
// SpecVersion.
const Opset = "CoreML5"

// DataType is a MIL tensor element type (the values of MIL.proto's DataType).
type DataType int32

// The element types the programs use.
const (
	Bool    DataType = 1
	String  DataType = 2
	Float16 DataType = 10
	Float32 DataType = 11
	Int32   DataType = 23
)

func (t DataType) String() string {
	switch t {
	case Bool:
		return "bool"
	case String:
		return "string"
	case Float16:
		return "fp16"
	case Float32:
		return "fp32"
	case Int32:
		return "int32"
	}
	return fmt.Sprintf("dtype(%d)", int32(t))
}

// ArrayType is the element type of a multi-array feature (the values of
// FeatureTypes.proto's ArrayFeatureType.ArrayDataType, 0x10000|bits for
// floats). It is also MLMultiArrayDataType's value for the same type.
type ArrayType int32

// The multi-array types a model's features may have.
const (
	ArrayFloat16 ArrayType = 0x10000 | 16
	ArrayFloat32 ArrayType = 0x10000 | 32
)

func (t ArrayType) String() string {
	switch t {
	case ArrayFloat16:
		return "FLOAT16"
	case ArrayFloat32:
		return "FLOAT32"
	}
	return fmt.Sprintf("arraytype(%d)", int32(t))
}

// Model is the subset of a CoreML model this package writes: an ML Program
// with one function, "main", whose inputs and outputs are multi-arrays.
type Model struct {
	SpecVersion int32
	Inputs      []Feature
	Outputs     []Feature
	Main        Function
}

// Feature describes one input or output of a model.
type Feature struct {
	Name  string
	Shape []int64
	Type  ArrayType
}

// Function is a MIL function with one block: its inputs, its ops in
// topological order, and the names of the values it returns.
type Function struct {
	Opset   string
	Inputs  []Var
	Ops     []Op
	Outputs []string
}

// Var is a named, typed MIL value.
type Var struct {
	Name string
	Type TensorType
}

// TensorType is a MIL tensor type of known shape; a scalar has no dimensions.
type TensorType struct {
	DType DataType
	Shape []int64
}

func (t TensorType) String() string { return fmt.Sprintf("%s%v", t.DType, t.Shape) }

// Elems is the number of elements of a tensor of type t.
func (t TensorType) Elems() int {
	n := 1
	for _, d := range t.Shape {
		n *= int(d)
	}
	return n
}

func (t TensorType) equal(u TensorType) bool {
	if t.DType != u.DType || len(t.Shape) != len(u.Shape) {
		return false
	}
	for i := range t.Shape {
		if t.Shape[i] != u.Shape[i] {
			return false
		}
	}
	return true
}

// Op is one MIL operation. Its inputs are bound to named values; a const op
// has no inputs and holds its value.
type Op struct {
	Type    string
	Name    string
	Inputs  []Arg
	Outputs []Var
	Value   *Tensor // the "val" attribute of a const op
}

// Arg binds the parameter Param of an op to the value named Var.
type Arg struct {
	Param string
	Var   string
}

// Tensor is an immediate tensor value. Exactly the field of its type is set:
// F16 holds binary16 bit patterns.
type Tensor struct {
	Type TensorType
	F16  []uint16
	F32  []float32
	I32  []int32
	Bool []bool
	Str  []string
}

// length is the number of elements the tensor holds in its typed field.
func (t *Tensor) length() int {
	switch t.Type.DType {
	case Float16:
		return len(t.F16)
	case Float32:
		return len(t.F32)
	case Int32:
		return len(t.I32)
	case Bool:
		return len(t.Bool)
	case String:
		return len(t.Str)
	}
	return -1
}

// maxElems bounds the elements of one tensor (2^31: MLMultiArray counts and
// the largest weight of any model this project runs are far below it).
const maxElems = 1 << 31

// identifier is MIL's rule for names (MIL.proto).
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_@]*$`)

// Validate checks what CoreML's compiler would reject before running anything:
// names are MIL identifiers and defined once, before use; every shape is
// positive; const values have the size of their type; the function's inputs
// and outputs match the model's features, which are f32 or fp16
// multi-arrays; no tensor has more than 2^31 elements. It does not check an
// op's semantics: Eval does.
func (m *Model) Validate() error {
	if m.SpecVersion < SpecVersion {
		return fmt.Errorf("mlmodel: specification version %d has no ML Programs (want ≥ %d)", m.SpecVersion, SpecVersion)
	}
	if m.Main.Opset != Opset {
		return fmt.Errorf("mlmodel: opset %q, want %q", m.Main.Opset, Opset)
	}
	if len(m.Inputs) != len(m.Main.Inputs) {
		return fmt.Errorf("mlmodel: %d input features for %d function inputs", len(m.Inputs), len(m.Main.Inputs))
	}
	if len(m.Outputs) != len(m.Main.Outputs) || len(m.Outputs) == 0 {
		return fmt.Errorf("mlmodel: %d output features for %d function outputs", len(m.Outputs), len(m.Main.Outputs))
	}
	defined := map[string]TensorType{}
	define := func(v Var, where string) error {
		if !identifier.MatchString(v.Name) {
			return fmt.Errorf("mlmodel: %s: %q is not a MIL identifier", where, v.Name)
		}
		if _, dup := defined[v.Name]; dup {
			return fmt.Errorf("mlmodel: %s: value %q defined twice", where, v.Name)
		}
		n := int64(1)
		for _, d := range v.Type.Shape {
			if d <= 0 || d > maxElems || n*d > maxElems {
				return fmt.Errorf("mlmodel: %s: value %q has shape %v", where, v.Name, v.Type.Shape)
			}
			n *= d
		}
		defined[v.Name] = v.Type
		return nil
	}
	for i, f := range m.Inputs {
		in := m.Main.Inputs[i]
		if f.Name != in.Name || !f.matches(in.Type) {
			return fmt.Errorf("mlmodel: input feature %q %s%v does not match function input %q %s", f.Name, f.Type, f.Shape, in.Name, in.Type)
		}
		if err := define(in, "function input"); err != nil {
			return err
		}
	}
	for i := range m.Main.Ops {
		op := &m.Main.Ops[i]
		where := fmt.Sprintf("op %q (%s)", op.Name, op.Type)
		if !identifier.MatchString(op.Name) {
			return fmt.Errorf("mlmodel: %s: name is not a MIL identifier", where)
		}
		if len(op.Outputs) != 1 {
			return fmt.Errorf("mlmodel: %s: %d outputs, want 1", where, len(op.Outputs))
		}
		params := map[string]bool{}
		for _, a := range op.Inputs {
			if _, ok := defined[a.Var]; !ok {
				return fmt.Errorf("mlmodel: %s: parameter %s reads %q before it is defined", where, a.Param, a.Var)
			}
			if params[a.Param] {
				return fmt.Errorf("mlmodel: %s: parameter %s bound twice", where, a.Param)
			}
			params[a.Param] = true
		}
		if op.Type == "const" {
			if op.Value == nil || len(op.Inputs) != 0 {
				return fmt.Errorf("mlmodel: %s: a const needs a value and no inputs", where)
			}
			if !op.Value.Type.equal(op.Outputs[0].Type) || op.Value.length() != op.Value.Type.Elems() {
				return fmt.Errorf("mlmodel: %s: value of type %s with %d elements for output %s", where, op.Value.Type, op.Value.length(), op.Outputs[0].Type)
			}
		} else if op.Value != nil {
			return fmt.Errorf("mlmodel: %s: only a const has a value", where)
		}
		if err := define(op.Outputs[0], where); err != nil {
			return err
		}
	}
	for i, f := range m.Outputs {
		name := m.Main.Outputs[i]
		t, ok := defined[name]
		if f.Name != name || !ok || !f.matches(t) {
			return fmt.Errorf("mlmodel: output feature %q %s%v does not match function output %q %s", f.Name, f.Type, f.Shape, name, t)
		}
	}
	return nil
}

// matches reports whether the feature is a multi-array of MIL tensor type t.
func (f Feature) matches(t TensorType) bool {
	dt := map[ArrayType]DataType{ArrayFloat32: Float32, ArrayFloat16: Float16}[f.Type]
	return TensorType{DType: dt, Shape: f.Shape}.equal(t) && len(f.Shape) > 0
}
