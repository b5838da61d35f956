package mlmodel

import (
	"encoding/binary"
	"math"
	"slices"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of the messages written, from coremltools' schema
// (mlmodel/format/Model.proto, FeatureTypes.proto, MIL.proto); the subset is
// spelled out in testdata/coreml_subset.proto.
const (
	// Model
	fModelSpecVersion = 1
	fModelDescription = 2
	fModelMLProgram   = 502
	// ModelDescription
	fDescInput  = 1
	fDescOutput = 10
	// FeatureDescription
	fFeatureName = 1
	fFeatureType = 3
	// FeatureType
	fFeatureTypeMultiArray = 5
	// ArrayFeatureType
	fArrayShape    = 1
	fArrayDataType = 2
	// Program
	fProgramVersion   = 1
	fProgramFunctions = 2
	// map entries
	fMapKey   = 1
	fMapValue = 2
	// Function
	fFunctionInputs = 1
	fFunctionOpset  = 2
	fFunctionBlocks = 3
	// Block
	fBlockOutputs    = 2
	fBlockOperations = 3
	// Argument, Argument.Binding
	fArgumentArguments = 1
	fBindingName       = 1
	// Operation
	fOpType       = 1
	fOpInputs     = 2
	fOpOutputs    = 3
	fOpAttributes = 5
	// NamedValueType
	fNamedName = 1
	fNamedType = 2
	// ValueType
	fValueTypeTensor = 1
	// TensorType
	fTensorDataType   = 1
	fTensorRank       = 2
	fTensorDimensions = 3
	// Dimension, Dimension.ConstantDimension
	fDimConstant = 1
	fDimSize     = 1
	// Value, Value.ImmediateValue
	fValueType       = 2
	fValueImmediate  = 3
	fImmediateTensor = 1
	// TensorValue and its Repeated* messages (all hold field 1, "values")
	fTVFloats  = 1
	fTVInts    = 2
	fTVBools   = 3
	fTVStrings = 4
	fTVBytes   = 7
	fRepValues = 1
)

// mainFunction is the name of the one function of every program.
const mainFunction = "main"

// programVersion is MIL.proto's Program.version that coremltools writes.
const programVersion = 1

// Marshal validates m and encodes it as the bytes of a .mlmodel file. The
// encoding is deterministic (map entries in key order), so equal models give
// equal bytes.
func Marshal(m *Model) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	size := 1 << 12
	for i := range m.Main.Ops {
		if v := m.Main.Ops[i].Value; v != nil {
			size += 4*v.length() + 256
		}
	}
	b := make([]byte, 0, size)
	b = appendVarintField(b, fModelSpecVersion, uint64(m.SpecVersion))
	b = appendMessage(b, fModelDescription, func(b []byte) []byte {
		for _, f := range m.Inputs {
			b = appendMessage(b, fDescInput, f.append)
		}
		for _, f := range m.Outputs {
			b = appendMessage(b, fDescOutput, f.append)
		}
		return b
	})
	return appendMessage(b, fModelMLProgram, m.appendProgram), nil
}

func (f Feature) append(b []byte) []byte {
	b = appendStringField(b, fFeatureName, f.Name)
	return appendMessage(b, fFeatureType, func(b []byte) []byte {
		return appendMessage(b, fFeatureTypeMultiArray, func(b []byte) []byte {
			// proto3 packs repeated scalars.
			var packed []byte
			for _, d := range f.Shape {
				packed = protowire.AppendVarint(packed, uint64(d))
			}
			if len(packed) > 0 {
				b = protowire.AppendTag(b, fArrayShape, protowire.BytesType)
				b = protowire.AppendBytes(b, packed)
			}
			return appendVarintField(b, fArrayDataType, uint64(f.Type))
		})
	})
}

func (m *Model) appendProgram(b []byte) []byte {
	b = appendVarintField(b, fProgramVersion, programVersion)
	return appendMessage(b, fProgramFunctions, func(b []byte) []byte {
		b = appendStringField(b, fMapKey, mainFunction)
		return appendMessage(b, fMapValue, m.Main.append)
	})
}

func (fn *Function) append(b []byte) []byte {
	for _, v := range fn.Inputs {
		b = appendMessage(b, fFunctionInputs, v.append)
	}
	b = appendStringField(b, fFunctionOpset, fn.Opset)
	// The block is specialised for the function's opset (coremltools writes
	// exactly one, keyed by the opset name).
	return appendMessage(b, fFunctionBlocks, func(b []byte) []byte {
		b = appendStringField(b, fMapKey, fn.Opset)
		return appendMessage(b, fMapValue, func(b []byte) []byte {
			for _, o := range fn.Outputs {
				b = appendStringField(b, fBlockOutputs, o)
			}
			for i := range fn.Ops {
				b = appendMessage(b, fBlockOperations, fn.Ops[i].append)
			}
			return b
		})
	})
}

func (op *Op) append(b []byte) []byte {
	b = appendStringField(b, fOpType, op.Type)
	args := append([]Arg(nil), op.Inputs...)
	sort.SliceStable(args, func(i, j int) bool { return args[i].Param < args[j].Param })
	for _, a := range args {
		b = appendMessage(b, fOpInputs, func(b []byte) []byte {
			b = appendStringField(b, fMapKey, a.Param)
			return appendMessage(b, fMapValue, func(b []byte) []byte {
				return appendMessage(b, fArgumentArguments, func(b []byte) []byte {
					return appendStringField(b, fBindingName, a.Var)
				})
			})
		})
	}
	for _, v := range op.Outputs {
		b = appendMessage(b, fOpOutputs, v.append)
	}
	// Attributes in key order: "name" (every op, as coremltools writes it),
	// then "val" (a const's value).
	name := &Tensor{Type: TensorType{DType: String}, Str: []string{op.Name}}
	b = appendAttribute(b, "name", name)
	if op.Value != nil {
		b = appendAttribute(b, "val", op.Value)
	}
	return b
}

func appendAttribute(b []byte, key string, t *Tensor) []byte {
	return appendMessage(b, fOpAttributes, func(b []byte) []byte {
		b = appendStringField(b, fMapKey, key)
		return appendMessage(b, fMapValue, t.appendValue)
	})
}

func (v Var) append(b []byte) []byte {
	b = appendStringField(b, fNamedName, v.Name)
	return appendMessage(b, fNamedType, v.Type.appendValueType)
}

func (t TensorType) appendValueType(b []byte) []byte {
	return appendMessage(b, fValueTypeTensor, func(b []byte) []byte {
		b = appendVarintField(b, fTensorDataType, uint64(t.DType))
		b = appendVarintField(b, fTensorRank, uint64(len(t.Shape)))
		for _, d := range t.Shape {
			b = appendMessage(b, fTensorDimensions, func(b []byte) []byte {
				return appendMessage(b, fDimConstant, func(b []byte) []byte {
					return appendVarintField(b, fDimSize, uint64(d))
				})
			})
		}
		return b
	})
}

// appendValue writes t as a MIL Value: its type, then its immediate value.
func (t *Tensor) appendValue(b []byte) []byte {
	b = appendMessage(b, fValueType, t.Type.appendValueType)
	return appendMessage(b, fValueImmediate, func(b []byte) []byte {
		return appendMessage(b, fImmediateTensor, t.appendTensorValue)
	})
}

// appendTensorValue writes the field of TensorValue that holds t's type, the
// one coremltools uses: floats for fp32, raw little-endian bytes for fp16,
// ints for int32, bools, strings.
func (t *Tensor) appendTensorValue(b []byte) []byte {
	switch t.Type.DType {
	case Float32:
		return appendMessage(b, fTVFloats, func(b []byte) []byte {
			p := make([]byte, 0, 4*len(t.F32))
			for _, v := range t.F32 {
				p = binary.LittleEndian.AppendUint32(p, math.Float32bits(v))
			}
			return appendBytesField(b, fRepValues, p)
		})
	case Float16:
		return appendMessage(b, fTVBytes, func(b []byte) []byte {
			if len(t.F16) == 0 {
				return b
			}
			// Written in place: these are the weights, the bulk of a model.
			b = protowire.AppendTag(b, fRepValues, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(2*len(t.F16)))
			n := len(b)
			b = slices.Grow(b, 2*len(t.F16))[:n+2*len(t.F16)]
			for i, v := range t.F16 {
				binary.LittleEndian.PutUint16(b[n+2*i:], v)
			}
			return b
		})
	case Int32:
		return appendMessage(b, fTVInts, func(b []byte) []byte {
			var p []byte
			for _, v := range t.I32 {
				// int32 varints sign-extend to 64 bits.
				p = protowire.AppendVarint(p, uint64(int64(v)))
			}
			return appendBytesField(b, fRepValues, p)
		})
	case Bool:
		return appendMessage(b, fTVBools, func(b []byte) []byte {
			var p []byte
			for _, v := range t.Bool {
				p = protowire.AppendVarint(p, protowire.EncodeBool(v))
			}
			return appendBytesField(b, fRepValues, p)
		})
	case String:
		return appendMessage(b, fTVStrings, func(b []byte) []byte {
			for _, s := range t.Str {
				// Repeated elements are written even when empty.
				b = protowire.AppendTag(b, fRepValues, protowire.BytesType)
				b = protowire.AppendString(b, s)
			}
			return b
		})
	}
	panic("mlmodel: tensor of unsupported type " + t.Type.DType.String()) // Validate refuses these
}

// appendMessage appends field num holding the message that body writes. The
// body is written in place after a one-byte length prefix and moved up only
// when its length needs more bytes, so small messages (most of a program) are
// never copied.
func appendMessage(b []byte, num protowire.Number, body func([]byte) []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	start := len(b)
	const guess = 1 // prefix bytes reserved: right for bodies under 128 bytes
	b = append(b, make([]byte, guess)...)
	b = body(b)
	n := len(b) - start - guess
	size := protowire.SizeVarint(uint64(n))
	if size != guess {
		b = append(b, make([]byte, size-guess)...)
		copy(b[start+size:], b[start+guess:start+guess+n])
	}
	protowire.AppendVarint(b[start:start], uint64(n))
	return b
}

// appendVarintField appends a varint field, leaving out zero as proto3 does.
func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// appendStringField appends a string field, leaving out "" as proto3 does.
func appendStringField(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendBytesField appends a bytes field, leaving out empty ones as proto3
// does.
func appendBytesField(b []byte, num protowire.Number, p []byte) []byte {
	if len(p) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, p)
}
