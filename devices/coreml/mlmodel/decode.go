package mlmodel

import (
	"encoding/binary"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Unmarshal parses the bytes of a .mlmodel file that Marshal wrote. It is
// strict: a field this package does not write, a wire type that does not fit
// the schema, more than one function or block, or a tensor value whose field
// does not match its type is an error naming the message and field, so that
// the tests notice anything the writer emits by mistake.
func Unmarshal(b []byte) (*Model, error) {
	m := &Model{}
	var haveProgram bool
	err := fields(b, "Model", func(f field) error {
		switch f.num {
		case fModelSpecVersion:
			v, err := f.varint()
			m.SpecVersion = int32(v)
			return err
		case fModelDescription:
			return f.message(m.decodeDescription)
		case fModelMLProgram:
			haveProgram = true
			return f.message(m.decodeProgram)
		}
		return f.unknown()
	})
	if err != nil {
		return nil, err
	}
	if !haveProgram {
		return nil, fmt.Errorf("mlmodel: Model: no mlProgram (field %d)", fModelMLProgram)
	}
	return m, nil
}

func (m *Model) decodeDescription(b []byte) error {
	return fields(b, "ModelDescription", func(f field) error {
		switch f.num {
		case fDescInput, fDescOutput:
			var ft Feature
			if err := f.message(ft.decode); err != nil {
				return err
			}
			if f.num == fDescInput {
				m.Inputs = append(m.Inputs, ft)
			} else {
				m.Outputs = append(m.Outputs, ft)
			}
			return nil
		}
		return f.unknown()
	})
}

func (ft *Feature) decode(b []byte) error {
	return fields(b, "FeatureDescription", func(f field) error {
		switch f.num {
		case fFeatureName:
			return f.str(&ft.Name)
		case fFeatureType:
			return f.message(func(b []byte) error {
				return fields(b, "FeatureType", func(f field) error {
					if f.num != fFeatureTypeMultiArray {
						return f.unknown()
					}
					return f.message(ft.decodeArray)
				})
			})
		}
		return f.unknown()
	})
}

func (ft *Feature) decodeArray(b []byte) error {
	return fields(b, "ArrayFeatureType", func(f field) error {
		switch f.num {
		case fArrayShape:
			vs, err := f.varints()
			for _, v := range vs {
				ft.Shape = append(ft.Shape, int64(v))
			}
			return err
		case fArrayDataType:
			v, err := f.varint()
			ft.Type = ArrayType(v)
			return err
		}
		return f.unknown()
	})
}

func (m *Model) decodeProgram(b []byte) error {
	functions := 0
	var version uint64
	err := fields(b, "Program", func(f field) error {
		switch f.num {
		case fProgramVersion:
			var err error
			version, err = f.varint()
			return err
		case fProgramFunctions:
			functions++
			return f.message(func(b []byte) error {
				return mapEntry(b, "Program.functions", func(key string, value []byte) error {
					if key != mainFunction {
						return fmt.Errorf("mlmodel: Program: function %q, want only %q", key, mainFunction)
					}
					return m.Main.decode(value)
				})
			})
		}
		return f.unknown()
	})
	if err != nil {
		return err
	}
	if version != programVersion || functions != 1 {
		return fmt.Errorf("mlmodel: Program: version %d with %d functions, want version %d with 1", version, functions, programVersion)
	}
	return nil
}

func (fn *Function) decode(b []byte) error {
	blocks := 0
	var block []byte
	var blockKey string
	err := fields(b, "Function", func(f field) error {
		switch f.num {
		case fFunctionInputs:
			var v Var
			if err := f.message(v.decode); err != nil {
				return err
			}
			fn.Inputs = append(fn.Inputs, v)
			return nil
		case fFunctionOpset:
			return f.str(&fn.Opset)
		case fFunctionBlocks:
			blocks++
			return f.message(func(b []byte) error {
				return mapEntry(b, "Function.block_specializations", func(key string, value []byte) error {
					blockKey, block = key, value
					return nil
				})
			})
		}
		return f.unknown()
	})
	if err != nil {
		return err
	}
	if blocks != 1 || blockKey != fn.Opset {
		return fmt.Errorf("mlmodel: Function: %d blocks (last for %q), want one for its opset %q", blocks, blockKey, fn.Opset)
	}
	return fields(block, "Block", func(f field) error {
		switch f.num {
		case fBlockOutputs:
			var s string
			err := f.str(&s)
			fn.Outputs = append(fn.Outputs, s)
			return err
		case fBlockOperations:
			var op Op
			if err := f.message(op.decode); err != nil {
				return err
			}
			fn.Ops = append(fn.Ops, op)
			return nil
		}
		return f.unknown()
	})
}

func (op *Op) decode(b []byte) error {
	var haveName bool
	err := fields(b, "Operation", func(f field) error {
		switch f.num {
		case fOpType:
			return f.str(&op.Type)
		case fOpInputs:
			return f.message(func(b []byte) error {
				return mapEntry(b, "Operation.inputs", func(param string, value []byte) error {
					a := Arg{Param: param}
					bindings := 0
					err := fields(value, "Argument", func(f field) error {
						if f.num != fArgumentArguments {
							return f.unknown()
						}
						bindings++
						return f.message(func(b []byte) error {
							return fields(b, "Argument.Binding", func(f field) error {
								if f.num != fBindingName {
									return f.unknown()
								}
								return f.str(&a.Var)
							})
						})
					})
					if err == nil && bindings != 1 {
						err = fmt.Errorf("mlmodel: Argument %s: %d bindings, want 1", param, bindings)
					}
					op.Inputs = append(op.Inputs, a)
					return err
				})
			})
		case fOpOutputs:
			var v Var
			if err := f.message(v.decode); err != nil {
				return err
			}
			op.Outputs = append(op.Outputs, v)
			return nil
		case fOpAttributes:
			return f.message(func(b []byte) error {
				return mapEntry(b, "Operation.attributes", func(key string, value []byte) error {
					t := &Tensor{}
					if err := t.decodeValue(value); err != nil {
						return fmt.Errorf("%w (attribute %q)", err, key)
					}
					switch key {
					case "name":
						if t.Type.DType != String || len(t.Type.Shape) != 0 || len(t.Str) != 1 {
							return fmt.Errorf("mlmodel: Operation: attribute name is %s, want a string", t.Type)
						}
						op.Name, haveName = t.Str[0], true
					case "val":
						op.Value = t
					default:
						return fmt.Errorf("mlmodel: Operation: unknown attribute %q", key)
					}
					return nil
				})
			})
		}
		return f.unknown()
	})
	if err == nil && !haveName {
		err = fmt.Errorf("mlmodel: Operation %s: no name attribute", op.Type)
	}
	return err
}

func (v *Var) decode(b []byte) error {
	return fields(b, "NamedValueType", func(f field) error {
		switch f.num {
		case fNamedName:
			return f.str(&v.Name)
		case fNamedType:
			return f.message(v.Type.decodeValueType)
		}
		return f.unknown()
	})
}

func (t *TensorType) decodeValueType(b []byte) error {
	return fields(b, "ValueType", func(f field) error {
		if f.num != fValueTypeTensor {
			return f.unknown()
		}
		var rank uint64
		err := f.message(func(b []byte) error {
			return fields(b, "TensorType", func(f field) error {
				switch f.num {
				case fTensorDataType:
					v, err := f.varint()
					t.DType = DataType(v)
					return err
				case fTensorRank:
					var err error
					rank, err = f.varint()
					return err
				case fTensorDimensions:
					return f.message(func(b []byte) error {
						return fields(b, "Dimension", func(f field) error {
							if f.num != fDimConstant {
								return f.unknown()
							}
							var size uint64
							err := f.message(func(b []byte) error {
								return fields(b, "Dimension.ConstantDimension", func(f field) error {
									if f.num != fDimSize {
										return f.unknown()
									}
									var err error
									size, err = f.varint()
									return err
								})
							})
							t.Shape = append(t.Shape, int64(size))
							return err
						})
					})
				}
				return f.unknown()
			})
		})
		if err == nil && rank != uint64(len(t.Shape)) {
			err = fmt.Errorf("mlmodel: TensorType: rank %d with %d dimensions", rank, len(t.Shape))
		}
		return err
	})
}

// decodeValue parses a MIL Value holding an immediate tensor.
func (t *Tensor) decodeValue(b []byte) error {
	var tv []byte
	var haveType, haveTensor bool
	err := fields(b, "Value", func(f field) error {
		switch f.num {
		case fValueType:
			haveType = true
			return f.message(t.Type.decodeValueType)
		case fValueImmediate:
			return f.message(func(b []byte) error {
				return fields(b, "Value.ImmediateValue", func(f field) error {
					if f.num != fImmediateTensor {
						return f.unknown()
					}
					haveTensor = true
					tv = f.bytes
					return f.want(protowire.BytesType)
				})
			})
		}
		return f.unknown()
	})
	if err != nil {
		return err
	}
	if !haveType || !haveTensor {
		return fmt.Errorf("mlmodel: Value: type present %v, immediate tensor present %v", haveType, haveTensor)
	}
	want := map[DataType]protowire.Number{Float32: fTVFloats, Float16: fTVBytes, Int32: fTVInts, Bool: fTVBools, String: fTVStrings}[t.Type.DType]
	if want == 0 {
		return fmt.Errorf("mlmodel: Value of unsupported type %s", t.Type)
	}
	kinds := 0
	err = fields(tv, "TensorValue", func(f field) error {
		kinds++
		if f.num != want {
			return fmt.Errorf("mlmodel: TensorValue: field %d holds a %s value, want field %d", f.num, t.Type.DType, want)
		}
		return f.message(func(b []byte) error {
			return fields(b, "TensorValue.Repeated", func(f field) error {
				if f.num != fRepValues {
					return f.unknown()
				}
				return t.decodeValues(f)
			})
		})
	})
	if err == nil && kinds != 1 {
		err = fmt.Errorf("mlmodel: TensorValue: %d value fields, want 1", kinds)
	}
	return err
}

func (t *Tensor) decodeValues(f field) error {
	switch t.Type.DType {
	case Float32:
		if err := f.want(protowire.BytesType); err != nil {
			return err
		}
		if len(f.bytes)%4 != 0 {
			return fmt.Errorf("mlmodel: packed floats of %d bytes", len(f.bytes))
		}
		for i := 0; i < len(f.bytes); i += 4 {
			t.F32 = append(t.F32, math.Float32frombits(binary.LittleEndian.Uint32(f.bytes[i:])))
		}
	case Float16:
		if err := f.want(protowire.BytesType); err != nil {
			return err
		}
		if len(f.bytes)%2 != 0 {
			return fmt.Errorf("mlmodel: fp16 bytes of odd length %d", len(f.bytes))
		}
		for i := 0; i < len(f.bytes); i += 2 {
			t.F16 = append(t.F16, binary.LittleEndian.Uint16(f.bytes[i:]))
		}
	case Int32:
		vs, err := f.varints()
		for _, v := range vs {
			t.I32 = append(t.I32, int32(v))
		}
		return err
	case Bool:
		vs, err := f.varints()
		for _, v := range vs {
			t.Bool = append(t.Bool, protowire.DecodeBool(v))
		}
		return err
	case String:
		var s string
		err := f.str(&s)
		t.Str = append(t.Str, s)
		return err
	}
	return nil
}

// field is one field of a message on the wire: a varint's value, or a
// length-delimited field's bytes.
type field struct {
	msg   string
	num   protowire.Number
	typ   protowire.Type
	v     uint64
	bytes []byte
}

// fields calls fn for each field of the message b; msg names the message in
// errors.
func fields(b []byte, msg string, fn func(field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("mlmodel: %s: bad tag: %w", msg, protowire.ParseError(n))
		}
		b = b[n:]
		f := field{msg: msg, num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f.bytes, n = protowire.ConsumeBytes(b)
		default:
			return fmt.Errorf("mlmodel: %s: field %d has wire type %d, which this format never uses", msg, num, typ)
		}
		if n < 0 {
			return fmt.Errorf("mlmodel: %s: field %d: %w", msg, num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

func (f field) unknown() error {
	return fmt.Errorf("mlmodel: %s: unexpected field %d", f.msg, f.num)
}

func (f field) want(t protowire.Type) error {
	if f.typ != t {
		return fmt.Errorf("mlmodel: %s: field %d has wire type %d, want %d", f.msg, f.num, f.typ, t)
	}
	return nil
}

func (f field) varint() (uint64, error) { return f.v, f.want(protowire.VarintType) }

func (f field) str(s *string) error {
	*s = string(f.bytes)
	return f.want(protowire.BytesType)
}

func (f field) message(fn func([]byte) error) error {
	if err := f.want(protowire.BytesType); err != nil {
		return err
	}
	return fn(f.bytes)
}

// varints returns a repeated varint field's values, packed or not.
func (f field) varints() ([]uint64, error) {
	if f.typ == protowire.VarintType {
		return []uint64{f.v}, nil
	}
	if err := f.want(protowire.BytesType); err != nil {
		return nil, err
	}
	var vs []uint64
	for b := f.bytes; len(b) > 0; {
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return nil, fmt.Errorf("mlmodel: %s: field %d: %w", f.msg, f.num, protowire.ParseError(n))
		}
		vs = append(vs, v)
		b = b[n:]
	}
	return vs, nil
}

// mapEntry parses one entry of a map<string, message> field.
func mapEntry(b []byte, msg string, fn func(key string, value []byte) error) error {
	var key string
	var value []byte
	err := fields(b, msg, func(f field) error {
		switch f.num {
		case fMapKey:
			return f.str(&key)
		case fMapValue:
			value = f.bytes
			return f.want(protowire.BytesType)
		}
		return f.unknown()
	})
	if err != nil {
		return err
	}
	return fn(key, value)
}
