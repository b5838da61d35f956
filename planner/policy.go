package planner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"hybrid/configs"
	"hybrid/devices"
	"hybrid/ops"
)

// Policy is a parsed policy file: which devices may be used, which ops are
// pinned where, memory caps, and how values move.
type Policy struct {
	Name        string
	Path        string // the file, or "builtin:NAME" for an embedded one
	Description string
	Devices     []string // references (names or kinds) allowed; empty: every device
	Exclude     []string
	Rules       []Rule // pins; the first that matches an op wins
	Memory      map[string]int64
	// Transfers is "boundary" (copies only where values cross devices) or
	// "per-op" (the ablation: a host round trip around every op).
	Transfers string

	lines map[string]int // line of each device reference, for errors
}

// Rule pins ops to a device.
type Rule struct {
	Ops    []ops.Kind // empty: every kind
	Layers LayerSet   // empty: every op, blocks or not
	Device string
	Line   int
}

// LayerSet is a set of block indices: "0-21", "0-21/2" (every second from 0),
// "3", "0-3,8-11", or "none" for the ops outside the blocks (embedding,
// output).
type LayerSet struct {
	spans []layerSpan
	none  bool
	text  string
}

type layerSpan struct{ from, to, step int }

// Empty reports whether the set was not given (it then matches every op).
func (s LayerSet) Empty() bool { return len(s.spans) == 0 && !s.none }

// Contains reports whether an op of the given layer (-1: outside the
// blocks) is in the set.
func (s LayerSet) Contains(layer int) bool {
	if s.Empty() {
		return true
	}
	if layer < 0 {
		return s.none
	}
	for _, sp := range s.spans {
		if layer >= sp.from && layer <= sp.to && (layer-sp.from)%sp.step == 0 {
			return true
		}
	}
	return false
}

func (s LayerSet) String() string { return s.text }

var spanRe = regexp.MustCompile(`^(\d+)(?:-(\d+)(?:/(\d+))?)?$`)

// ParseLayerSet parses the layer-set syntax.
func ParseLayerSet(text string) (LayerSet, error) {
	s := LayerSet{text: text}
	for _, part := range strings.Split(text, ",") {
		part = strings.TrimSpace(part)
		if part == "none" {
			s.none = true
			continue
		}
		m := spanRe.FindStringSubmatch(part)
		if m == nil {
			return s, fmt.Errorf("layer set %q: %q is not N, A-B or A-B/STEP (or none)", text, part)
		}
		from, _ := strconv.Atoi(m[1])
		to, step := from, 1
		if m[2] != "" {
			to, _ = strconv.Atoi(m[2])
		}
		if m[3] != "" {
			step, _ = strconv.Atoi(m[3])
		}
		if to < from || step < 1 {
			return s, fmt.Errorf("layer set %q: %q is empty", text, part)
		}
		s.spans = append(s.spans, layerSpan{from, to, step})
	}
	return s, nil
}

// policyFile is the YAML form.
type policyFile struct {
	Name        string            `yaml:"name"`
	Description string            `yaml:"description"`
	Devices     []string          `yaml:"devices"`
	Exclude     []string          `yaml:"exclude"`
	Rules       []ruleFile        `yaml:"rules"`
	Memory      map[string]string `yaml:"memory"`
	Transfers   string            `yaml:"transfers"`
}

type ruleFile struct {
	Ops    []string `yaml:"ops"`
	Layers string   `yaml:"layers"`
	Device string   `yaml:"device"`
}

// LoadPolicy loads a policy: a bare name ("auto") from the built-in
// configs/policies, anything else as a file path.
func LoadPolicy(nameOrPath string) (*Policy, error) {
	if !strings.ContainsAny(nameOrPath, "/\\") && !strings.HasSuffix(nameOrPath, ".yaml") && !strings.HasSuffix(nameOrPath, ".yml") {
		b, err := fs.ReadFile(configs.FS, "policies/"+nameOrPath+".yaml")
		if err != nil {
			return nil, fmt.Errorf("planner: no built-in policy %q (have %s); or give a YAML file", nameOrPath, strings.Join(BuiltinPolicies(), ", "))
		}
		return ParsePolicy(b, "builtin:"+nameOrPath)
	}
	b, err := os.ReadFile(nameOrPath)
	if err != nil {
		return nil, fmt.Errorf("planner: policy: %w", err)
	}
	return ParsePolicy(b, nameOrPath)
}

// BuiltinPolicies lists the embedded policy names.
func BuiltinPolicies() []string {
	ents, _ := fs.ReadDir(configs.FS, "policies")
	var ns []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			ns = append(ns, n)
		}
	}
	return ns
}

// ParsePolicy parses a policy file strictly: an unknown key, a bad value or
// malformed YAML is an error naming the file and line.
func ParsePolicy(data []byte, path string) (*Policy, error) {
	fail := func(line int, format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", path, line, fmt.Sprintf(format, args...))
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fail(1, "empty policy file")
		}
		return nil, fmt.Errorf("%s:%s", path, yamlErr(err))
	}
	var pf policyFile
	dec = yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&pf); err != nil {
		return nil, fmt.Errorf("%s:%s", path, yamlErr(err))
	}
	p := &Policy{Name: pf.Name, Path: path, Description: pf.Description, Devices: pf.Devices, Exclude: pf.Exclude,
		Memory: map[string]int64{}, Transfers: pf.Transfers, lines: map[string]int{}}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	line := func(keys ...any) int { return nodeLine(doc, keys...) }
	if p.Name == "" {
		p.Name = strings.TrimSuffix(strings.TrimPrefix(pathBase(path), "builtin:"), ".yaml")
	}
	switch p.Transfers {
	case "":
		p.Transfers = "boundary"
	case "boundary", "per-op":
	default:
		return nil, fail(line("transfers"), "transfers is %q: want boundary or per-op", p.Transfers)
	}
	for i, d := range p.Devices {
		if err := checkRef(d); err != nil {
			return nil, fail(line("devices", i), "devices: %v", err)
		}
		p.lines["devices:"+d] = line("devices", i)
	}
	for i, d := range p.Exclude {
		if err := checkRef(d); err != nil {
			return nil, fail(line("exclude", i), "exclude: %v", err)
		}
		p.lines["exclude:"+d] = line("exclude", i)
	}
	for i, rf := range pf.Rules {
		r := Rule{Device: rf.Device, Line: line("rules", i)}
		if err := checkRef(rf.Device); err != nil {
			return nil, fail(line("rules", i, "device"), "rule: %v", err)
		}
		for j, k := range rf.Ops {
			kind, err := ops.ParseKind(k)
			if err != nil {
				return nil, fail(line("rules", i, "ops", j), "unknown op kind %q (have %s)", k, kindNames())
			}
			r.Ops = append(r.Ops, kind)
		}
		if rf.Layers != "" {
			ls, err := ParseLayerSet(rf.Layers)
			if err != nil {
				return nil, fail(line("rules", i, "layers"), "%v", err)
			}
			r.Layers = ls
		}
		p.Rules = append(p.Rules, r)
	}
	for ref, size := range pf.Memory {
		if err := checkRef(ref); err != nil {
			return nil, fail(line("memory", ref), "memory: %v", err)
		}
		n, err := ParseSize(size)
		if err != nil {
			return nil, fail(line("memory", ref), "memory of %s: %v", ref, err)
		}
		p.Memory[ref] = n
		p.lines["memory:"+ref] = line("memory", ref)
	}
	return p, nil
}

func pathBase(p string) string {
	if i := strings.LastIndexAny(p, "/\\:"); i >= 0 {
		return p[i+1:]
	}
	return p
}

func kindNames() string {
	var ns []string
	for _, k := range ops.Kinds() {
		ns = append(ns, k.String())
	}
	return strings.Join(ns, ", ")
}

var refRe = regexp.MustCompile(`^(sim:)?[a-z][a-z0-9_-]*(:[0-9]+)?$`)

func checkRef(r string) error {
	if !refRe.MatchString(r) {
		return fmt.Errorf("device reference %q is not a kind or a device name (cpu, cuda, cuda:0, cpu:1, sim:metal)", r)
	}
	return nil
}

// yamlErr turns yaml.v3's errors ("yaml: line 3: ...", "line 4: field x not
// found in type ...") into "LINE: ..." so that the caller's "path:" prefix
// makes "path:LINE: ...".
func yamlErr(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if te, ok := err.(*yaml.TypeError); ok && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	if rest, ok := strings.CutPrefix(msg, "unmarshal errors:\n  "); ok {
		msg = rest
	}
	msg = strings.TrimPrefix(msg, "line ")
	msg = fieldRe.ReplaceAllString(msg, `unknown key "$1"`)
	msg = typeRe.ReplaceAllString(msg, "")
	if !lineRe.MatchString(msg) {
		msg = "1: " + msg
	}
	return msg
}

var (
	fieldRe = regexp.MustCompile(`field (\S+) not found in type \S+`)
	typeRe  = regexp.MustCompile(` into planner\.\w+`)
	lineRe  = regexp.MustCompile(`^\d+: `)
)

// nodeLine finds the line of a mapping key (string) or sequence item (int)
// path in a YAML tree; the deepest found, or 1.
func nodeLine(n *yaml.Node, path ...any) int {
	line := 1
	for _, p := range path {
		if n == nil {
			break
		}
		switch k := p.(type) {
		case string:
			var next *yaml.Node
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == k {
						line = n.Content[i].Line
						next = n.Content[i+1]
						break
					}
				}
			}
			n = next
		case int:
			if n.Kind == yaml.SequenceNode && k < len(n.Content) {
				n = n.Content[k]
				line = n.Line
			} else {
				n = nil
			}
		}
	}
	return line
}

var sizeRe = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)?$`)

// ParseSize parses "8GiB", "512MiB", "1.5GB" or a plain byte count.
func ParseSize(s string) (int64, error) {
	m := sizeRe.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("size %q is not a number with an optional unit (B, KB, MB, GB, KiB, MiB, GiB)", s)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	mult := map[string]float64{"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[m[2]]
	n := v * mult
	if n < 1 || n > 1<<50 {
		return 0, fmt.Errorf("size %q is out of range", s)
	}
	return int64(n), nil
}

// Matches reports whether a device reference names the device: its name or
// its kind. Among several devices, Resolve prefers an exact name.
func Matches(ref string, d devices.Info) bool { return ref == d.Name || ref == d.Kind }

// Resolve returns the devices a reference names: the device with that exact
// name if there is one ("cpu" is the first CPU, not cpu:1 too), else every
// device of that kind.
func Resolve(ref string, devs []devices.Info) []devices.Info {
	for _, d := range devs {
		if d.Name == ref {
			return []devices.Info{d}
		}
	}
	var out []devices.Info
	for _, d := range devs {
		if d.Kind == ref {
			out = append(out, d)
		}
	}
	return out
}

func resolves(ref string, d devices.Info, devs []devices.Info) bool {
	for _, x := range Resolve(ref, devs) {
		if x.Name == d.Name {
			return true
		}
	}
	return false
}

// Check validates the policy's device references against the devices
// present; missing maps absent kinds to why they are absent.
func (p *Policy) Check(devs []devices.Info, missing map[string]string) error {
	check := func(ref, where string, line int) error {
		if len(Resolve(ref, devs)) > 0 {
			return nil
		}
		why := ""
		kind := strings.TrimPrefix(strings.SplitN(ref, ":", 2)[0], "sim:")
		if w, ok := missing[kind]; ok {
			why = " (" + kind + ": " + w + ")"
		}
		var have []string
		for _, d := range devs {
			have = append(have, d.Name)
		}
		return fmt.Errorf("%s:%d: %s %q but no such device is present%s; devices: %s", p.Path, line, where, ref, why, strings.Join(have, ", "))
	}
	for _, r := range p.Devices {
		if err := check(r, "devices lists", p.lines["devices:"+r]); err != nil {
			return err
		}
	}
	for _, r := range p.Rules {
		if err := check(r.Device, "a rule pins ops to", r.Line); err != nil {
			return err
		}
	}
	for r := range p.Memory {
		if err := check(r, "memory caps", p.lines["memory:"+r]); err != nil {
			return err
		}
	}
	return nil
}

func (p *Policy) allowed(d devices.Info, devs []devices.Info) bool {
	for _, r := range p.Exclude {
		if resolves(r, d, devs) {
			return false
		}
	}
	if len(p.Devices) == 0 {
		return true
	}
	for _, r := range p.Devices {
		if resolves(r, d, devs) {
			return true
		}
	}
	return false
}

// Candidates returns the names of the devices op may run on: the devices of
// the first rule that matches it, else every allowed device.
func (p *Policy) Candidates(op *ops.Op, devs []devices.Info) []string {
	for _, r := range p.Rules {
		if !r.Layers.Contains(op.Layer) {
			continue
		}
		if len(r.Ops) > 0 {
			hit := false
			for _, k := range r.Ops {
				hit = hit || k == op.Kind
			}
			if !hit {
				continue
			}
		}
		var out []string
		for _, d := range Resolve(r.Device, devs) {
			if p.allowed(d, devs) {
				out = append(out, d.Name)
			}
		}
		return out
	}
	var out []string
	for _, d := range devs {
		if p.allowed(d, devs) {
			out = append(out, d.Name)
		}
	}
	return out
}

// CapLine is the line of the memory cap that applies to d, for errors.
func (p *Policy) CapLine(d devices.Info) int {
	for r := range p.Memory {
		if r == d.Name || r == d.Kind {
			return p.lines["memory:"+r]
		}
	}
	return 0
}

// MemoryCap is the smallest cap whose reference matches d (0: none).
func (p *Policy) MemoryCap(d devices.Info) int64 {
	var c int64
	for r, n := range p.Memory {
		if (r == d.Name || r == d.Kind) && (c == 0 || n < c) {
			c = n
		}
	}
	return c
}
