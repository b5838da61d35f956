package chat

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// renderState is what one render's helper functions share.
type renderState struct {
	now    func() time.Time
	raised *RaiseError
}

// globals adds transformers' template helpers to vars, unless the caller's
// Extra already names them.
func (st *renderState) globals(vars map[string]any) {
	set := func(k string, v any) {
		if _, ok := vars[k]; !ok {
			vars[k] = v
		}
	}
	set("raise_exception", st.raiseException)
	set("strftime_now", st.strftimeNow)
}

// raiseException is transformers' raise_exception(message): it records the
// message, which Render returns as a *RaiseError, and stops the render.
func (st *renderState) raiseException(args *exec.VarArgs) (string, error) {
	msg := ""
	if len(args.Args) > 0 {
		msg = args.Args[0].String()
	}
	if st.raised == nil {
		st.raised = &RaiseError{Message: msg}
	}
	return "", st.raised
}

// strftimeNow is transformers' strftime_now(format): the time now, formatted
// as Python's datetime.now().strftime(format).
func (st *renderState) strftimeNow(format string) string {
	return Strftime(st.now(), format)
}

var (
	longDays    = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	longMonths  = []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
	shortLength = 3
)

// Strftime formats t as C's (and so, on Linux, Python's) strftime in the C
// locale: %a %A %b %h %B %c %C %d %D %e %F %H %I %j %m %M %n %p %r %R %S %t
// %T %u %w %x %X %y %Y %z %Z %G %V %U %W %s %%, and glibc's "-" flag
// (no padding: %-d). An unknown directive is copied as is.
func Strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 >= len(format) {
			b.WriteByte(c)
			continue
		}
		start := i
		i++
		pad := true
		if format[i] == '-' && i+1 < len(format) {
			pad = false
			i++
		}
		num := func(v, width int) {
			s := strconv.Itoa(v)
			if pad {
				for len(s) < width {
					s = "0" + s
				}
			}
			b.WriteString(s)
		}
		h12 := t.Hour() % 12
		if h12 == 0 {
			h12 = 12
		}
		switch format[i] {
		case 'a':
			b.WriteString(longDays[t.Weekday()][:shortLength])
		case 'A':
			b.WriteString(longDays[t.Weekday()])
		case 'b', 'h':
			b.WriteString(longMonths[t.Month()-1][:shortLength])
		case 'B':
			b.WriteString(longMonths[t.Month()-1])
		case 'c':
			b.WriteString(Strftime(t, "%a %b %e %H:%M:%S %Y"))
		case 'C':
			num(t.Year()/100, 2)
		case 'd':
			num(t.Day(), 2)
		case 'D':
			b.WriteString(Strftime(t, "%m/%d/%y"))
		case 'e':
			if pad {
				fmt.Fprintf(&b, "%2d", t.Day())
			} else {
				num(t.Day(), 1)
			}
		case 'F':
			b.WriteString(Strftime(t, "%Y-%m-%d"))
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			num(h12, 2)
		case 'j':
			num(t.YearDay(), 3)
		case 'm':
			num(int(t.Month()), 2)
		case 'M':
			num(t.Minute(), 2)
		case 'n':
			b.WriteByte('\n')
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'r':
			b.WriteString(Strftime(t, "%I:%M:%S %p"))
		case 'R':
			b.WriteString(Strftime(t, "%H:%M"))
		case 's':
			b.WriteString(strconv.FormatInt(t.Unix(), 10))
		case 'S':
			num(t.Second(), 2)
		case 't':
			b.WriteByte('\t')
		case 'T', 'X':
			b.WriteString(Strftime(t, "%H:%M:%S"))
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			num(wd, 1)
		case 'w':
			num(int(t.Weekday()), 1)
		case 'x':
			b.WriteString(Strftime(t, "%m/%d/%y"))
		case 'y':
			num(t.Year()%100, 2)
		case 'Y':
			num(t.Year(), 1)
		case 'G':
			y, _ := t.ISOWeek()
			num(y, 1)
		case 'V':
			_, w := t.ISOWeek()
			num(w, 2)
		case 'U':
			num((t.YearDay()+6-int(t.Weekday()))/7, 2)
		case 'W':
			num((t.YearDay()+6-(int(t.Weekday())+6)%7)/7, 2)
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'Z':
			name, _ := t.Zone()
			b.WriteString(name)
		case '%':
			b.WriteByte('%')
		default:
			b.WriteString(format[start : i+1])
		}
	}
	return b.String()
}

// maxJSONDepth bounds tojson's recursion (a namespace can hold itself).
const maxJSONDepth = 100

// filterToJSON is transformers' tojson: Python's json.dumps(x,
// ensure_ascii=False, indent=indent, separators=separators,
// sort_keys=sort_keys), not Jinja2's HTML-safe one. Dict literals keep
// their order; Go maps (Options.Extra, messages) have none, so their keys
// come sorted.
func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	j := jsonWriter{itemSep: ", ", keySep: ": "}
	for k, v := range params.KwArgs {
		switch k {
		case "indent":
			if v.IsInteger() {
				j.indent = strings.Repeat(" ", min(max(v.Integer(), 0), 64))
				j.pretty, j.itemSep = true, ","
			} else if v.IsString() {
				j.indent, j.pretty, j.itemSep = v.String(), true, ","
			} else if !v.IsNil() {
				return exec.AsValue(fmt.Errorf("tojson: indent must be an integer or a string"))
			}
		case "ensure_ascii":
			j.ascii = v.IsTrue()
		case "sort_keys":
			// keys are always sorted
		case "separators":
			if v.IsList() && v.Len() == 2 {
				var seps []string
				v.Iterate(func(_, _ int, s, _ *exec.Value) bool {
					seps = append(seps, s.String())
					return true
				}, func() {})
				j.itemSep, j.keySep = seps[0], seps[1]
			}
		default:
			return exec.AsValue(fmt.Errorf("tojson: unknown argument %s", k))
		}
	}
	if len(params.Args) > 1 {
		return exec.AsValue(fmt.Errorf("tojson: takes at most one positional argument (indent)"))
	}
	if len(params.Args) == 1 && params.Args[0].IsInteger() {
		j.indent = strings.Repeat(" ", min(max(params.Args[0].Integer(), 0), 64))
		j.pretty, j.itemSep = true, ","
	}
	if err := j.value(reflect.ValueOf(in.Interface()), 0); err != nil {
		return exec.AsValue(fmt.Errorf("tojson: %w", err))
	}
	return exec.AsSafeValue(j.b.String())
}

type jsonWriter struct {
	b               strings.Builder
	indent          string
	pretty, ascii   bool
	itemSep, keySep string
}

func (j *jsonWriter) newline(depth int) {
	if j.pretty {
		j.b.WriteByte('\n')
		for range depth {
			j.b.WriteString(j.indent)
		}
	}
}

func (j *jsonWriter) value(v reflect.Value, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("value nests deeper than %d", maxJSONDepth)
	}
	for v.IsValid() && (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) {
		if v.IsNil() {
			j.b.WriteString("null")
			return nil
		}
		switch x := v.Interface().(type) {
		case *exec.Value:
			v = reflect.ValueOf(x.Interface())
			continue
		case *exec.Dict:
			return j.dict(x, depth)
		}
		v = v.Elem()
	}
	if !v.IsValid() {
		j.b.WriteString("null")
		return nil
	}
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			j.b.WriteString("true")
		} else {
			j.b.WriteString("false")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		j.b.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		j.b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		j.b.WriteString(pyFloat(v.Float()))
	case reflect.String:
		j.str(v.String())
	case reflect.Slice, reflect.Array:
		if v.Len() == 0 {
			j.b.WriteString("[]")
			return nil
		}
		j.b.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				j.b.WriteString(j.itemSep)
			}
			j.newline(depth + 1)
			if err := j.value(v.Index(i), depth+1); err != nil {
				return err
			}
		}
		j.newline(depth)
		j.b.WriteByte(']')
	case reflect.Map:
		if v.Len() == 0 {
			j.b.WriteString("{}")
			return nil
		}
		keys := v.MapKeys()
		names := make([]string, len(keys))
		for i, k := range keys {
			names[i] = fmt.Sprint(k.Interface())
		}
		idx := make([]int, len(keys))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return names[idx[a]] < names[idx[b]] })
		j.b.WriteByte('{')
		for n, i := range idx {
			if n > 0 {
				j.b.WriteString(j.itemSep)
			}
			j.newline(depth + 1)
			j.str(names[i])
			j.b.WriteString(j.keySep)
			if err := j.value(v.MapIndex(keys[i]), depth+1); err != nil {
				return err
			}
		}
		j.newline(depth)
		j.b.WriteByte('}')
	default:
		return fmt.Errorf("cannot encode a %s", v.Type())
	}
	return nil
}

// dict writes a Jinja dict literal, whose keys keep their order as in Python.
func (j *jsonWriter) dict(d *exec.Dict, depth int) error {
	if len(d.Pairs) == 0 {
		j.b.WriteString("{}")
		return nil
	}
	j.b.WriteByte('{')
	for n, p := range d.Pairs {
		if n > 0 {
			j.b.WriteString(j.itemSep)
		}
		j.newline(depth + 1)
		j.str(p.Key.String())
		j.b.WriteString(j.keySep)
		if err := j.value(reflect.ValueOf(p.Value), depth+1); err != nil {
			return err
		}
	}
	j.newline(depth)
	j.b.WriteByte('}')
	return nil
}

// pyFloat formats f as Python's repr does (1.0, 0.1, 1e+16, NaN, Infinity).
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	if a := math.Abs(f); a != 0 && (a < 1e-4 || a >= 1e16) {
		// Go, like Python, writes at least two exponent digits: 1e-05, 1e+16.
		return strconv.FormatFloat(f, 'e', -1, 64)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

func (j *jsonWriter) str(s string) {
	j.b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			j.b.WriteString(`\"`)
		case '\\':
			j.b.WriteString(`\\`)
		case '\n':
			j.b.WriteString(`\n`)
		case '\r':
			j.b.WriteString(`\r`)
		case '\t':
			j.b.WriteString(`\t`)
		case '\b':
			j.b.WriteString(`\b`)
		case '\f':
			j.b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || r == utf8.RuneError:
				fmt.Fprintf(&j.b, `\u%04x`, r)
			case j.ascii && r > 0x7f:
				if r > 0xffff {
					r -= 0x10000
					fmt.Fprintf(&j.b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
				} else {
					fmt.Fprintf(&j.b, `\u%04x`, r)
				}
			default:
				j.b.WriteRune(r)
			}
		}
	}
	j.b.WriteByte('"')
}
