package sim

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"hybrid/configs"
	"hybrid/ops"
	"hybrid/quant"
)

// ParseError is a problem in a hardware profile, at a line of its file.
type ParseError = configs.Error

// The file's schema, decoded strictly by hwFormat: an unknown key, a key
// given twice or a value of the wrong type is an error at its line.
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
	FreeGB       float64            `yaml:"free_gb"`
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

// A bound is the range a profile's number must lie in: [min, max], or
// (0, max] when min is 0 and positive is set.
type bound struct {
	min, max float64
	positive bool
	unit     string // what the number counts, for the message
	why      string // what a number below min would do, for the message
}

// bounds are the ranges of a profile's numbers, by key ("efficiency" for
// both kinds of efficiency). Each upper bound is far past any machine (the
// shipped profiles reach 3350 GB/s, 67 TFLOPS, 128 GB). The lower ones keep
// every time the simulator models inside a time.Duration (292 years): at
// the floors (bandwidth 0.001 GB/s, 0.001 TFLOPS, efficiency 0.001) an op
// streaming 100 GB takes 1e8 s and one of 1e15 FLOPs 1e9 s. A memory of
// 1e-6 GB is about 1 KiB: less would round to 0 bytes, which a device reads
// as no limit at all.
var bounds = map[string]bound{
	"memory_gb":     {min: 1e-6, max: 1e6, positive: true, unit: "GB", why: "less rounds to 0 bytes, which is no limit at all"},
	"free_gb":       {min: 1e-6, max: 1e6, positive: true, unit: "GB", why: "less rounds to 0 bytes, which reads as unknown"},
	"bandwidth_gbs": {min: 1e-3, max: 1e6, positive: true, unit: "GB/s", why: "slower would model times past what a time.Duration holds"},
	"tflops":        {min: 1e-3, max: 1e6, positive: true, unit: "TFLOP/s", why: "slower would model times past what a time.Duration holds"},
	"launch_us":     {min: 0, max: 1e6, unit: "µs"},
	"latency_us":    {min: 0, max: 1e7, unit: "µs"},
	"efficiency":    {min: 1e-3, max: 1, positive: true, why: "an op kind that slow is better marked unsupported"},
}

// check returns what is wrong with v, the value of key, or "". A value not
// above 0 (or below it, where 0 is allowed) keeps the words it always had.
func (b bound) check(key string, v float64) string {
	unit := ""
	if b.unit != "" {
		unit = " " + b.unit
	}
	switch {
	case b.positive && !(v > 0):
		return fmt.Sprintf("%s must be > 0", key)
	case !b.positive && v < 0:
		return fmt.Sprintf("%s must be >= 0", key)
	case v < b.min:
		return fmt.Sprintf("%s is %g, below %g%s: %s", key, v, b.min, unit, b.why)
	case !(v <= b.max):
		return fmt.Sprintf("%s is %g, above %g%s, more than any machine has", key, v, b.max, unit)
	}
	return ""
}

var (
	kinds = []string{"cpu", "cuda", "metal", "coreml"}
	// deviceName is a word, optionally followed by ":"-separated parts, as
	// real devices are named ("cuda:0", "cuda:1"): a profile of a host with
	// several GPUs names each as the real one is named, and a policy's
	// references to those names find them (planner.Resolve).
	deviceName = regexp.MustCompile(`^[a-z][a-z0-9_-]*(:[a-z0-9_-]+)*$`)
)

// hwFormat is how profiles are decoded: a key given no value ("links:")
// is the empty list or mapping.
var hwFormat = configs.Format{Name: "profile", Nulls: true, Words: func(p configs.Problem) string {
	if p.Issue == configs.Empty {
		return "empty hardware profile"
	}
	return ""
}}

// ParseHardware parses a profile strictly: unknown keys, values of the wrong
// type, missing or out-of-range numbers, unknown op kinds or weight types,
// duplicate devices and links to devices the profile does not list are all
// errors, each a *ParseError naming path and line.
func ParseHardware(data []byte, path string) (*Hardware, error) {
	var hf hwFile
	doc, err := hwFormat.Decode(data, path, &hf)
	if err != nil {
		return nil, err
	}
	p := &parser{path: path}
	return p.build(doc, &hf)
}

type parser struct{ path string }

func (p *parser) fail(line int, format string, args ...any) error {
	return configs.Errorf(p.path, line, format, args...)
}

// build validates the decoded file, with top for the lines, and makes the
// Hardware.
func (p *parser) build(top *configs.Node, hf *hwFile) (*Hardware, error) {
	if strings.TrimSpace(hf.Name) == "" {
		return nil, p.fail(top.LineOf("name"), "the profile needs a name")
	}
	if strings.TrimSpace(hf.Source) == "" {
		return nil, p.fail(top.LineOf("source"), "profile %q needs a source: where its numbers come from", hf.Name)
	}
	if len(hf.Devices) == 0 {
		return nil, p.fail(top.LineOf("devices"), "profile %q lists no devices", hf.Name)
	}
	hw := &Hardware{Name: hf.Name, Source: hf.Source, Path: p.path}
	devNodes := top.Get("devices").Items()
	where := map[string]int{}
	for i, sf := range hf.Devices {
		s, err := p.spec(devNodes[i], &sf)
		if err != nil {
			return nil, err
		}
		if l, dup := where[s.Name]; dup {
			return nil, p.fail(devNodes[i].LineOf("name"), "device %q is listed twice (first at line %d)", s.Name, l)
		}
		where[s.Name] = devNodes[i].LineOf("name")
		hw.Devices = append(hw.Devices, s)
	}
	linkNodes := top.Get("links").Items()
	pairs := map[[2]string]int{}
	for i, lf := range hf.Links {
		m := linkNodes[i]
		for _, end := range []struct{ key, name string }{{"from", lf.From}, {"to", lf.To}} {
			if _, ok := where[end.name]; !ok {
				return nil, p.fail(m.LineOf(end.key), "link %s: %q is not a device of this profile (have %s)", end.key, end.name, strings.Join(slices.Sorted(maps.Keys(where)), ", "))
			}
		}
		switch {
		case lf.From == lf.To:
			return nil, p.fail(m.LineOf("to"), "link from %q to itself (a copy within a device is free)", lf.From)
		case !m.Has("bandwidth_gbs") || lf.BandwidthGBs <= 0:
			return nil, p.fail(m.LineOf("bandwidth_gbs"), "link %s -> %s: bandwidth_gbs must be > 0", lf.From, lf.To)
		case !m.Has("latency_us") || lf.LatencyUS < 0:
			return nil, p.fail(m.LineOf("latency_us"), "link %s -> %s: latency_us must be given and >= 0", lf.From, lf.To)
		}
		for _, f := range []struct {
			key string
			v   float64
		}{{"latency_us", lf.LatencyUS}, {"bandwidth_gbs", lf.BandwidthGBs}} {
			if msg := bounds[f.key].check(f.key, f.v); msg != "" {
				return nil, p.fail(m.LineOf(f.key), "link %s -> %s: %s", lf.From, lf.To, msg)
			}
		}
		dirs := [][2]string{{lf.From, lf.To}}
		if !lf.OneWay {
			dirs = append(dirs, [2]string{lf.To, lf.From})
		}
		for _, d := range dirs {
			if l, dup := pairs[d]; dup {
				return nil, p.fail(m.LineOf("from"), "a second link from %s to %s (first at line %d)", d[0], d[1], l)
			}
			pairs[d] = m.LineOf("from")
		}
		hw.Links = append(hw.Links, Link{From: lf.From, To: lf.To, LatencyUS: lf.LatencyUS, BandwidthGBs: lf.BandwidthGBs, OneWay: lf.OneWay})
	}
	return hw, nil
}

func (p *parser) spec(m *configs.Node, sf *specFile) (*Spec, error) {
	if !deviceName.MatchString(sf.Name) {
		return nil, p.fail(m.LineOf("name"), "device name %q: want lower-case letters, digits, '-' or '_', starting with a letter, optionally followed by ':'-separated parts (cuda:1)", sf.Name)
	}
	fail := func(key, format string, args ...any) error {
		return p.fail(m.LineOf(key), "device %q: %s", sf.Name, fmt.Sprintf(format, args...))
	}
	if !slices.Contains(kinds, sf.Kind) {
		return nil, fail("kind", "kind %q is not one of %s", sf.Kind, strings.Join(kinds, ", "))
	}
	for _, f := range []struct {
		key string
		v   float64
	}{{"memory_gb", sf.MemoryGB}, {"bandwidth_gbs", sf.BandwidthGBs}, {"tflops", sf.TFLOPS}} {
		if !m.Has(f.key) {
			return nil, fail("name", "%s is missing", f.key)
		}
		if msg := bounds[f.key].check(f.key, f.v); msg != "" {
			return nil, fail(f.key, "%s", msg)
		}
	}
	if m.Has("free_gb") {
		if msg := bounds["free_gb"].check("free_gb", sf.FreeGB); msg != "" {
			return nil, fail("free_gb", "%s", msg)
		}
		if sf.FreeGB > sf.MemoryGB {
			return nil, fail("free_gb", "free_gb %g is more than memory_gb %g", sf.FreeGB, sf.MemoryGB)
		}
	}
	if !m.Has("launch_us") {
		return nil, fail("name", "launch_us is missing")
	}
	if msg := bounds["launch_us"].check("launch_us", sf.LaunchUS); msg != "" {
		return nil, fail("launch_us", "%s", msg)
	}
	s := &Spec{Name: sf.Name, Kind: sf.Kind, MemoryGB: sf.MemoryGB, FreeGB: sf.FreeGB, BandwidthGBs: sf.BandwidthGBs, TFLOPS: sf.TFLOPS,
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
	if un := m.Get("unsupported"); un != nil {
		for j, k := range sf.Unsupported {
			kind, err := ops.ParseKind(k)
			if err != nil {
				return nil, p.fail(un.Items()[j].Line, "device %q: unsupported: unknown op kind %q (known: %s)", sf.Name, k, kindList())
			}
			s.Unsupported[kind] = true
		}
	}
	if len(s.Unsupported) == len(ops.Kinds()) {
		return nil, fail("unsupported", "supports no op kind at all")
	}
	return s, nil
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
func (p *parser) efficiencies(m *configs.Node, key, device string, vals map[string]float64) (map[ops.Kind]float64, map[ops.Kind]map[quant.Type]float64, error) {
	byKind, byWeight := map[ops.Kind]float64{}, map[ops.Kind]map[quant.Type]float64{}
	// In file order, so that of several errors the first is reported.
	effs := m.Get(key)
	for _, name := range effs.Keys() {
		line, e := effs.Get(name).KeyLine, vals[name]
		kindName, typ, typed := strings.Cut(name, "/")
		kind, err := ops.ParseKind(kindName)
		if err != nil {
			return nil, nil, p.fail(line, "device %q: %s: unknown op kind %q (known: %s)", device, key, kindName, kindList())
		}
		if !(e > 0 && e <= 1) {
			return nil, nil, p.fail(line, "device %q: %s of %s is %g, want a fraction in (0, 1]", device, key, name, e)
		}
		if msg := bounds["efficiency"].check(key+" of "+name, e); msg != "" {
			return nil, nil, p.fail(line, "device %q: %s", device, msg)
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
