package mlmodel

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

const schema = "testdata/coreml_subset.proto"

// protocDecode decodes a model with protoc against this package's schema. It
// skips the test when protoc is missing, unless $CI is set: CI installs it
// (Debian's protobuf-compiler), so there its absence is a failure.
func protocDecode(t *testing.T, model []byte) (string, error) {
	t.Helper()
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("protoc not found but $CI is set: install it (apt-get install -y protobuf-compiler): %v", err)
		}
		t.Skipf("protoc not found (apt-get install -y protobuf-compiler to run this test): %v", err)
	}
	cmd := exec.Command(protoc, "--decode=hybrid.coreml.Model", schema)
	cmd.Stdin = bytes.NewReader(model)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("protoc --decode: %v: %s", err, stderr.String())
	}
	return out.String(), nil
}

// unknownField matches protoc's text for a field its schema does not declare:
// a bare field number where a name should be.
var unknownField = regexp.MustCompile(`(?m)^\s*\d+(: | \{)`)

// opType matches Operation.type, the only string field named type.
var opType = regexp.MustCompile(`(?m)^\s*type: "(\w+)"$`)

// checkDecoded checks protoc's text of m: no field outside the schema, the
// specification version, every feature with its name, shape and type, the
// function, opset and block key, the op types in order, the outputs, and one
// bytes (fp16) value per fp16 constant.
func checkDecoded(text string, m *Model) error {
	if u := unknownField.FindString(text); u != "" {
		return fmt.Errorf("protoc found a field outside the schema: %q", strings.TrimSpace(u))
	}
	want := []string{
		fmt.Sprintf("specificationVersion: %d\n", m.SpecVersion),
		fmt.Sprintf("key: %q\n", mainFunction),
		fmt.Sprintf("opset: %q\n", m.Main.Opset),
		fmt.Sprintf("key: %q\n", m.Main.Opset),
	}
	for _, o := range m.Main.Outputs {
		want = append(want, fmt.Sprintf("outputs: %q\n", o))
	}
	feature := func(kind string, f Feature) string {
		s := fmt.Sprintf("  %s {\n    name: %q\n    type {\n      multiArrayType {\n", kind, f.Name)
		for _, d := range f.Shape {
			s += fmt.Sprintf("        shape: %d\n", d)
		}
		return s + fmt.Sprintf("        dataType: %s\n      }\n    }\n  }\n", f.Type)
	}
	for _, f := range m.Inputs {
		want = append(want, feature("input", f))
	}
	for _, f := range m.Outputs {
		want = append(want, feature("output", f))
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			return fmt.Errorf("decoded text lacks %q", w)
		}
	}
	var types, wantTypes []string
	for _, sm := range opType.FindAllStringSubmatch(text, -1) {
		types = append(types, sm[1])
	}
	f16Consts := 0
	for _, op := range m.Main.Ops {
		wantTypes = append(wantTypes, op.Type)
		if op.Value != nil && op.Value.Type.DType == Float16 {
			f16Consts++
		}
	}
	if !slices.Equal(types, wantTypes) {
		return fmt.Errorf("op types %v, want %v", types, wantTypes)
	}
	if n := strings.Count(text, " bytes {\n"); n != f16Consts {
		return fmt.Errorf("%d bytes values, want one per fp16 const (%d)", n, f16Consts)
	}
	return nil
}

// TestProtocDecodes checks that protoc, an independent protobuf parser, reads
// every program against the schema with no stray fields and sees the
// features and ops the writer meant.
func TestProtocDecodes(t *testing.T) {
	for name, m := range programs(t) {
		t.Run(name, func(t *testing.T) {
			text, err := protocDecode(t, mustMarshal(t, m))
			if err != nil {
				t.Fatal(err)
			}
			if err := checkDecoded(text, m); err != nil {
				t.Fatalf("%v\n%s", err, text)
			}
		})
	}
}

// TestProtocCheckCatches shows that the check above can fail: a field the
// schema lacks (Model.isUpdatable, 10) and a truncated file are caught.
func TestProtocCheckCatches(t *testing.T) {
	m, err := Add(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	good := mustMarshal(t, m)
	extra := protowire.AppendVarint(protowire.AppendTag(append([]byte(nil), good...), 10, protowire.VarintType), 1)
	text, err := protocDecode(t, extra)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkDecoded(text, m); err == nil || !strings.Contains(err.Error(), "outside the schema") {
		t.Fatalf("an extra field passed the check: %v\n%s", err, text)
	}
	if _, err := protocDecode(t, good[:len(good)-2]); err == nil {
		t.Fatal("protoc decoded a truncated model")
	}
}
