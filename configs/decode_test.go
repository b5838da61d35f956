package configs

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

type testDoc struct {
	Name    string             `yaml:"name"`
	Count   int                `yaml:"count"`
	Ratio   float64            `yaml:"ratio"`
	On      bool               `yaml:"on"`
	Tags    []string           `yaml:"tags"`
	Items   []testItem         `yaml:"items"`
	Weights map[string]float64 `yaml:"weights"`
	Inner   *testItem          `yaml:"inner,omitempty"`
	Skipped string             `yaml:"-"`
	Extra   map[string]string  `yaml:",inline"`
}

type testItem struct {
	ID   string   `yaml:"id"`
	Refs []string `yaml:"refs"`
}

var testFormat = Format{Name: "test file", Extra: []string{"setting"}}

func TestDecodeErrors(t *testing.T) {
	for _, c := range []struct {
		name, text string
		format     *Format // nil: testFormat
		issue      Issue
		line       int
		msg        string // the whole message, or "" to check only issue and line
	}{
		{"unknown key", "name: a\ncolour: red\n", nil, UnknownKey, 2,
			`unknown key "colour" in the test file (known: name, count, ratio, on, tags, items, weights, inner, setting)`},
		{"unknown nested key", "items:\n  - id: a\n  - id: b\n    ref: [x]\n", nil, UnknownKey, 4,
			`unknown key "ref" in items[1] (known: id, refs)`},
		{"skipped field is no key", "skipped: x\n", nil, UnknownKey, 1, ""},
		{"setting of another format", "setting: x\n", &Format{Name: "other"}, UnknownKey, 1, ""},
		{"duplicate key", "name: a\ncount: 1\nname: b\n", nil, DuplicateKey, 3, `key "name" given twice in the test file (first at line 1)`},
		{"duplicate map key", "weights:\n  a: 1\n  a: 2\n", nil, DuplicateKey, 3, `key "a" given twice in weights (first at line 2)`},
		{"duplicate setting", "setting: a\nsetting: b\n", nil, DuplicateKey, 2, ""},
		{"not a number", "ratio: fast\n", nil, BadValue, 1, `ratio: "fast" is not a number`},
		{"not an integer", "count: 1.5\n", nil, BadValue, 1, `count: "1.5" is not a whole number`},
		{"integer overflow", "count: 99999999999999999999\n", nil, BadValue, 1, ""},
		{"string for a number", "ratio: \"1.5\"\n", nil, BadValue, 1, ""},
		{"not a boolean", "\non: maybe\n", nil, BadValue, 2, `on: "maybe" is not a boolean (true or false)`},
		{"map value not a number", "weights: {a: x}\n", nil, BadValue, 1, `weights a: "x" is not a number`},
		{"list for a value", "name: [a]\n", nil, WrongShape, 1, "name must be a single value"},
		{"value for a list", "tags: a\n", nil, WrongShape, 1, "tags must be a list"},
		{"list for a map", "weights: [1]\n", nil, WrongShape, 1, "weights must be a mapping"},
		{"value for a struct", "items:\n  - a\n", nil, WrongShape, 2, "items[0] must be a mapping of keys to values"},
		{"empty struct", "items:\n  -\n", nil, WrongShape, 2, ""},
		{"list for the document", "- a\n", nil, WrongShape, 1, "the test file must be a mapping of keys to values"},
		{"mapping in a list", "items:\n  - id: a\n    refs:\n      - x\n      - {y: z}\n", nil, WrongShape, 5, "refs[1] must be a single value"},
		{"no value", "name: a\ncount:\n", nil, NoValue, 2, "count has no value: give one or leave the key out"},
		{"no list item", "tags:\n  - a\n  -\n", nil, NoValue, 3, ""},
		{"alias", "tags: &t [a]\nitems:\n  - refs: *t\n", nil, Alias, 3, ""},
		{"alias key", "weights:\n  &k a: 1\n  *k : 2\n", nil, Alias, 3, ""},
		{"merge key", "inner: &i {id: a}\nitems:\n  - <<: *i\n", nil, UnknownKey, 3, `unknown key "<<" in items[0] (known: id, refs)`},
		{"merge into a map", "weights: &w {a: 1}\ninner:\n  id: x\nsetting: {<<: *w}\n", nil, WrongShape, 4, ""},
		{"merge alias in a map", "tags: &w [a]\nweights:\n  <<: *w\n", nil, Alias, 3, ""},
		{"unknown anchor", "tags: *w\n", nil, Syntax, 1, "unknown anchor 'w' referenced"},
		{"alias bomb", "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n", nil, UnknownKey, 1, ""},
		{"alias bomb in a field", "tags: &a [x, x, x, x, x, x, x, x, x]\nitems: [*a, *a]\n", nil, Alias, 2, ""},
		{"empty", "", nil, Empty, 1, "empty test file"},
		{"comments only", "# nothing\n", nil, Empty, 1, "empty test file"},
		{"null document", "---\n", nil, Empty, 1, ""},
		{"second document", "name: a\n---\nname: b\n", nil, SecondDocument, 2, "a second YAML document: a test file is one document"},
		{"unclosed list", "name: a\ntags: [a,\n  b\n", nil, Syntax, 2, "did not find expected ',' or ']'"},
		{"unclosed list on line 1", "tags: [a\n", nil, Syntax, 1, "did not find expected ',' or ']'"},
		{"tab", "items:\n\t- id: a\n", nil, Syntax, 2, "found character that cannot start any token"},
		{"too large", "name: " + strings.Repeat("a", 100) + "\n", &Format{Name: "small file", MaxBytes: 64}, TooLarge, 0,
			"larger than 64 bytes, the most a small file may be"},
		{"own words", "colour: red\n", &Format{Name: "x", Words: func(p Problem) string {
			if p.Issue == UnknownKey {
				return "no " + p.Key
			}
			return ""
		}}, UnknownKey, 1, "no colour"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := c.format
			if f == nil {
				f = &testFormat
			}
			var doc testDoc
			_, err := f.Decode([]byte(c.text), "t.yaml", &doc)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T), want an *Error", err, err)
			}
			if e.Issue != c.issue || e.Line != c.line || e.Path != "t.yaml" || (c.msg != "" && e.Msg != c.msg) {
				t.Fatalf("%s issue at line %d: %q; want %s at line %d: %q", e.Issue, e.Line, e.Msg, c.issue, c.line, c.msg)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("%q is not one line", err)
			}
		})
	}
}

func TestDecodeValues(t *testing.T) {
	text := `# a comment
name: doc
count: 3
ratio: 1.5e3
on: true
tags: [a, "b c", 7]
items:
  - id: first
    refs:
      - x
      - y
  - id: second
weights:
  z: 0.5
  a: 1
inner: {id: in}
setting: value
`
	var doc testDoc
	root, err := testFormat.Decode([]byte(text), "t.yaml", &doc)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Name != "doc" || doc.Count != 3 || doc.Ratio != 1500 || !doc.On || !slices.Equal(doc.Tags, []string{"a", "b c", "7"}) {
		t.Errorf("scalars and lists: %+v", doc)
	}
	if len(doc.Items) != 2 || doc.Items[0].ID != "first" || !slices.Equal(doc.Items[0].Refs, []string{"x", "y"}) || doc.Items[1].Refs != nil {
		t.Errorf("items %+v", doc.Items)
	}
	if len(doc.Weights) != 2 || doc.Weights["z"] != 0.5 || doc.Weights["a"] != 1 || doc.Inner == nil || doc.Inner.ID != "in" {
		t.Errorf("weights %v, inner %+v", doc.Weights, doc.Inner)
	}
	if len(doc.Extra) != 1 || doc.Extra["setting"] != "value" {
		t.Errorf("extra %v", doc.Extra)
	}
	// Lines of keys, values and list items.
	for _, c := range []struct {
		what      string
		got, want int
	}{
		{"document", root.Line, 2},
		{"count", root.Get("count").Line, 3},
		{"items", root.Get("items").KeyLine, 7},
		{"items[0]", root.Get("items").Items()[0].Line, 8},
		{"items[0].refs[1]", root.Get("items").Items()[0].Get("refs").Items()[1].Line, 11},
		{"items[1].id", root.Get("items").Items()[1].LineOf("id"), 12},
		{"items[1] refs, absent", root.Get("items").Items()[1].LineOf("refs"), 12},
		{"weights a key", root.Get("weights").Get("a").KeyLine, 15},
		{"inner id", root.Get("inner").LineOf("id"), 16},
		{"setting", root.LineOf("setting"), 17},
		{"absent", root.LineOf("ratio2"), 2},
	} {
		if c.got != c.want {
			t.Errorf("%s: line %d, want %d", c.what, c.got, c.want)
		}
	}
	if got := root.Get("weights").Keys(); !slices.Equal(got, []string{"z", "a"}) {
		t.Errorf("weights keys %v, want file order z, a", got)
	}
	if root.Has("skipped") || !root.Has("inner") || root.Get("tags").Items() == nil || root.Get("weights").Items() != nil {
		t.Error("Has or Items")
	}
	var absent *Node
	if absent.Get("x") != nil || absent.Has("x") || absent.Keys() != nil || absent.Items() != nil || absent.LineOf("x") != 1 {
		t.Error("a nil Node is not an absent one")
	}
}

func TestNulls(t *testing.T) {
	f := Format{Name: "lenient file", Nulls: true}
	var doc testDoc
	root, err := f.Decode([]byte("name:\ntags:\nweights:\ninner:\n"), "t.yaml", &doc)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Name != "" || doc.Tags != nil || doc.Weights != nil || doc.Inner != nil || !root.Has("tags") || root.Get("tags").Items() != nil {
		t.Errorf("%+v", doc)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	small, big := filepath.Join(dir, "small.yaml"), filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(small, []byte("name: a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, make([]byte, MaxBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := testFormat.ReadFile(small); err != nil || string(b) != "name: a\n" {
		t.Errorf("%q, %v", b, err)
	}
	_, err := testFormat.ReadFile(big)
	var e *Error
	if !errors.As(err, &e) || e.Issue != TooLarge || err.Error() != big+": larger than 1 MiB, the most a test file may be" {
		t.Errorf("over the limit: %v", err)
	}
	if _, err := testFormat.ReadFile(filepath.Join(dir, "none.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}
