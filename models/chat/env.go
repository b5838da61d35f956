package chat

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/builtins"
	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
)

// newConfig is Jinja2 as transformers sets it up for chat templates.
func newConfig() *config.Config {
	c := config.New()
	c.TrimBlocks = true
	c.LeftStripBlocks = true
	return c
}

// environment is gonja's built-ins with this package's changes: no
// include/import/extends, bounded macros, a Python-style tojson and the
// string methods gonja lacks or gets wrong. Per-render globals (raise_exception,
// strftime_now) are set by renderState.globals.
var environment = newEnvironment()

func newEnvironment() *exec.Environment {
	cs := exec.NewControlStructureSet(map[string]parser.ControlStructureParser{}).Update(builtins.ControlStructures)
	for _, name := range []string{"include", "import", "from", "extends"} {
		_ = cs.Replace(name, refuseParser(name))
	}
	if orig, ok := cs.Get("macro"); ok {
		_ = cs.Replace("macro", boundedMacroParser(orig))
	}

	filters := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
	_ = filters.Replace("tojson", filterToJSON)

	methods := builtins.Methods
	methods.Str = strMethods(builtins.Methods.Str)

	ctx := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
	ctx.Set("range", rangeFunction)

	return &exec.Environment{
		Context:           ctx,
		Filters:           filters,
		Tests:             builtins.Tests,
		ControlStructures: cs,
		Methods:           methods,
	}
}

func refuseParser(name string) parser.ControlStructureParser {
	return func(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
		return nil, args.Error(fmt.Sprintf("'%s' is not allowed in a chat template", name), nil)
	}
}

// boundedMacro wraps gonja's macro definition so that each call counts its
// depth and a recursion past MaxMacroDepth fails instead of overflowing the
// Go stack (a fatal error no recover catches).
type boundedMacro struct {
	nodes.ControlStructure
	name string
}

type executer interface {
	Execute(*exec.Renderer, *nodes.ControlStructureBlock) error
}

func boundedMacroParser(orig parser.ControlStructureParser) parser.ControlStructureParser {
	return func(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
		cs, err := orig(p, args)
		if err != nil {
			return nil, err
		}
		m, ok := cs.(*controlStructures.MacroControlStructure)
		if !ok {
			return nil, args.Error(fmt.Sprintf("macro: unexpected node %T", cs), nil)
		}
		return &boundedMacro{ControlStructure: cs, name: m.Name}, nil
	}
}

func (b *boundedMacro) Execute(r *exec.Renderer, tag *nodes.ControlStructureBlock) error {
	inner, ok := b.ControlStructure.(executer)
	if !ok {
		return fmt.Errorf("macro %s: not executable", b.name)
	}
	if err := inner.Execute(r, tag); err != nil {
		return err
	}
	v, ok := r.Environment.Context.Get(b.name)
	if !ok {
		return nil
	}
	fn, ok := v.(exec.Macro)
	if !ok {
		return nil
	}
	depth := 0
	r.Environment.Context.Set(b.name, exec.Macro(func(params *exec.VarArgs) *exec.Value {
		if depth >= MaxMacroDepth {
			return exec.AsValue(fmt.Errorf("macro %s: recursion deeper than %d", b.name, MaxMacroDepth))
		}
		depth++
		defer func() { depth-- }()
		return fn(params)
	}))
	return nil
}

// rangeFunction is Python's range, as a list of at most MaxRange items
// (gonja's feeds a channel from a goroutine that leaks when a loop breaks).
func rangeFunction(params *exec.VarArgs) ([]int, error) {
	var a [3]int
	n := len(params.Args)
	if n < 1 || n > 3 || len(params.KwArgs) > 0 {
		return nil, fmt.Errorf("range expects 1 to 3 integer arguments")
	}
	for i, v := range params.Args {
		if !v.IsInteger() {
			return nil, fmt.Errorf("range: argument %d is not an integer", i+1)
		}
		a[i] = v.Integer()
	}
	start, stop, step := 0, a[0], 1
	if n > 1 {
		start, stop = a[0], a[1]
	}
	if n > 2 {
		step = a[2]
	}
	if step == 0 {
		return nil, fmt.Errorf("range: step cannot be 0")
	}
	var count int64
	if step > 0 && stop > start {
		count = (int64(stop) - int64(start) + int64(step) - 1) / int64(step)
	} else if step < 0 && stop < start {
		count = (int64(start) - int64(stop) - int64(step) - 1) / int64(-step)
	}
	if count > MaxRange {
		return nil, fmt.Errorf("range: %d items, more than %d", count, MaxRange)
	}
	out := make([]int, count)
	for i := range out {
		out[i] = start + i*step
	}
	return out, nil
}

// strMethods is gonja's str methods with Python's strip, lstrip, rstrip,
// split, rsplit (no argument or None means whitespace), replace (count
// optional), startswith and endswith (a tuple of prefixes allowed).
func strMethods(orig *exec.MethodSet[string]) *exec.MethodSet[string] {
	m := map[string]exec.Method[string]{}
	for _, name := range []string{
		"capitalize", "capwords", "casefold", "center", "count", "encode", "expandtabs", "find",
		"format", "format_map", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "islower",
		"isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower",
		"partition", "removeprefix", "removesuffix", "rfind", "rjust", "rpartition", "splitlines",
		"swapcase", "title", "upper", "zfill",
	} {
		if fn, ok := orig.Get(name); ok {
			m[name] = fn
		}
	}
	m["strip"] = stripMethod(strings.TrimFunc, strings.Trim)
	m["lstrip"] = stripMethod(strings.TrimLeftFunc, strings.TrimLeft)
	m["rstrip"] = stripMethod(strings.TrimRightFunc, strings.TrimRight)
	m["split"] = splitMethod(false)
	m["rsplit"] = splitMethod(true)
	m["replace"] = replaceMethod
	m["startswith"] = affixMethod("startswith", strings.HasPrefix)
	m["endswith"] = affixMethod("endswith", strings.HasSuffix)
	return exec.NewMethodSet(m)
}

// optString returns argument i as a string; ok is false when it is absent or None.
func optString(args *exec.VarArgs, i int, kw string) (s string, ok bool, err error) {
	var v *exec.Value
	if i < len(args.Args) {
		v = args.Args[i]
	} else if kv, found := args.KwArgs[kw]; found {
		v = kv
	}
	if v == nil || v.IsNil() {
		return "", false, nil
	}
	if !v.IsString() {
		return "", false, fmt.Errorf("argument %s must be a string or None, not %s", kw, v.String())
	}
	return v.String(), true, nil
}

func optInt(args *exec.VarArgs, i int, kw string, def int) (int, error) {
	var v *exec.Value
	if i < len(args.Args) {
		v = args.Args[i]
	} else if kv, found := args.KwArgs[kw]; found {
		v = kv
	}
	if v == nil || v.IsNil() {
		return def, nil
	}
	if !v.IsInteger() {
		return 0, fmt.Errorf("argument %s must be an integer, not %s", kw, v.String())
	}
	return v.Integer(), nil
}

func argCount(args *exec.VarArgs, most int) error {
	if len(args.Args)+len(args.KwArgs) > most {
		return fmt.Errorf("takes at most %d arguments", most)
	}
	return nil
}

func stripMethod(byFunc func(string, func(rune) bool) string, bySet func(string, string) string) exec.Method[string] {
	return func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		if err := argCount(args, 1); err != nil {
			return nil, err
		}
		chars, ok, err := optString(args, 0, "chars")
		if err != nil {
			return nil, err
		}
		if !ok {
			return byFunc(self, unicode.IsSpace), nil
		}
		return bySet(self, chars), nil
	}
}

func splitMethod(fromRight bool) exec.Method[string] {
	return func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		if err := argCount(args, 2); err != nil {
			return nil, err
		}
		sep, hasSep, err := optString(args, 0, "sep")
		if err != nil {
			return nil, err
		}
		maxsplit, err := optInt(args, 1, "maxsplit", -1)
		if err != nil {
			return nil, err
		}
		if hasSep && sep == "" {
			return nil, fmt.Errorf("empty separator")
		}
		var parts []string
		switch {
		case !hasSep:
			parts = splitSpace(self, maxsplit, fromRight)
		case maxsplit < 0:
			parts = strings.Split(self, sep)
		case !fromRight:
			parts = strings.SplitN(self, sep, maxsplit+1)
		default:
			parts = rsplitN(self, sep, maxsplit)
		}
		out := make([]any, len(parts))
		for i, p := range parts {
			out[i] = p
		}
		return out, nil
	}
}

// splitSpace is Python's str.split() with no separator: runs of whitespace
// separate, and leading and trailing whitespace yields no empty strings.
func splitSpace(s string, maxsplit int, fromRight bool) []string {
	if maxsplit < 0 {
		return strings.Fields(s)
	}
	var out []string
	if !fromRight {
		for len(out) < maxsplit {
			s = strings.TrimLeftFunc(s, unicode.IsSpace)
			i := strings.IndexFunc(s, unicode.IsSpace)
			if s == "" || i < 0 {
				break
			}
			out = append(out, s[:i])
			s = s[i:]
		}
		if s = strings.TrimLeftFunc(s, unicode.IsSpace); s != "" {
			out = append(out, s)
		}
		return out
	}
	for len(out) < maxsplit {
		s = strings.TrimRightFunc(s, unicode.IsSpace)
		i := strings.LastIndexFunc(s, unicode.IsSpace)
		if s == "" || i < 0 {
			break
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		out = append(out, s[i+size:])
		s = s[:i]
	}
	if s = strings.TrimRightFunc(s, unicode.IsSpace); s != "" {
		out = append(out, s)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func rsplitN(s, sep string, maxsplit int) []string {
	var out []string
	for len(out) < maxsplit {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		out = append(out, s[i+len(sep):])
		s = s[:i]
	}
	out = append(out, s)
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func replaceMethod(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
	if err := argCount(args, 3); err != nil {
		return nil, err
	}
	old, ok1, err1 := optString(args, 0, "old")
	repl, ok2, err2 := optString(args, 1, "new")
	if err1 != nil || err2 != nil || !ok1 || !ok2 {
		return nil, fmt.Errorf("replace expects two strings")
	}
	count, err := optInt(args, 2, "count", -1)
	if err != nil {
		return nil, err
	}
	if len(self) > 0 && len(old) == 0 && int64(len(self)+1)*int64(len(repl)) > MaxOutput {
		return nil, fmt.Errorf("replace: result %w", ErrTooLarge)
	}
	return strings.Replace(self, old, repl, count), nil
}

func affixMethod(name string, has func(string, string) bool) exec.Method[string] {
	return func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		if len(args.Args) != 1 {
			return nil, fmt.Errorf("%s takes one argument (a string or a tuple of strings)", name)
		}
		a := args.Args[0]
		if a.IsString() {
			return has(self, a.String()), nil
		}
		if !a.IsList() {
			return nil, fmt.Errorf("%s: argument must be a string or a tuple, not %s", name, a.String())
		}
		found := false
		var bad error
		a.Iterate(func(_, _ int, v, _ *exec.Value) bool {
			if !v.IsString() {
				bad = fmt.Errorf("%s: tuple items must be strings", name)
				return false
			}
			if has(self, v.String()) {
				found = true
				return false
			}
			return true
		}, func() {})
		return found, bad
	}
}
