package mlmodel

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"hybrid/quant"
)

// randF16 returns n binary16 values of normally distributed numbers times
// scale.
func randF16(r *rand.Rand, n int, scale float64) []uint16 {
	w := make([]uint16, n)
	for i := range w {
		w[i] = quant.F32ToF16(float32(r.NormFloat64() * scale))
	}
	return w
}

// programs returns one model of each kind, small enough to print.
func programs(t testing.TB) map[string]*Model {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 1))
	must := func(m *Model, err error) *Model {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	return map[string]*Model{
		"mat_mul":  must(MatMul(3, 8, 5, randF16(r, 5*8, 0.5))),
		"rms_norm": must(RMSNorm(2, 8, randF16(r, 8, 1), 1e-5)),
		"silu_mul": must(SiLUMul(2, 6)),
		"add":      must(Add(4, 3)),
		"add_bias": must(AddBias(3, 5, randF16(r, 5, 1))),
	}
}

// mustMarshal encodes m or fails the test.
func mustMarshal(t *testing.T, m *Model) []byte {
	t.Helper()
	b, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sortedArgs returns m with every op's arguments in parameter order, the
// order Marshal writes them in.
func sortedArgs(m *Model) *Model {
	c := *m
	c.Main.Ops = append([]Op(nil), m.Main.Ops...)
	for i := range c.Main.Ops {
		args := append([]Arg(nil), c.Main.Ops[i].Inputs...)
		sort.SliceStable(args, func(a, b int) bool { return args[a].Param < args[b].Param })
		c.Main.Ops[i].Inputs = args
	}
	return &c
}

func TestRoundTrip(t *testing.T) {
	for name, m := range programs(t) {
		t.Run(name, func(t *testing.T) {
			b := mustMarshal(t, m)
			if !bytes.Equal(b, mustMarshal(t, m)) {
				t.Fatal("two encodings of one model differ")
			}
			// Every byte belongs to a well-formed top-level field.
			for rest := b; len(rest) > 0; {
				_, _, n := protowire.ConsumeField(rest)
				if n < 0 {
					t.Fatalf("malformed field at byte %d: %v", len(b)-len(rest), protowire.ParseError(n))
				}
				rest = rest[n:]
			}
			got, err := Unmarshal(b)
			if err != nil {
				t.Fatal(err)
			}
			if want := sortedArgs(m); !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded model differs:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestLongMessages covers the length prefixes of one to four bytes that
// large weights need (appendMessage moves a body when its prefix grows).
func TestLongMessages(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for _, c := range []struct{ k, m int }{{8, 3}, {64, 3}, {4096, 3}, {1024, 1100}} {
		k := c.k
		m, err := MatMul(1, k, c.m, randF16(r, c.m*k, 1))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Unmarshal(mustMarshal(t, m))
		if err != nil {
			t.Fatalf("k=%d: %v", k, err)
		}
		if !reflect.DeepEqual(got, sortedArgs(m)) {
			t.Fatalf("k=%d: decoded model differs", k)
		}
	}
}

// FuzzUnmarshal checks that any bytes give a model or an error, never a
// panic, and that a valid model decoded from them encodes to bytes that
// decode to the same model.
func FuzzUnmarshal(f *testing.F) {
	for _, m := range programs(f) {
		b, _ := Marshal(m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Unmarshal(b)
		if err != nil || m.Validate() != nil {
			return
		}
		again, err := Unmarshal(mustMarshal(t, m))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again, sortedArgs(m)) {
			t.Fatalf("re-encoded model differs:\n got %+v\nwant %+v", again, m)
		}
	})
}

func TestUnmarshalRejects(t *testing.T) {
	m, _ := Add(1, 2)
	good := mustMarshal(t, m)
	field := func(num protowire.Number, typ protowire.Type, payload []byte) []byte {
		b := protowire.AppendTag(nil, num, typ)
		if typ == protowire.BytesType {
			return protowire.AppendBytes(b, payload)
		}
		return protowire.AppendVarint(b, 1)
	}
	// A second function in the program.
	twoFuncs := append(append([]byte(nil), good...), field(fModelMLProgram, protowire.BytesType,
		field(fProgramFunctions, protowire.BytesType, protowire.AppendString(protowire.AppendTag(nil, fMapKey, protowire.BytesType), "other")))...)
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"unknown field", append(append([]byte(nil), good...), field(7, protowire.VarintType, nil)...), "Model: unexpected field 7"},
		{"wrong wire type", append(field(fModelDescription, protowire.VarintType, nil), good...), "wire type 0, want 2"},
		{"truncated", good[:len(good)-3], "mlmodel:"},
		{"no program", field(fModelSpecVersion, protowire.VarintType, nil), "no mlProgram"},
		{"two functions", twoFuncs, `function "other"`},
		{"fixed32 field", append(protowire.AppendFixed32(protowire.AppendTag(nil, 3, protowire.Fixed32Type), 0), good...), "never uses"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Unmarshal(c.b)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestTensorValueField checks that a value stored in the field of another
// type (fp16 weights as floats, say) is refused: CoreML reads each type from
// one field only.
func TestTensorValueField(t *testing.T) {
	f := &Tensor{Type: f16(2), F16: []uint16{0x3c00, 0x4000}}
	wrong := &Tensor{Type: TensorType{DType: Float32, Shape: []int64{2}}, F32: []float32{1, 2}}
	b := wrong.appendValue(nil)
	// Re-label the float32 value as fp16: same values, wrong field.
	relabelled := append(protowire.AppendTag(nil, fValueType, protowire.BytesType), protowire.AppendBytes(nil, f.Type.appendValueType(nil))...)
	_, _, n := protowire.ConsumeField(b) // skip wrong's type
	relabelled = append(relabelled, b[n:]...)
	var got Tensor
	if err := got.decodeValue(relabelled); err == nil || !strings.Contains(err.Error(), "holds a fp16 value") {
		t.Fatalf("fp16 value in the floats field: got %v", err)
	}
	var right Tensor
	if err := right.decodeValue(f.appendValue(nil)); err != nil || !reflect.DeepEqual(&right, f) {
		t.Fatalf("fp16 value: %+v, %v", right, err)
	}
}

func TestValidateRejects(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(m *Model)
		want   string
	}{
		{"old spec", func(m *Model) { m.SpecVersion = 5 }, "no ML Programs"},
		{"opset", func(m *Model) { m.Main.Opset = "CoreML4" }, "opset"},
		{"undefined", func(m *Model) { m.Main.Ops[len(m.Main.Ops)-1].Inputs[0].Var = "nope" }, "before it is defined"},
		{"defined twice", func(m *Model) { m.Main.Ops[1].Outputs[0].Name = m.Main.Ops[0].Outputs[0].Name }, "defined twice"},
		{"identifier", func(m *Model) { m.Main.Ops[0].Name = "1x" }, "not a MIL identifier"},
		{"feature shape", func(m *Model) { m.Inputs[0].Shape = []int64{2, 2} }, "does not match function input"},
		{"huge shape", func(m *Model) { m.Main.Ops[1].Outputs[0].Type.Shape = []int64{1 << 20, 1 << 20} }, "has shape"},
		{"param twice", func(m *Model) {
			op := &m.Main.Ops[len(m.Main.Ops)-1]
			op.Inputs = append(op.Inputs, op.Inputs[0])
		}, "bound twice"},
		{"feature type", func(m *Model) { m.Outputs[0].Type = ArrayFloat16 }, "does not match function output"},
		{"const size", func(m *Model) {
			for i := range m.Main.Ops {
				if m.Main.Ops[i].Type == "const" && m.Main.Ops[i].Value.Type.DType == Float16 {
					m.Main.Ops[i].Value.F16 = m.Main.Ops[i].Value.F16[1:]
					return
				}
			}
		}, "elements for output"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := MatMul(1, 4, 2, make([]uint16, 8))
			if err != nil {
				t.Fatal(err)
			}
			c.mutate(m)
			if err := m.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
			if _, err := Marshal(m); err == nil {
				t.Fatal("Marshal wrote an invalid model")
			}
		})
	}
}

func TestBuildRejectsBadShapes(t *testing.T) {
	for name, err := range map[string]error{
		"mat_mul weights": func() error { _, err := MatMul(1, 4, 2, make([]uint16, 7)); return err }(),
		"mat_mul rows":    func() error { _, err := MatMul(0, 4, 2, make([]uint16, 8)); return err }(),
		"rms_norm eps":    func() error { _, err := RMSNorm(1, 2, make([]uint16, 2), -1); return err }(),
		"rms_norm width":  func() error { _, err := RMSNorm(1, 3, make([]uint16, 2), 1e-5); return err }(),
		"add":             func() error { _, err := Add(1, 0); return err }(),
		"silu_mul":        func() error { _, err := SiLUMul(-1, 2); return err }(),
		"add_bias width":  func() error { _, err := AddBias(2, 3, make([]uint16, 4)); return err }(),
		"add_bias rows":   func() error { _, err := AddBias(0, 3, make([]uint16, 3)); return err }(),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
