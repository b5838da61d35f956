package gguf

import "fmt"

// ValueType is the type id of a metadata value, as stored in the file.
type ValueType uint32

// Metadata value types (gguf_type in ggml's gguf.h).
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var typeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

// String returns the type's name as the spec spells it ("uint32", "array"),
// or "type(N)" for an unknown id.
func (t ValueType) String() string {
	if t.valid() {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

func (t ValueType) valid() bool { return t <= TypeFloat64 }

// fixedSize is the encoded size of a fixed-size type, 0 for string and array.
func (t ValueType) fixedSize() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// minSize is the fewest bytes a value of type t takes in a file: a string
// needs its length, an array its element type and count.
func (t ValueType) minSize() int {
	switch t {
	case TypeString:
		return 8
	case TypeArray:
		return 4 + 8
	}
	return t.fixedSize()
}

// KV is one metadata key-value pair. Value holds one of the Go types uint8,
// int8, uint16, int16, uint32, int32, float32, bool, string, uint64, int64,
// float64, or Array. A Writer also accepts a slice of any of those types
// ([]float32, []string, []Array...) in place of an Array.
type KV struct {
	Key   string
	Value any
}

// Array is an array metadata value. Values is a slice whose element Go type
// matches Type: []uint8 for TypeUint8, []string for TypeString, []Array for
// TypeArray (an array of arrays, each with its own element type), and so on.
type Array struct {
	Type   ValueType
	Values any
}

// Len returns the number of elements, or -1 when Values is not a slice of
// the right type.
func (a Array) Len() int {
	switch v := a.Values.(type) {
	case []uint8:
		return len(v)
	case []int8:
		return len(v)
	case []uint16:
		return len(v)
	case []int16:
		return len(v)
	case []uint32:
		return len(v)
	case []int32:
		return len(v)
	case []float32:
		return len(v)
	case []bool:
		return len(v)
	case []string:
		return len(v)
	case []Array:
		return len(v)
	case []uint64:
		return len(v)
	case []int64:
		return len(v)
	case []float64:
		return len(v)
	}
	return -1
}

// TypeOf returns the metadata type of a Go value as KV.Value holds it.
func TypeOf(v any) (ValueType, error) {
	switch v.(type) {
	case uint8:
		return TypeUint8, nil
	case int8:
		return TypeInt8, nil
	case uint16:
		return TypeUint16, nil
	case int16:
		return TypeInt16, nil
	case uint32:
		return TypeUint32, nil
	case int32:
		return TypeInt32, nil
	case float32:
		return TypeFloat32, nil
	case bool:
		return TypeBool, nil
	case string:
		return TypeString, nil
	case uint64:
		return TypeUint64, nil
	case int64:
		return TypeInt64, nil
	case float64:
		return TypeFloat64, nil
	case Array, []uint8, []int8, []uint16, []int16, []uint32, []int32, []float32, []bool, []string, []Array, []uint64, []int64, []float64:
		return TypeArray, nil
	}
	return 0, fmt.Errorf("gguf: %w", unstorable(v))
}

// unstorable is the error for a Go value that is no metadata type.
func unstorable(v any) error {
	return fmt.Errorf("a value of Go type %T cannot be stored (use a sized integer, float32/64, bool, string, a slice of those, or Array)", v)
}

// arrayOf returns v as an Array: v itself, or a slice wrapped with its
// element type.
func arrayOf(v any) (Array, bool) {
	if a, ok := v.(Array); ok {
		return a, true
	}
	var t ValueType
	switch v.(type) {
	case []uint8:
		t = TypeUint8
	case []int8:
		t = TypeInt8
	case []uint16:
		t = TypeUint16
	case []int16:
		t = TypeInt16
	case []uint32:
		t = TypeUint32
	case []int32:
		t = TypeInt32
	case []float32:
		t = TypeFloat32
	case []bool:
		t = TypeBool
	case []string:
		t = TypeString
	case []Array:
		t = TypeArray
	case []uint64:
		t = TypeUint64
	case []int64:
		t = TypeInt64
	case []float64:
		t = TypeFloat64
	default:
		return Array{}, false
	}
	return Array{Type: t, Values: v}, true
}

// typeName names the metadata type of a Go value for error messages.
func typeName(v any) string {
	t, err := TypeOf(v)
	if err != nil {
		return fmt.Sprintf("Go type %T", v)
	}
	if a, ok := arrayOf(v); ok {
		return "array of " + a.Type.String()
	}
	return t.String()
}
