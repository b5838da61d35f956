package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"hybrid/ops"
	"hybrid/quant"
)

// ParseError is a problem in a hardware profile, at a line of its file.
type ParseError struct {
	Path string
	Line int
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg) }

// The file's schema. Every key is checked against these tags, with the line
// of any unknown one, before the file is decoded into them.
type hwFile struct {
	Name    string     `yaml:"name"`
	Source  string     `yaml:"source"`
	Devices []specFile `yaml:"devices"`
	Links   []linkFile `yaml:"links"`
}

type specFile struct {
	Name         string             `yaml:"name"`
	Kind         string             `yaml:"kind"`
	MemoryGB     float64            `yaml:"memory_gb"`
	BandwidthGBs float64            `yaml:"bandwidth_gbs"`
	TFLOPS       float64            `yaml:"tflops"`
	LaunchUS     float64            `yaml:"launch_us"`
	FP16         bool               `yaml:"fp16"`
	KVCache      string             `yaml:"kv_cache"`
	Efficiency   map[string]float64 `yaml:"efficiency"`
	Compute      map[string]float64 `yaml:"compute_efficiency"`
	Unsupported  []string           `yaml:"unsupported"`
}

type linkFile struct {
	From         string  `yaml:"from"`
	To           string  `yaml:"to"`
	LatencyUS    float64 `yaml:"latency_us"`
	BandwidthGBs float64 `yaml:"bandwidth_gbs"`
	OneWay       bool    `yaml:"oneway"`
}

var (
	kinds      = []string{"cpu", "cuda", "metal", "coreml"}
	deviceName = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
)

// ParseHardware parses a profile strictly: unknown keys, values of the wrong
// type, missing or out-of-range numbers, unknown op kinds or weight types,
// duplicate devices and links to devices the profile does not list are all
// errors, each a *ParseError naming path and line.
func ParseHardware(data []byte, path string) (*Hardware, error) {
	p := &parser{path: path}
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, p.fail(1, "empty hardware profile")
		}
		return nil, p.yamlError(err)
	}
	if len(root.Content) == 0 {
		return nil, p.fail(1, "empty hardware profile")
	}
	doc := root.Content[0]
	if err := p.check(doc, reflect.TypeOf(hwFile{}), "the profile"); err != nil {
		return nil, err
	}
	var hf hwFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&hf); err != nil {
		return nil, p.yamlError(err) // check has seen every key and scalar; kept as a guard
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, p.fail(max(more.Line, 1), "a second YAML document: a profile is one document")
	}
	return p.build(doc, &hf)
}

type parser struct{ path string }

func (p *parser) fail(line int, format string, args ...any) error {
	return &ParseError{Path: p.path, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// yamlError turns a yaml.v3 error ("yaml: line 3: ...") into a ParseError.
func (p *parser) yamlError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n  ")
	line := 1
	if n, _ := fmt.Sscanf(msg, "line %d:", &line); n == 1 {
		msg = strings.TrimSpace(msg[strings.Index(msg, ":")+1:])
	}
	return p.fail(line, "%s", msg)
}

// check walks node against the Go type t that the file decodes into: every
// mapping key must be a field's tag, and every scalar must decode into its
// field's type.
func (p *parser) check(n *yaml.Node, t reflect.Type, what string) error {
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return p.fail(n.Line, "%s must be a mapping of keys to values", what)
		}
		fields := map[string]reflect.Type{}
		var names []string
		for i := range t.NumField() {
			tag := t.Field(i).Tag.Get("yaml")
			fields[tag] = t.Field(i).Type
			names = append(names, tag)
		}
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ft, ok := fields[k.Value]
			if !ok {
				return p.fail(k.Line, "unknown key %q in %s (known: %s)", k.Value, what, strings.Join(names, ", "))
			}
			if l, dup := seen[k.Value]; dup {
				return p.fail(k.Line, "key %q given twice in %s (first at line %d)", k.Value, what, l)
			}
			seen[k.Value] = k.Line
			if err := p.check(v, ft, k.Value); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if isNull(n) {
			return nil
		}
		if n.Kind != yaml.SequenceNode {
			return p.fail(n.Line, "%s must be a list", what)
		}
		for i, e := range n.Content {
			if err := p.check(e, t.Elem(), fmt.Sprintf("%s[%d]", what, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if isNull(n) {
			return nil
		}
		if n.Kind != yaml.MappingNode {
			return p.fail(n.Line, "%s must be a mapping", what)
		}
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if l, dup := seen[k.Value]; dup {
				return p.fail(k.Line, "key %q given twice in %s (first at line %d)", k.Value, what, l)
			}
			seen[k.Value] = k.Line
			if err := p.check(n.Content[i+1], t.Elem(), what+" "+k.Value); err != nil {
				return err
			}
		}
	default:
		if n.Kind != yaml.ScalarNode {
			return p.fail(n.Line, "%s must be a single value", what)
		}
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			return p.fail(n.Line, "%s: %q is not a %s", what, n.Value, typeName(t))
		}
	}
	return nil
}

// isNull is an empty value ("links:" with nothing after it).
func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Float64:
		return "number"
	case reflect.Bool:
		return "boolean (true or false)"
	}
	return t.String()
}

// build validates the decoded file, with node for the lines, and makes the
// Hardware.
func (p *parser) build(doc *yaml.Node, hf *hwFile) (*Hardware, error) {
	top := mapping(doc)
	if strings.TrimSpace(hf.Name) == "" {
		return nil, p.fail(top.line("name"), "the profile needs a name")
	}
	if strings.TrimSpace(hf.Source) == "" {
		return nil, p.fail(top.line("source"), "profile %q needs a source: where its numbers come from", hf.Name)
	}
	if len(hf.Devices) == 0 {
		return nil, p.fail(top.line("devices"), "profile %q lists no devices", hf.Name)
	}
	hw := &Hardware{Name: hf.Name, Source: hf.Source, Path: p.path}
	devNodes := top.get("devices").Content
	where := map[string]int{}
	for i, sf := range hf.Devices {
		s, err := p.spec(mapping(devNodes[i]), &sf)
		if err != nil {
			return nil, err
		}
		if l, dup := where[s.Name]; dup {
			return nil, p.fail(mapping(devNodes[i]).line("name"), "device %q is listed twice (first at line %d)", s.Name, l)
		}
		where[s.Name] = mapping(devNodes[i]).line("name")
		hw.Devices = append(hw.Devices, s)
	}
	var linkNodes []*yaml.Node
	if n := top.get("links"); n != nil {
		linkNodes = n.Content
	}
	pairs := map[[2]string]int{}
	for i, lf := range hf.Links {
		m := mapping(linkNodes[i])
		for _, end := range []struct{ key, name string }{{"from", lf.From}, {"to", lf.To}} {
			if _, ok := where[end.name]; !ok {
				return nil, p.fail(m.line(end.key), "link %s: %q is not a device of this profile (have %s)", end.key, end.name, strings.Join(slices.Sorted(maps.Keys(where)), ", "))
			}
		}
		switch {
		case lf.From == lf.To:
			return nil, p.fail(m.line("to"), "link from %q to itself (a copy within a device is free)", lf.From)
		case !m.has("bandwidth_gbs") || lf.BandwidthGBs <= 0:
			return nil, p.fail(m.line("bandwidth_gbs"), "link %s -> %s: bandwidth_gbs must be > 0", lf.From, lf.To)
		case !m.has("latency_us") || lf.LatencyUS < 0:
			return nil, p.fail(m.line("latency_us"), "link %s -> %s: latency_us must be given and >= 0", lf.From, lf.To)
		}
		dirs := [][2]string{{lf.From, lf.To}}
		if !lf.OneWay {
			dirs = append(dirs, [2]string{lf.To, lf.From})
		}
		for _, d := range dirs {
			if l, dup := pairs[d]; dup {
				return nil, p.fail(m.line("from"), "a second link from %s to %s (first at line %d)", d[0], d[1], l)
			}
			pairs[d] = m.line("from")
		}
		hw.Links = append(hw.Links, Link{From: lf.From, To: lf.To, LatencyUS: lf.LatencyUS, BandwidthGBs: lf.BandwidthGBs, OneWay: lf.OneWay})
	}
	return hw, nil
}

func (p *parser) spec(m node, sf *specFile) (*Spec, error) {
	if !deviceName.MatchString(sf.Name) {
		return nil, p.fail(m.line("name"), "device name %q: want lower-case letters, digits, '-' or '_', starting with a letter", sf.Name)
	}
	fail := func(key, format string, args ...any) error {
		return p.fail(m.line(key), "device %q: %s", sf.Name, fmt.Sprintf(format, args...))
	}
	if !slices.Contains(kinds, sf.Kind) {
		return nil, fail("kind", "kind %q is not one of %s", sf.Kind, strings.Join(kinds, ", "))
	}
	for _, f := range []struct {
		key string
		v   float64
	}{{"memory_gb", sf.MemoryGB}, {"bandwidth_gbs", sf.BandwidthGBs}, {"tflops", sf.TFLOPS}} {
		if !m.has(f.key) {
			return nil, fail("name", "%s is missing", f.key)
		}
		if f.v <= 0 {
			return nil, fail(f.key, "%s must be > 0", f.key)
		}
	}
	if !m.has("launch_us") {
		return nil, fail("name", "launch_us is missing")
	}
	if sf.LaunchUS < 0 {
		return nil, fail("launch_us", "launch_us must be >= 0")
	}
	s := &Spec{Name: sf.Name, Kind: sf.Kind, MemoryGB: sf.MemoryGB, BandwidthGBs: sf.BandwidthGBs, TFLOPS: sf.TFLOPS,
		LaunchUS: sf.LaunchUS, FP16: sf.FP16, KVBytes: 2, Unsupported: map[ops.Kind]bool{}}
	switch sf.KVCache {
	case "", "f16":
	case "f32":
		s.KVBytes = 4
	default:
		return nil, fail("kv_cache", "kv_cache %q: want f16 or f32", sf.KVCache)
	}
	var err error
	if s.Efficiency, s.WeightEfficiency, err = p.efficiencies(m, "efficiency", sf.Name, sf.Efficiency); err != nil {
		return nil, err
	}
	if s.ComputeEfficiency, s.WeightComputeEfficiency, err = p.efficiencies(m, "compute_efficiency", sf.Name, sf.Compute); err != nil {
		return nil, err
	}
	if un := m.get("unsupported"); un != nil {
		for j, k := range sf.Unsupported {
			kind, err := ops.ParseKind(k)
			if err != nil {
				return nil, p.fail(un.Content[j].Line, "device %q: unsupported: unknown op kind %q (known: %s)", sf.Name, k, kindList())
			}
			s.Unsupported[kind] = true
		}
	}
	if len(s.Unsupported) == len(ops.Kinds()) {
		return nil, fail("unsupported", "supports no op kind at all")
	}
	return s, nil
}

// node is a mapping node with look-ups by key.
type node struct{ n *yaml.Node }

func mapping(n *yaml.Node) node { return node{n} }

func (m node) get(key string) *yaml.Node {
	if m.n == nil || m.n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.n.Content); i += 2 {
		if m.n.Content[i].Value == key {
			return m.n.Content[i+1]
		}
	}
	return nil
}

func (m node) has(key string) bool { return m.get(key) != nil }

// line is the line of key's value, or of the mapping when key is absent.
func (m node) line(key string) int {
	if v := m.get(key); v != nil {
		return v.Line
	}
	return m.keyLine(key)
}

// keyLine is the line of key itself, or of the mapping when key is absent.
func (m node) keyLine(key string) int {
	if m.n == nil {
		return 1
	}
	for i := 0; i+1 < len(m.n.Content); i += 2 {
		if m.n.Content[i].Value == key {
			return m.n.Content[i].Line
		}
	}
	return m.n.Line
}

// parseType finds a GGML type by its name, in any case ("q4_0", "Q4_K").
func parseType(s string) (quant.Type, bool) {
	for t := quant.Type(0); t < 64; t++ {
		if t.Known() && strings.EqualFold(t.String(), s) {
			return t, true
		}
	}
	return 0, false
}

func kindList() string {
	var names []string
	for _, k := range ops.Kinds() {
		names = append(names, k.String())
	}
	return strings.Join(names, ", ")
}

// efficiencies reads a device's map of efficiencies under key (efficiency or
// compute_efficiency): op kinds, and op kinds with a weight type
// ("mat_mul/q4_0"), each a fraction in (0, 1]. Errors name the line.
func (p *parser) efficiencies(m node, key, device string, vals map[string]float64) (map[ops.Kind]float64, map[ops.Kind]map[quant.Type]float64, error) {
	byKind, byWeight := map[ops.Kind]float64{}, map[ops.Kind]map[quant.Type]float64{}
	// In file order, so that of several errors the first is reported.
	var keys []*yaml.Node
	if n := m.get(key); n != nil && n.Kind == yaml.MappingNode {
		for i := 0; i < len(n.Content); i += 2 {
			keys = append(keys, n.Content[i])
		}
	}
	for _, k := range keys {
		name, line, e := k.Value, k.Line, vals[k.Value]
		kindName, typ, typed := strings.Cut(name, "/")
		kind, err := ops.ParseKind(kindName)
		if err != nil {
			return nil, nil, p.fail(line, "device %q: %s: unknown op kind %q (known: %s)", device, key, kindName, kindList())
		}
		if e <= 0 || e > 1 {
			return nil, nil, p.fail(line, "device %q: %s of %s is %g, want a fraction in (0, 1]", device, key, name, e)
		}
		if !typed {
			byKind[kind] = e
			continue
		}
		if kind != ops.MatMul && kind != ops.RMSNorm && kind != ops.Embed {
			return nil, nil, p.fail(line, "device %q: %s: %s ops have no weight, so %q cannot name a weight type", device, key, kind, name)
		}
		t, ok := parseType(typ)
		if !ok {
			return nil, nil, p.fail(line, "device %q: %s: unknown weight type %q in %q", device, key, typ, name)
		}
		if byWeight[kind] == nil {
			byWeight[kind] = map[quant.Type]float64{}
		}
		byWeight[kind][t] = e
	}
	return byKind, byWeight, nil
}
