package gguf

import (
	"fmt"
	"math"
)

// Value returns the value under key, as KV.Value holds it.
func (f *File) Value(key string) (any, bool) {
	i, ok := f.keys[key]
	if !ok {
		return nil, false
	}
	return f.KV[i].Value, true
}

// The accessors below come in pairs: String(key) reports only whether the key
// holds a value of the wanted type, for a loader with defaults; GetString(key)
// returns a *KeyError that names the key and the type it holds.

// String returns the string under key.
func (f *File) String(key string) (string, bool) {
	v, err := f.GetString(key)
	return v, err == nil
}

// Uint returns the integer under key, of any integer type, if it is not
// negative.
func (f *File) Uint(key string) (uint64, bool) {
	v, err := f.GetUint(key)
	return v, err == nil
}

// Int returns the integer under key, of any integer type, if it fits an int64.
func (f *File) Int(key string) (int64, bool) {
	v, err := f.GetInt(key)
	return v, err == nil
}

// Float returns the float32 or float64 under key.
func (f *File) Float(key string) (float64, bool) {
	v, err := f.GetFloat(key)
	return v, err == nil
}

// Bool returns the bool under key.
func (f *File) Bool(key string) (bool, bool) {
	v, err := f.GetBool(key)
	return v, err == nil
}

// Strings returns the array of strings under key. The slice is the File's:
// do not modify it.
func (f *File) Strings(key string) ([]string, bool) {
	v, err := f.GetStrings(key)
	return v, err == nil
}

// Float32s returns the array of float32 under key. The slice is the File's:
// do not modify it.
func (f *File) Float32s(key string) ([]float32, bool) {
	v, err := f.GetFloat32s(key)
	return v, err == nil
}

// Int32s returns the array of int32 under key. The slice is the File's: do not
// modify it.
func (f *File) Int32s(key string) ([]int32, bool) {
	v, err := f.GetInt32s(key)
	return v, err == nil
}

// lookup returns the value under key or a KeyError saying it is missing.
func (f *File) lookup(key string) (any, error) {
	v, ok := f.Value(key)
	if !ok {
		return nil, &KeyError{Path: f.Path, Key: key}
	}
	return v, nil
}

func (f *File) wrongType(key, want string, v any) error {
	return &KeyError{Path: f.Path, Key: key, Want: want, Got: typeName(v)}
}

// GetString returns the string under key.
func (f *File) GetString(key string) (string, error) {
	v, err := f.lookup(key)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", f.wrongType(key, "string", v)
	}
	return s, nil
}

// GetUint returns the integer under key, of any integer type, and fails if it
// is negative.
func (f *File) GetUint(key string) (uint64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case uint8:
		return uint64(x), nil
	case uint16:
		return uint64(x), nil
	case uint32:
		return uint64(x), nil
	case uint64:
		return x, nil
	}
	n, ok := signed(v)
	if !ok {
		return 0, f.wrongType(key, "an unsigned integer", v)
	}
	if n < 0 {
		return 0, &KeyError{Path: f.Path, Key: key, Want: "an unsigned integer", Got: typeName(v), Msg: fmt.Sprintf("is %d, want a non-negative integer", n)}
	}
	return uint64(n), nil
}

// GetInt returns the integer under key, of any integer type, and fails if it
// does not fit an int64.
func (f *File) GetInt(key string) (int64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	if n, ok := signed(v); ok {
		return n, nil
	}
	var u uint64
	switch x := v.(type) {
	case uint8:
		u = uint64(x)
	case uint16:
		u = uint64(x)
	case uint32:
		u = uint64(x)
	case uint64:
		u = x
	default:
		return 0, f.wrongType(key, "an integer", v)
	}
	if u > math.MaxInt64 {
		return 0, &KeyError{Path: f.Path, Key: key, Want: "an integer", Got: "uint64", Msg: fmt.Sprintf("is %d, which overflows an int64", u)}
	}
	return int64(u), nil
}

// signed returns v as an int64 if it is a signed integer.
func signed(v any) (int64, bool) {
	switch x := v.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

// GetFloat returns the float32 or float64 under key. Integers are not
// converted: GGUF writers store real-valued hyper-parameters as floats.
func (f *File) GetFloat(key string) (float64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	}
	return 0, f.wrongType(key, "a float", v)
}

// GetBool returns the bool under key.
func (f *File) GetBool(key string) (bool, error) {
	v, err := f.lookup(key)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, f.wrongType(key, "bool", v)
	}
	return b, nil
}

// GetStrings returns the array of strings under key.
func (f *File) GetStrings(key string) ([]string, error) {
	return getArray[string](f, key, "array of string")
}

// GetFloat32s returns the array of float32 under key.
func (f *File) GetFloat32s(key string) ([]float32, error) {
	return getArray[float32](f, key, "array of float32")
}

// GetInt32s returns the array of int32 under key.
func (f *File) GetInt32s(key string) ([]int32, error) {
	return getArray[int32](f, key, "array of int32")
}

func getArray[T any](f *File, key, want string) ([]T, error) {
	v, err := f.lookup(key)
	if err != nil {
		return nil, err
	}
	if a, ok := v.(Array); ok {
		if s, ok := a.Values.([]T); ok {
			return s, nil
		}
	}
	return nil, f.wrongType(key, want, v)
}
