package configs

import (
	"bytes"
	"errors"
	"io"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// MaxBytes is the largest file a Format reads unless it says otherwise: far
// more than any config written by hand or by `hybrid profile` needs, and
// small enough that a wrong path (a model file) is refused before parsing.
const MaxBytes = 1 << 20

// A Format is one kind of config file (policies, hardware profiles, cost
// profiles), decoded strictly into a Go struct by Decode: an unknown key, a
// key given twice, a value of the wrong type or shape, a number that is not
// finite (.nan, .inf), a YAML alias, a second document and a file over the
// size limit are all errors, each an *Error naming the file and line.
//
// Struct fields are named by their yaml tags (the lower-cased field name
// without one; "-" skips a field); a field may be a string, bool, integer,
// float, slice, map with string keys, struct, or pointer to one of those.
type Format struct {
	// Name is what a file of the format is called in errors: "policy file"
	// gives "empty policy file".
	Name string
	// MaxBytes is the largest file; 0 stands for the package's MaxBytes.
	MaxBytes int
	// Nulls lets a key or list item be given no value ("links:" with
	// nothing after it), which then decodes as the zero value; without it
	// that is a NoValue error. A struct is never empty.
	Nulls bool
	// Extra lists keys the document's top-level mapping may have besides
	// its struct's fields (settings that other packages register); their
	// values go into the struct's map field tagged `yaml:",inline"`.
	Extra []string
	// Words, if set, words a problem in the format's own terms; "" leaves
	// it to the decoder's wording.
	Words func(Problem) string
}

func (f *Format) limit() int {
	if f.MaxBytes > 0 {
		return f.MaxBytes
	}
	return MaxBytes
}

// Decode decodes data, the one YAML document of a file at path, into v, a
// non-nil pointer to a struct, and returns where each value was. Aliases
// are refused outright, so nothing is expanded: what is decoded is no
// larger than the file.
func (f *Format) Decode(data []byte, path string, v any) (*Node, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		panic("configs: Decode needs a non-nil pointer, not " + rv.Kind().String())
	}
	if len(data) > f.limit() {
		return nil, f.fail(path, 0, Problem{Issue: TooLarge})
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, f.fail(path, 1, Problem{Issue: Empty})
		}
		return nil, f.syntax(path, data, err)
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		return nil, f.fail(path, max(next.Line, 1), Problem{Issue: SecondDocument})
	} else if !errors.Is(err, io.EOF) {
		return nil, f.syntax(path, data, err)
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, f.fail(path, 1, Problem{Issue: Empty})
		}
		doc = doc.Content[0]
	}
	if isNull(doc) {
		return nil, f.fail(path, 1, Problem{Issue: Empty})
	}
	d := &decoder{f: f, path: path}
	return d.value(doc, rv.Elem(), nil, "", doc.Line)
}

func (f *Format) fail(path string, line int, p Problem) *Error {
	msg := ""
	if f.Words != nil {
		msg = f.Words(p)
	}
	if msg == "" {
		msg = f.word(p)
	}
	return &Error{Path: path, Line: line, Msg: msg, Issue: p.Issue}
}

// syntax words a yaml.v3 parse error with the line it belongs to. yaml.v3
// reports a parser error (an unclosed [) on the zero-based line of the
// construct it was parsing, unless that is the first line, when it reports
// the zero-based line of the problem instead; a scanner error (a tab) on
// its one-based line. Parsed again behind a blank line, no construct begins
// on the first line: a parser error's number is then the one-based line in
// the file, and a scanner error's one more.
func (f *Format) syntax(path string, data []byte, err error) error {
	shifted := append([]byte{'\n'}, bytes.TrimPrefix(data, []byte("\uFEFF"))...)
	dec := yaml.NewDecoder(bytes.NewReader(shifted))
	for {
		var n yaml.Node
		e := dec.Decode(&n)
		if e == nil {
			continue
		}
		if !errors.Is(e, io.EOF) {
			err = e
		}
		break
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
		if !slices.Contains(parserProblems, msg) {
			line--
		}
	}
	return f.fail(path, max(line, 1), Problem{Issue: Syntax, Text: msg})
}

var yamlLineRe = regexp.MustCompile(`^line (\d+): (.*)$`)

// parserProblems are the messages of yaml.v3's parser errors (parserc.go),
// as opposed to its scanner's.
var parserProblems = []string{
	"did not find expected ',' or ']'", "did not find expected ',' or '}'", "did not find expected '-' indicator",
	"did not find expected <document start>", "did not find expected <stream-start>", "did not find expected key",
	"did not find expected node content", "found duplicate %TAG directive", "found duplicate %YAML directive",
	"found incompatible YAML document", "found undefined tag handle",
}

type decoder struct {
	f    *Format
	path string
}

func (d *decoder) fail(line int, p Problem) error { return d.f.fail(d.path, line, p) }

// value decodes n into v. at and name say where n is (Problem.At and
// Name); keyLine is the line of n's key, or n's own for a list item.
func (d *decoder) value(n *yaml.Node, v reflect.Value, at []string, name string, keyLine int) (*Node, error) {
	node := &Node{Line: n.Line, KeyLine: keyLine}
	at = slices.Clip(at)
	if n.Kind == yaml.AliasNode {
		return nil, d.fail(n.Line, Problem{Issue: Alias, At: at, Name: name})
	}
	t := v.Type()
	if isNull(n) && t.Kind() != reflect.Struct {
		if !d.f.Nulls {
			return nil, d.fail(keyLine, Problem{Issue: NoValue, At: at, Name: name, Got: "empty"})
		}
		v.SetZero()
		return node, nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		return d.value(n, v.Elem(), at, name, keyLine)
	case reflect.Struct:
		return node, d.fields(n, v, node, at, name)
	case reflect.Map:
		return node, d.mapping(n, v, node, at, name)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return nil, d.fail(n.Line, Problem{Issue: WrongShape, At: at, Name: name, Got: describe(n), Want: WantList})
		}
		node.list = true
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			pos := "[" + strconv.Itoa(i) + "]"
			e, err := d.value(item, s.Index(i), append(at, pos), name+pos, item.Line)
			if err != nil {
				return nil, err
			}
			node.elems = append(node.elems, e)
		}
		v.Set(s)
		return node, nil
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		if n.Kind != yaml.ScalarNode {
			return nil, d.fail(n.Line, Problem{Issue: WrongShape, At: at, Name: name, Got: describe(n), Want: WantValue})
		}
		want := scalarWant(t)
		// yaml.v3 would truncate 1.5 into an int: a whole number must be
		// written as one.
		if err := n.Decode(v.Addr().Interface()); err != nil || (want == WantInteger && n.ShortTag() != "!!int") {
			return nil, d.fail(n.Line, Problem{Issue: BadValue, At: at, Name: name, Got: describe(n), Want: want})
		}
		// No format has a use for .nan or .inf, and either passes a check
		// written "v <= 0" (NaN compares false) or overflows what is
		// computed from it; 1e39 into a float32 is +Inf too.
		if want == WantNumber && (math.IsNaN(v.Float()) || math.IsInf(v.Float(), 0)) {
			return nil, d.fail(n.Line, Problem{Issue: BadValue, At: at, Name: name, Got: describe(n), Want: WantFinite})
		}
		return node, nil
	}
	panic("configs: cannot decode into a " + t.String())
}

// field is a struct field that a key decodes into.
type field struct {
	key   string
	index int
}

// fieldsOf returns t's keys in field order, and the index of its inline
// map (-1 if none).
func fieldsOf(t reflect.Type) ([]field, int) {
	var fs []field
	inline := -1
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		key, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		switch {
		case key == "-":
			continue
		case slices.Contains(strings.Split(opts, ","), "inline"):
			if sf.Type.Kind() != reflect.Map || sf.Type.Key().Kind() != reflect.String {
				panic("configs: the inline field " + t.String() + "." + sf.Name + " is not a map with string keys")
			}
			inline = i
			continue
		case key == "":
			key = strings.ToLower(sf.Name)
		}
		fs = append(fs, field{key, i})
	}
	return fs, inline
}

// fields decodes mapping n into struct v.
func (d *decoder) fields(n *yaml.Node, v reflect.Value, node *Node, at []string, name string) error {
	fs, inline := fieldsOf(v.Type())
	var extra []string
	if len(at) == 0 && inline >= 0 {
		extra = d.f.Extra
	}
	known := make([]string, 0, len(fs)+len(extra))
	for _, f := range fs {
		known = append(known, f.key)
	}
	known = append(known, extra...)
	if n.Kind != yaml.MappingNode {
		return d.fail(n.Line, Problem{Issue: WrongShape, At: at, Name: name, Got: describe(n), Want: WantFields, Known: known})
	}
	return d.pairs(n, node, at, name, func(k *yaml.Node, val *yaml.Node) (*Node, error) {
		key := k.Value
		if i := slices.IndexFunc(fs, func(f field) bool { return f.key == key }); i >= 0 && k.Kind == yaml.ScalarNode {
			return d.value(val, v.Field(fs[i].index), append(at, key), key, k.Line)
		}
		if k.Kind != yaml.ScalarNode || !slices.Contains(extra, key) {
			return nil, d.fail(k.Line, Problem{Issue: UnknownKey, At: at, Name: name, Key: key, Known: known})
		}
		m := v.Field(inline)
		if m.IsNil() {
			m.Set(reflect.MakeMap(m.Type()))
		}
		e := reflect.New(m.Type().Elem()).Elem()
		child, err := d.value(val, e, append(at, key), key, k.Line)
		if err == nil {
			m.SetMapIndex(reflect.ValueOf(key).Convert(m.Type().Key()), e)
		}
		return child, err
	})
}

// mapping decodes mapping n into map v.
func (d *decoder) mapping(n *yaml.Node, v reflect.Value, node *Node, at []string, name string) error {
	t := v.Type()
	if t.Key().Kind() != reflect.String {
		panic("configs: cannot decode into a " + t.String() + ": map keys must be strings")
	}
	if n.Kind != yaml.MappingNode {
		return d.fail(n.Line, Problem{Issue: WrongShape, At: at, Name: name, Got: describe(n), Want: WantMapping})
	}
	if v.IsNil() {
		v.Set(reflect.MakeMapWithSize(t, len(n.Content)/2))
	}
	return d.pairs(n, node, at, name, func(k *yaml.Node, val *yaml.Node) (*Node, error) {
		what := strings.TrimSpace(name + " " + k.Value)
		if k.Kind != yaml.ScalarNode {
			return nil, d.fail(k.Line, Problem{Issue: WrongShape, At: at, Name: name + " key", Got: describe(k), Want: WantValue})
		}
		e := reflect.New(t.Elem()).Elem()
		child, err := d.value(val, e, append(at, k.Value), what, k.Line)
		if err == nil {
			v.SetMapIndex(reflect.ValueOf(k.Value).Convert(t.Key()), e)
		}
		return child, err
	})
}

// pairs walks mapping n's key-value pairs in file order, refusing aliases
// and keys given twice, and records each value's node.
func (d *decoder) pairs(n *yaml.Node, node *Node, at []string, name string, each func(k, v *yaml.Node) (*Node, error)) error {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.AliasNode {
			return d.fail(k.Line, Problem{Issue: Alias, At: at, Name: name})
		}
		if first, dup := seen[k.Value]; dup && k.Kind == yaml.ScalarNode {
			return d.fail(k.Line, Problem{Issue: DuplicateKey, At: at, Name: name, Key: k.Value, First: first})
		}
		seen[k.Value] = k.Line
		child, err := each(k, val)
		if err != nil {
			return err
		}
		node.keys = append(node.keys, k.Value)
		node.elems = append(node.elems, child)
	}
	return nil
}

// isNull is a value not given ("key:" with nothing after it, or ~).
func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// describe says what a node is, for Problem.Got.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		if isNull(n) {
			return "empty"
		}
		return strconv.Quote(n.Value)
	}
	return "not a value"
}

func scalarWant(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		return WantNumber
	case reflect.Bool:
		return WantBool
	case reflect.String:
		return WantValue
	}
	return WantInteger
}
