package planner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"hybrid/configs"
	"hybrid/devices"
	"hybrid/ops"
)

// Policy is a parsed policy file: which devices may be used, which ops are
// pinned where, memory caps, and how values move between devices.
//
// A policy file is YAML with these keys, all optional:
//
//	name: mine                      # default: the file's base name
//	description: GPU for mat-muls, Neural Engine for element-wise ops
//	devices: [metal, coreml, cpu]   # references allowed; absent: every device
//	exclude: ["cpu:1"]              # references never used
//	rules:                          # pins; the first rule that matches an op wins
//	  - ops: [mat_mul, attention]   # op kinds; absent: every kind
//	    layers: "0-21/2"            # blocks; absent: every op, in blocks or not
//	    device: metal               # required
//	memory:                         # byte cap per reference: 8GiB, 512MiB, 1.5GB, 1000000
//	  metal: 12GiB
//	transfers: boundary             # or per-op (the ablation)
//	coreml_units: cpu_ne            # CoreML's compute units: cpu_ne (default), all, cpu_gpu, cpu
//
// A device reference is a device's name ("cpu", "cpu:1", "cuda:0",
// "sim:metal") or its kind ("cpu", "cuda", "metal", "coreml"). In devices,
// exclude and rules it stands for the device of that exact name if one is
// present, else for every device of that kind (see Resolve): "cpu" is the
// device named cpu and not cpu:1 too, and with a hardware profile that
// replaces the host CPU it is the simulated sim:cpu. Memory caps match by
// name or kind (see Matches), so a cap on "cpu" caps every CPU device.
type Policy struct {
	Name        string
	Path        string // the file, or "builtin:NAME" for an embedded one
	Description string
	Devices     []string // references allowed; empty: every device
	Exclude     []string // references never used
	Rules       []Rule   // pins; the first that matches an op wins
	Memory      map[string]int64
	// Transfers is "boundary" (copies only where a value crosses devices) or
	// "per-op" (the ablation: a host round trip around every op).
	Transfers string
	// CoreMLUnits is the compute units the CoreML device's models may run
	// on (MLModelConfiguration.computeUnits): "cpu_ne" (CPU and Neural
	// Engine), "all", "cpu_gpu" or "cpu"; "" leaves the device's default
	// (cpu_ne, or $HYBRID_COREML_UNITS).
	CoreMLUnits string

	lines polLines
}

// polLines remembers where things were in the file, for errors found after
// parsing (Check, and the planner's memory-cap errors through CapLine).
type polLines struct {
	devices, exclude []int          // line of each entry of Devices, Exclude
	memory           map[string]int // line of each cap
}

// Rule pins ops to a device.
type Rule struct {
	Ops    []ops.Kind // empty: every kind
	Layers LayerSet   // empty: every op, in the blocks or not
	Device string     // reference
	Line   int        // line of the rule in its file
}

// matches reports whether the rule applies to op.
func (r *Rule) matches(op *ops.Op) bool {
	return (len(r.Ops) == 0 || slices.Contains(r.Ops, op.Kind)) && r.Layers.Contains(op.Layer)
}

// LayerSet is a set of block indices, written as comma-separated parts: "3",
// "0-21" (inclusive), "0-21/2" (every second block from 0: 0, 2, ..., 20),
// "1-21/2" (the odd ones), "0-3,8-11", and "none", which stands for the ops
// outside the blocks (the embedding and the output head, whose Layer is -1).
// A set without "none" never contains those ops; the empty set (a rule
// without layers) contains every op.
type LayerSet struct {
	spans []polSpan
	none  bool
	text  string
}

type polSpan struct{ from, to, step int }

// Empty reports whether the set was not given (it then matches every op).
func (s LayerSet) Empty() bool { return len(s.spans) == 0 && !s.none }

// Contains reports whether an op of the given layer (-1: outside the blocks)
// is in the set.
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

// String returns the set as it was written.
func (s LayerSet) String() string { return s.text }

var polSpanRe = regexp.MustCompile(`^(\d+)(?:-(\d+)(?:/(\d+))?)?$`)

// polMaxLayer bounds the numbers of a layer set; no model has this many
// blocks, and it keeps the arithmetic far from overflow.
const polMaxLayer = 1 << 20

// ParseLayerSet parses the layer-set syntax described at LayerSet.
func ParseLayerSet(text string) (LayerSet, error) {
	s := LayerSet{text: text}
	for part := range strings.SplitSeq(text, ",") {
		part = strings.TrimSpace(part)
		if part == "none" {
			s.none = true
			continue
		}
		m := polSpanRe.FindStringSubmatch(part)
		if m == nil {
			return LayerSet{}, fmt.Errorf("layer set %q: %q is not N, A-B, A-B/STEP or none", text, part)
		}
		num := func(t string, def int) (int, error) {
			if t == "" {
				return def, nil
			}
			n, err := strconv.Atoi(t)
			if err != nil || n > polMaxLayer {
				return 0, fmt.Errorf("layer set %q: %s is out of range (at most %d)", text, t, polMaxLayer)
			}
			return n, nil
		}
		from, err := num(m[1], 0)
		if err != nil {
			return LayerSet{}, err
		}
		to, err := num(m[2], from)
		if err != nil {
			return LayerSet{}, err
		}
		step, err := num(m[3], 1)
		if err != nil {
			return LayerSet{}, err
		}
		if to < from {
			return LayerSet{}, fmt.Errorf("layer set %q: %q runs backwards", text, part)
		}
		if step < 1 {
			return LayerSet{}, fmt.Errorf("layer set %q: %q has step 0", text, part)
		}
		s.spans = append(s.spans, polSpan{from, to, step})
	}
	return s, nil
}

// polFile is the YAML form, decoded with KnownFields after the node walk
// in ParsePolicy has checked the shape and given each problem its line.
type polFile struct {
	Name        string            `yaml:"name"`
	Description string            `yaml:"description"`
	Devices     []string          `yaml:"devices"`
	Exclude     []string          `yaml:"exclude"`
	Rules       []polRuleFile     `yaml:"rules"`
	Memory      map[string]string `yaml:"memory"`
	Transfers   string            `yaml:"transfers"`
	CoreMLUnits string            `yaml:"coreml_units"`
}

type polRuleFile struct {
	Ops    []string `yaml:"ops"`
	Layers string   `yaml:"layers"`
	Device string   `yaml:"device"`
}

// The keys of a policy and of a rule, and the YAML shape of each value.
var (
	polKeys = map[string]yaml.Kind{
		"name": yaml.ScalarNode, "description": yaml.ScalarNode, "devices": yaml.SequenceNode,
		"exclude": yaml.SequenceNode, "rules": yaml.SequenceNode, "memory": yaml.MappingNode,
		"transfers": yaml.ScalarNode, "coreml_units": yaml.ScalarNode,
	}
	polRuleKeys = map[string]yaml.Kind{"ops": yaml.SequenceNode, "layers": yaml.ScalarNode, "device": yaml.ScalarNode}
)

// LoadPolicy loads a policy: a bare name ("auto") from the built-in
// configs/policies, anything with a path separator or a .yaml (.yml) suffix
// as a file.
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

// BuiltinPolicies lists the names of the embedded policies.
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

// ParsePolicy parses a policy file strictly: malformed YAML, an unknown key,
// a value of the wrong shape, an unknown op kind, a malformed layer set,
// memory size, device reference or transfers value is an error of the form
// "path:LINE: what is wrong". Device references are only checked for shape
// here; Check matches them against the devices present.
func ParsePolicy(data []byte, path string) (*Policy, error) {
	fail := func(line int, format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", path, line, fmt.Sprintf(format, args...))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fail(1, "empty policy file")
		}
		return nil, fmt.Errorf("%s:%s", path, polYAMLErr(err))
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		return nil, fail(max(next.Line, 1), "a second YAML document; a policy file holds one")
	} else if !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s:%s", path, polYAMLErr(err))
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	if doc.Kind == yaml.ScalarNode && doc.Tag == "!!null" {
		return nil, fail(1, "empty policy file")
	}
	if doc.Kind != yaml.MappingNode {
		return nil, fail(doc.Line, "a policy is a mapping of keys (%s), not %s", polKeyList(polKeys), polDescribe(doc))
	}
	if err := polCheckTree(doc, fail); err != nil {
		return nil, err
	}

	// The shape is right, so the strict decoder only fails on what the walk
	// above does not know about; it is kept as the authority on keys.
	var pf polFile
	dec = yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&pf); err != nil {
		return nil, fmt.Errorf("%s:%s", path, polYAMLErr(err))
	}

	p := &Policy{Name: pf.Name, Path: path, Description: pf.Description, Devices: pf.Devices, Exclude: pf.Exclude,
		Memory: map[string]int64{}, Transfers: pf.Transfers, CoreMLUnits: pf.CoreMLUnits, lines: polLines{memory: map[string]int{}}}
	if p.Name == "" {
		p.Name = strings.TrimSuffix(strings.TrimSuffix(polBase(path), ".yaml"), ".yml")
	}
	switch p.Transfers {
	case "":
		p.Transfers = "boundary"
	case "boundary", "per-op":
	default:
		return nil, fail(polValue(doc, "transfers").Line, "transfers is %q: want boundary or per-op", p.Transfers)
	}
	switch p.CoreMLUnits {
	case "", "cpu_ne", "all", "cpu_gpu", "cpu":
	default:
		return nil, fail(polValue(doc, "coreml_units").Line, "coreml_units is %q: want cpu_ne, all, cpu_gpu or cpu", p.CoreMLUnits)
	}
	for _, list := range []struct {
		key   string
		refs  []string
		lines *[]int
	}{{"devices", p.Devices, &p.lines.devices}, {"exclude", p.Exclude, &p.lines.exclude}} {
		node := polValue(doc, list.key)
		if node != nil && len(node.Content) == 0 {
			return nil, fail(node.Line, "%s is an empty list: leave the key out instead", list.key)
		}
		items := polItems(node)
		for i, ref := range list.refs {
			if err := polCheckRef(ref); err != nil {
				return nil, fail(items[i].Line, "%s: %v", list.key, err)
			}
			*list.lines = append(*list.lines, items[i].Line)
		}
	}
	for i, rule := range polItems(polValue(doc, "rules")) {
		rf := pf.Rules[i]
		r := Rule{Device: rf.Device, Line: rule.Line}
		if err := polCheckRef(rf.Device); err != nil {
			return nil, fail(polValue(rule, "device").Line, "rule: %v", err)
		}
		if n := polValue(rule, "ops"); n != nil && len(n.Content) == 0 {
			return nil, fail(n.Line, "rule: ops is an empty list: leave it out to match every op kind")
		}
		for j, name := range rf.Ops {
			kind, err := ops.ParseKind(name)
			if err != nil {
				return nil, fail(polItems(polValue(rule, "ops"))[j].Line, "rule: unknown op kind %q (have %s)", name, polKindNames())
			}
			r.Ops = append(r.Ops, kind)
		}
		if n := polValue(rule, "layers"); n != nil {
			ls, err := ParseLayerSet(rf.Layers)
			if err != nil {
				return nil, fail(n.Line, "rule: %v", err)
			}
			r.Layers = ls
		}
		p.Rules = append(p.Rules, r)
	}
	// Walk the memory mapping rather than the decoded map, so that the first
	// bad entry in the file is the one reported.
	if mem := polValue(doc, "memory"); mem != nil {
		for i := 0; i+1 < len(mem.Content); i += 2 {
			k, v := mem.Content[i], mem.Content[i+1]
			if err := polCheckRef(k.Value); err != nil {
				return nil, fail(k.Line, "memory: %v", err)
			}
			n, err := ParseSize(v.Value)
			if err != nil {
				return nil, fail(v.Line, "memory: cap of %s: %v", k.Value, err)
			}
			p.Memory[k.Value] = n
			p.lines.memory[k.Value] = k.Line
		}
	}
	return p, nil
}

// polCheckTree checks the shape of a policy's YAML tree before it is
// decoded: known keys, each given once, with values of the right kind, and
// every rule with a device. Each problem is reported on its own line.
func polCheckTree(doc *yaml.Node, fail func(int, string, ...any) error) error {
	if err := polCheckShape(doc, polKeys, "", fail); err != nil {
		return err
	}
	for _, rule := range polItems(polValue(doc, "rules")) {
		if rule.Kind != yaml.MappingNode {
			return fail(rule.Line, "rules: each rule is a mapping of %s, not %s", polKeyList(polRuleKeys), polDescribe(rule))
		}
		if err := polCheckShape(rule, polRuleKeys, "rule: ", fail); err != nil {
			return err
		}
		if polValue(rule, "device") == nil {
			return fail(rule.Line, "rule has no device: say where its ops go (device: metal)")
		}
	}
	if mem := polValue(doc, "memory"); mem != nil {
		seen := map[string]int{}
		for i := 0; i+1 < len(mem.Content); i += 2 {
			k, v := mem.Content[i], mem.Content[i+1]
			if first, dup := seen[k.Value]; dup {
				return fail(k.Line, "memory: %s is given twice (first on line %d)", k.Value, first)
			}
			seen[k.Value] = k.Line
			if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
				return fail(k.Line, "memory: the cap of %s is %s, not a size like 8GiB", k.Value, polDescribe(v))
			}
		}
	}
	return nil
}

// polValue returns the value of key in mapping n, or nil.
func polValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// polItems returns the items of a list node, or nil for any other node or
// none.
func polItems(n *yaml.Node) []*yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

// polCheckShape checks a mapping's keys (known, not repeated) and the shape
// of each value: scalars are strings, lists hold scalars except rules, and
// no value is left empty.
func polCheckShape(m *yaml.Node, keys map[string]yaml.Kind, what string, fail func(int, string, ...any) error) error {
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		want, ok := keys[k.Value]
		if !ok {
			return fail(k.Line, "%sunknown key %q (known: %s)", what, k.Value, polKeyList(keys))
		}
		if first, dup := seen[k.Value]; dup {
			return fail(k.Line, "%s%s is given twice (first on line %d)", what, k.Value, first)
		}
		seen[k.Value] = k.Line
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			return fail(k.Line, "%s%s has no value: give one or leave the key out", what, k.Value)
		}
		if v.Kind == yaml.AliasNode {
			return fail(v.Line, "%s%s: YAML aliases are not supported in policies", what, k.Value)
		}
		if v.Kind != want {
			return fail(v.Line, "%s%s is %s, want %s", what, k.Value, polDescribe(v), map[yaml.Kind]string{
				yaml.ScalarNode: "a single value", yaml.SequenceNode: "a list like [a, b]", yaml.MappingNode: "a mapping of key: value lines"}[want])
		}
		if want == yaml.SequenceNode && k.Value != "rules" {
			for _, item := range v.Content {
				if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
					return fail(item.Line, "%s%s: an entry is %s, want a name", what, k.Value, polDescribe(item))
				}
			}
		}
	}
	return nil
}

// polDescribe says what a node is, for errors.
func polDescribe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "empty"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "not a value"
}

func polKeyList(keys map[string]yaml.Kind) string {
	var ks []string
	for k := range keys {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ", ")
}

func polBase(p string) string {
	if i := strings.LastIndexAny(p, "/\\:"); i >= 0 {
		return p[i+1:]
	}
	return p
}

func polKindNames() string {
	var ns []string
	for _, k := range ops.Kinds() {
		ns = append(ns, k.String())
	}
	return strings.Join(ns, ", ")
}

// A device reference is a kind or a name: a lower-case word ("cpu", "cuda"),
// optionally with an index ("cpu:1", "cuda:0"), optionally simulated
// ("sim:metal", "sim:cuda:1").
var polRefRe = regexp.MustCompile(`^(sim:)?[a-z][a-z0-9_-]*(:[0-9]+)?$`)

func polCheckRef(r string) error {
	if r == "" {
		return errors.New("empty device reference")
	}
	if !polRefRe.MatchString(r) {
		return fmt.Errorf("device reference %q is not a kind or a device name (cpu, cuda, cuda:0, cpu:1, sim:metal)", r)
	}
	return nil
}

// polRefKind is the kind a reference stands for, for messages: "cuda" for
// "cuda:1" and "sim:cuda".
func polRefKind(r string) string {
	r = strings.TrimPrefix(r, "sim:")
	k, _, _ := strings.Cut(r, ":")
	return k
}

// polYAMLErr turns yaml.v3's errors ("yaml: line 3: ...", "line 4: field x
// not found in type ...") into "LINE: ..." so that the caller's "path:"
// prefix makes "path:LINE: ...".
func polYAMLErr(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if te, ok := err.(*yaml.TypeError); ok && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimPrefix(msg, "line ")
	// yaml.v3 reports its parser's errors (not its scanner's) on the
	// zero-based line where the construct began: an unclosed [ on line 3
	// says "line 2". Those messages are a fixed set.
	if n, rest, ok := strings.Cut(msg, ": "); ok && slices.Contains(polParserProblems, rest) {
		if l, err := strconv.Atoi(n); err == nil {
			msg = strconv.Itoa(l+1) + ": " + rest
		}
	}
	msg = polFieldRe.ReplaceAllString(msg, `unknown key "$1"`)
	msg = polTypeRe.ReplaceAllString(msg, "")
	if !polLineRe.MatchString(msg) {
		msg = "1: " + msg
	}
	return msg
}

// polParserProblems are the messages of yaml.v3's parser errors (parserc.go).
var polParserProblems = []string{
	"did not find expected ',' or ']'", "did not find expected ',' or '}'", "did not find expected '-' indicator",
	"did not find expected <document start>", "did not find expected <stream-start>", "did not find expected key",
	"did not find expected node content", "found duplicate %TAG directive", "found duplicate %YAML directive",
	"found incompatible YAML document", "found undefined tag handle",
}

var (
	polFieldRe = regexp.MustCompile(`field (\S+) not found in type \S+`)
	polTypeRe  = regexp.MustCompile(` into planner\.\w+`)
	polLineRe  = regexp.MustCompile(`^\d+: `)
)

var polSizeRe = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)?$`)

// ParseSize parses a byte count: "8GiB", "512MiB", "1.5GB" (decimal units
// are powers of 1000, binary ones of 1024) or a plain number of bytes.
func ParseSize(s string) (int64, error) {
	m := polSizeRe.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("size %q is not a number with an optional unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", s)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	mult := map[string]float64{"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[m[2]]
	n := v * mult
	if n < 1 || n > 1<<50 {
		return 0, fmt.Errorf("size %q is out of range (1 byte to 1 PiB)", s)
	}
	return int64(n), nil
}

// Matches reports whether a device reference names the device: its name or
// its kind. Devices, exclusions and pins go through Resolve, which prefers
// an exact name among several devices; memory caps use Matches alone.
func Matches(ref string, d devices.Info) bool { return ref == d.Name || ref == d.Kind }

// Resolve returns the devices a reference stands for among devs: the device
// of that exact name if there is one ("cpu" is the first CPU, not cpu:1
// too), else every device of that kind.
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

func polResolves(ref string, d devices.Info, devs []devices.Info) bool {
	return slices.ContainsFunc(Resolve(ref, devs), func(x devices.Info) bool { return x.Name == d.Name })
}

// Check validates the policy's device references against the devices
// present: a reference in devices, exclude, a rule or memory that stands for
// no device is an error naming the file and line, as is a rule that pins ops
// to a device that devices or exclude rule out, and a policy that allows no
// device at all. missing maps absent kinds to why they are absent ("not
// built with -tags cuda"), for the message. Of several problems, the one
// earliest in the file is reported.
func (p *Policy) Check(devs []devices.Info, missing map[string]string) error {
	var have []string
	for _, d := range devs {
		have = append(have, d.Name)
	}
	first, firstLine := error(nil), 0
	report := func(line int, format string, args ...any) {
		if first == nil || line < firstLine {
			first, firstLine = fmt.Errorf("%s:%d: %s", p.Path, line, fmt.Sprintf(format, args...)), line
		}
	}
	present := func(ref, what string, line int) bool {
		if len(Resolve(ref, devs)) > 0 {
			return true
		}
		kind := polRefKind(ref)
		absent := "no " + ref + " device is present"
		if kind != ref {
			absent = "no device " + ref + " is present"
		}
		why := ""
		if w, ok := missing[kind]; ok {
			why = " (" + kind + ": " + w + ")"
		} else if strings.HasPrefix(ref, "sim:") {
			why = " (simulated devices come from a hardware profile)"
		}
		report(line, "%s %q but %s%s; present: %s", what, ref, absent, why, strings.Join(have, ", "))
		return false
	}
	for i, r := range p.Devices {
		present(r, "devices allows", p.lines.devices[i])
	}
	for i, r := range p.Exclude {
		present(r, "exclude names", p.lines.exclude[i])
	}
	for r, line := range p.lines.memory {
		present(r, "memory caps", line)
	}
	var allowed []string
	for _, d := range devs {
		if p.allowed(d, devs) {
			allowed = append(allowed, d.Name)
		}
	}
	if len(allowed) == 0 && len(devs) > 0 {
		line := 1
		if len(p.lines.devices) > 0 {
			line = p.lines.devices[0]
		} else if len(p.lines.exclude) > 0 {
			line = p.lines.exclude[0]
		}
		report(line, "devices and exclude leave no device to run on; present: %s", strings.Join(have, ", "))
	}
	for _, r := range p.Rules {
		if !present(r.Device, "pin to", r.Line) {
			continue
		}
		ok := false
		for _, d := range Resolve(r.Device, devs) {
			ok = ok || p.allowed(d, devs)
		}
		if !ok {
			report(r.Line, "pin to %q, which devices or exclude rule out; allowed: %s", r.Device, strings.Join(allowed, ", "))
		}
	}
	return first
}

// allowed reports whether the policy lets d run ops at all.
func (p *Policy) allowed(d devices.Info, devs []devices.Info) bool {
	for _, r := range p.Exclude {
		if polResolves(r, d, devs) {
			return false
		}
	}
	if len(p.Devices) == 0 {
		return true
	}
	for _, r := range p.Devices {
		if polResolves(r, d, devs) {
			return true
		}
	}
	return false
}

// Candidates returns the names of the devices op may run on: the devices of
// the first rule that matches it (one device, or several when the pin names
// a kind), else every allowed device. It does not ask whether a device
// supports op: a pin to a device that cannot run it is the caller's error
// to report. After Check, a pin's devices are always allowed ones.
func (p *Policy) Candidates(op *ops.Op, devs []devices.Info) []string {
	var out []string
	for _, r := range p.Rules {
		if !r.matches(op) {
			continue
		}
		for _, d := range Resolve(r.Device, devs) {
			if p.allowed(d, devs) {
				out = append(out, d.Name)
			}
		}
		return out
	}
	for _, d := range devs {
		if p.allowed(d, devs) {
			out = append(out, d.Name)
		}
	}
	return out
}

// MemoryCap is the byte cap for d: the smallest cap whose reference Matches
// it, or 0 for none.
func (p *Policy) MemoryCap(d devices.Info) int64 {
	c, _ := p.memoryCap(d)
	return c
}

// CapLine is the line of the cap MemoryCap returns for d (0: none), for
// errors that blame it.
func (p *Policy) CapLine(d devices.Info) int {
	_, line := p.memoryCap(d)
	return line
}

func (p *Policy) memoryCap(d devices.Info) (int64, int) {
	var c int64
	line := 0
	for r, n := range p.Memory {
		if !Matches(r, d) {
			continue
		}
		// Ties go to the earlier line, so that the answer does not depend on
		// map order.
		if l := p.lines.memory[r]; c == 0 || n < c || (n == c && l < line) {
			c, line = n, l
		}
	}
	return c, line
}
