package configs

import (
	"errors"
	"testing"
)

// TestNotFinite: no float field of any format takes .nan or .inf (a check
// written "v <= 0" lets NaN through), nor a float32 that overflows to
// infinity; each is a BadValue at its line. Before, all of these decoded.
func TestNotFinite(t *testing.T) {
	type doc struct {
		Ratio  float64            `yaml:"ratio"`
		Small  float32            `yaml:"small"`
		Ptr    *float64           `yaml:"ptr"`
		List   []float64          `yaml:"list"`
		Map    map[string]float64 `yaml:"map"`
		Nested struct {
			V float64 `yaml:"v"`
		} `yaml:"nested"`
	}
	f := &Format{Name: "numbers"}
	for _, c := range []struct {
		name, text string
		line       int
		msg        string
	}{
		{"nan", "ratio: .nan\n", 1, `ratio: ".nan" is not a finite number`},
		{"NaN", "\nratio: .NaN\n", 2, `ratio: ".NaN" is not a finite number`},
		{"inf", "ratio: .inf\n", 1, `ratio: ".inf" is not a finite number`},
		{"+inf", "ratio: +.inf\n", 1, `ratio: "+.inf" is not a finite number`},
		{"-Inf", "ratio: -.Inf\n", 1, `ratio: "-.Inf" is not a finite number`},
		{"INF", "ratio: .INF\n", 1, `ratio: ".INF" is not a finite number`},
		{"tagged", "ratio: !!float .nan\n", 1, `ratio: ".nan" is not a finite number`},
		{"float32 overflow", "small: 1e39\n", 1, `small: "1e39" is not a finite number`},
		{"float32 nan", "small: .nan\n", 1, `small: ".nan" is not a finite number`},
		{"pointer", "ptr: .inf\n", 1, `ptr: ".inf" is not a finite number`},
		{"list item", "list:\n  - 1\n  - .nan\n", 3, `list[1]: ".nan" is not a finite number`},
		{"map value", "map:\n  a: 1\n  b: -.inf\n", 3, `map b: "-.inf" is not a finite number`},
		{"nested", "nested:\n  v: .nan\n", 2, `v: ".nan" is not a finite number`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var d doc
			_, err := f.Decode([]byte(c.text), "n.yaml", &d)
			var e *Error
			if !errors.As(err, &e) || e.Issue != BadValue || e.Path != "n.yaml" || e.Line != c.line || e.Msg != c.msg {
				t.Fatalf("error %v; want n.yaml:%d: %s", err, c.line, c.msg)
			}
		})
	}
	var d doc
	if _, err := f.Decode([]byte("ratio: -1.5e300\nsmall: 3.4e38\nlist: [0, -0, 1e-300]\n"), "n.yaml", &d); err != nil {
		t.Errorf("finite numbers: %v", err)
	}
}
