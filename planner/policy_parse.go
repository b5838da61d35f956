package planner

import (
	"fmt"
	"slices"
	"strings"

	"hybrid/configs"
	"hybrid/devices"
	"hybrid/ops"
)

// polFile is the YAML form of a policy.
type polFile struct {
	Name        string            `yaml:"name"`
	Description string            `yaml:"description"`
	Devices     []string          `yaml:"devices"`
	Exclude     []string          `yaml:"exclude"`
	Rules       []polRuleFile     `yaml:"rules"`
	Memory      map[string]string `yaml:"memory"`
	Transfers   string            `yaml:"transfers"`
	Settings    map[string]string `yaml:",inline"` // registered device settings
}

type polRuleFile struct {
	Ops    []string `yaml:"ops"`
	Layers string   `yaml:"layers"`
	Device string   `yaml:"device"`
}

// polFormat is how policies are decoded: every key must have a value, and
// the device settings registered now are keys too.
func polFormat() *configs.Format {
	f := &configs.Format{Name: "policy file", Words: polWords}
	for _, s := range devices.Settings() {
		f.Extra = append(f.Extra, s.Key)
	}
	return f
}

// ParsePolicy parses a policy file strictly: malformed YAML, an unknown key,
// a value of the wrong shape, an unknown op kind, a malformed layer set,
// memory size, device reference, transfers value or device setting is an
// error of the form "path:LINE: what is wrong", a *configs.Error. Device
// references are only checked for shape here; Check matches them against
// the devices present.
func ParsePolicy(data []byte, path string) (*Policy, error) {
	var pf polFile
	doc, err := polFormat().Decode(data, path, &pf)
	if err != nil {
		return nil, err
	}
	fail := func(line int, format string, args ...any) error { return configs.Errorf(path, line, format, args...) }
	ruleNodes := doc.Get("rules").Items()
	for _, rn := range ruleNodes {
		if !rn.Has("device") {
			return nil, fail(rn.Line, "rule has no device: say where its ops go (device: metal)")
		}
	}

	p := &Policy{Name: pf.Name, Path: path, Description: pf.Description, Devices: pf.Devices, Exclude: pf.Exclude,
		Memory: map[string]int64{}, MemoryAuto: map[string]bool{}, Transfers: pf.Transfers, Settings: pf.Settings, lines: polLines{memory: map[string]int{}}}
	if p.Name == "" {
		p.Name = polBase(path)
	}
	switch p.Transfers {
	case "":
		p.Transfers = "boundary"
	case "boundary", "per-op":
	default:
		return nil, fail(doc.LineOf("transfers"), "transfers is %q: want boundary or per-op", p.Transfers)
	}
	// In file order, so that of several bad settings the first is reported.
	for _, key := range doc.Keys() {
		if v, ok := pf.Settings[key]; ok {
			if err := devices.CheckSetting(key, v); err != nil {
				return nil, fail(doc.LineOf(key), "%s is %q: %v", key, v, err)
			}
		}
	}
	p.CoreMLUnits = p.Settings["coreml_units"]
	for _, list := range []struct {
		key   string
		refs  []string
		lines *[]int
	}{{"devices", p.Devices, &p.lines.devices}, {"exclude", p.Exclude, &p.lines.exclude}} {
		node := doc.Get(list.key)
		if node != nil && len(node.Items()) == 0 {
			return nil, fail(node.Line, "%s is an empty list: leave the key out instead", list.key)
		}
		for i, ref := range list.refs {
			if err := polCheckRef(ref); err != nil {
				return nil, fail(node.Items()[i].Line, "%s: %v", list.key, err)
			}
			*list.lines = append(*list.lines, node.Items()[i].Line)
		}
	}
	for i, rn := range ruleNodes {
		rf := pf.Rules[i]
		r := Rule{Device: rf.Device, Line: rn.Line}
		if err := polCheckRef(rf.Device); err != nil {
			return nil, fail(rn.LineOf("device"), "rule: %v", err)
		}
		opNodes := rn.Get("ops")
		if opNodes != nil && len(opNodes.Items()) == 0 {
			return nil, fail(opNodes.Line, "rule: ops is an empty list: leave it out to match every op kind")
		}
		for j, name := range rf.Ops {
			kind, err := ops.ParseKind(name)
			if err != nil {
				return nil, fail(opNodes.Items()[j].Line, "rule: unknown op kind %q (have %s)", name, polKindNames())
			}
			r.Ops = append(r.Ops, kind)
		}
		if rn.Has("layers") {
			ls, err := ParseLayerSet(rf.Layers)
			if err != nil {
				return nil, fail(rn.LineOf("layers"), "rule: %v", err)
			}
			r.Layers = ls
		}
		p.Rules = append(p.Rules, r)
	}
	// In file order, so that the first bad cap in the file is the one
	// reported.
	mem := doc.Get("memory")
	for _, ref := range mem.Keys() {
		c := mem.Get(ref)
		if err := polCheckRef(ref); err != nil {
			return nil, fail(c.KeyLine, "memory: %v", err)
		}
		p.lines.memory[ref] = c.KeyLine
		if pf.Memory[ref] == "auto" {
			p.MemoryAuto[ref] = true
			continue
		}
		n, err := ParseSize(pf.Memory[ref])
		if err != nil {
			return nil, fail(c.Line, "memory: cap of %s: %v, or auto (the device's free memory less a margin)", ref, err)
		}
		p.Memory[ref] = n
	}
	return p, nil
}

// polWords words the decoder's problems in the terms of a policy: its
// rules, its entries, its memory caps.
func polWords(pr configs.Problem) string {
	at := pr.At
	in := func(key string, depth int) bool { return len(at) == depth && at[0] == key }
	pre := "" // a key or entry inside a rule
	if len(at) >= 2 && at[0] == "rules" {
		pre = "rule: "
	}
	known := strings.Join(slices.Sorted(slices.Values(pr.Known)), ", ")
	switch pr.Issue {
	case configs.UnknownKey:
		return fmt.Sprintf("%sunknown key %q (known: %s)", pre, pr.Key, known)
	case configs.DuplicateKey:
		if in("memory", 1) {
			pre = "memory: "
		}
		return fmt.Sprintf("%s%s is given twice (first on line %d)", pre, pr.Key, pr.First)
	case configs.WrongShape, configs.NoValue:
		last := ""
		if len(at) > 0 {
			last = at[len(at)-1]
		}
		switch {
		case len(at) == 0:
			return fmt.Sprintf("a policy is a mapping of keys (%s), not %s", known, pr.Got)
		case in("memory", 2):
			return fmt.Sprintf("memory: the cap of %s is %s, not a size like 8GiB", last, pr.Got)
		case in("rules", 2):
			return fmt.Sprintf("rules: each rule is a mapping of %s, not %s", known, pr.Got)
		case strings.HasPrefix(last, "["): // an entry of devices, exclude or ops
			return fmt.Sprintf("%s%s: an entry is %s, want a name", pre, at[len(at)-2], pr.Got)
		case pr.Issue == configs.NoValue:
			return fmt.Sprintf("%s%s has no value: give one or leave the key out", pre, last)
		}
		want := map[string]string{configs.WantList: "a list like [a, b]", configs.WantMapping: "a mapping of key: value lines"}[pr.Want]
		if want == "" {
			want = pr.Want
		}
		return fmt.Sprintf("%s%s is %s, want %s", pre, last, pr.Got, want)
	}
	return ""
}

func polKindNames() string {
	var ns []string
	for _, k := range ops.Kinds() {
		ns = append(ns, k.String())
	}
	return strings.Join(ns, ", ")
}
