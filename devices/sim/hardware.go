// Package sim provides simulated devices: they compute every op with the CPU
// kernels, so their outputs are exactly the CPU's, but the time they report
// comes from a hardware profile (configs/hardware/*.yaml): bandwidth, compute
// rate, launch latency, per-op efficiency, links to the other devices and
// memory size. They let plans for machines we do not have (a Mac, an H100
// host) be made and compared; everything they report is labelled simulated.
package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"hybrid/configs"
	"hybrid/ops"
)

// Hardware is a hardware profile: the devices of one machine and the links
// between them.
type Hardware struct {
	Name    string
	Source  string
	Path    string
	Devices []*Spec
	Links   []Link
}

// Spec is one device of a profile.
type Spec struct {
	Name         string
	Kind         string
	MemoryGB     float64
	BandwidthGBs float64
	TFLOPS       float64
	LaunchUS     float64
	FP16         bool
	Efficiency   map[ops.Kind]float64
	Unsupported  map[ops.Kind]bool
}

// Link is the cost of copying between two devices: latency + bytes/bandwidth.
type Link struct {
	From, To     string
	LatencyUS    float64
	BandwidthGBs float64
	OneWay       bool
}

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
	Efficiency   map[string]float64 `yaml:"efficiency"`
	Unsupported  []string           `yaml:"unsupported"`
}

type linkFile struct {
	From         string  `yaml:"from"`
	To           string  `yaml:"to"`
	LatencyUS    float64 `yaml:"latency_us"`
	BandwidthGBs float64 `yaml:"bandwidth_gbs"`
	OneWay       bool    `yaml:"oneway"`
}

var kinds = map[string]bool{"cpu": true, "cuda": true, "metal": true, "coreml": true}

// LoadHardware reads a profile: a bare name ("m4-pro") from the built-in
// configs/hardware, anything else as a file.
func LoadHardware(nameOrPath string) (*Hardware, error) {
	if !strings.ContainsAny(nameOrPath, "/\\") && !strings.HasSuffix(nameOrPath, ".yaml") {
		b, err := fs.ReadFile(configs.FS, "hardware/"+nameOrPath+".yaml")
		if err != nil {
			ents, _ := fs.ReadDir(configs.FS, "hardware")
			var have []string
			for _, e := range ents {
				have = append(have, strings.TrimSuffix(e.Name(), ".yaml"))
			}
			return nil, fmt.Errorf("sim: no built-in hardware profile %q (have %s); or give a YAML file", nameOrPath, strings.Join(have, ", "))
		}
		return ParseHardware(b, "builtin:"+nameOrPath)
	}
	b, err := os.ReadFile(nameOrPath)
	if err != nil {
		return nil, fmt.Errorf("sim: hardware profile: %w", err)
	}
	return ParseHardware(b, nameOrPath)
}

// ParseHardware parses a profile strictly; every error names the file and
// line.
func ParseHardware(data []byte, path string) (*Hardware, error) {
	fail := func(line int, format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", path, line, fmt.Sprintf(format, args...))
	}
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fail(1, "empty hardware profile")
		}
		return nil, fmt.Errorf("%s:%s", path, strings.TrimPrefix(strings.TrimPrefix(err.Error(), "yaml: "), "line "))
	}
	var hf hwFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&hf); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		if te, ok := err.(*yaml.TypeError); ok && len(te.Errors) > 0 {
			msg = te.Errors[0]
		}
		msg = strings.TrimPrefix(msg, "unmarshal errors:\n  ")
		msg = strings.TrimPrefix(msg, "line ")
		msg = strings.Replace(msg, "field ", "key ", 1)
		return nil, fmt.Errorf("%s:%s", path, msg)
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	line := func(keys ...any) int { return nodeLine(doc, keys...) }
	hw := &Hardware{Name: hf.Name, Source: hf.Source, Path: path}
	if hw.Name == "" {
		return nil, fail(1, "the profile has no name")
	}
	if len(hf.Devices) == 0 {
		return nil, fail(line("devices"), "the profile lists no devices")
	}
	seen := map[string]bool{}
	for i, sf := range hf.Devices {
		l := line("devices", i)
		switch {
		case sf.Name == "":
			return nil, fail(l, "a device has no name")
		case seen[sf.Name]:
			return nil, fail(l, "device %q is listed twice", sf.Name)
		case !kinds[sf.Kind]:
			return nil, fail(line("devices", i, "kind"), "device %q: kind %q is not cpu, cuda, metal or coreml", sf.Name, sf.Kind)
		case sf.BandwidthGBs <= 0:
			return nil, fail(l, "device %q: bandwidth_gbs must be > 0", sf.Name)
		case sf.TFLOPS <= 0:
			return nil, fail(l, "device %q: tflops must be > 0", sf.Name)
		case sf.MemoryGB <= 0:
			return nil, fail(l, "device %q: memory_gb must be > 0", sf.Name)
		case sf.LaunchUS < 0:
			return nil, fail(l, "device %q: launch_us must be >= 0", sf.Name)
		}
		seen[sf.Name] = true
		s := &Spec{Name: sf.Name, Kind: sf.Kind, MemoryGB: sf.MemoryGB, BandwidthGBs: sf.BandwidthGBs, TFLOPS: sf.TFLOPS,
			LaunchUS: sf.LaunchUS, FP16: sf.FP16, Efficiency: map[ops.Kind]float64{}, Unsupported: map[ops.Kind]bool{}}
		for k, e := range sf.Efficiency {
			kind, err := ops.ParseKind(k)
			if err != nil {
				return nil, fail(line("devices", i, "efficiency", k), "device %q: unknown op kind %q", sf.Name, k)
			}
			if e <= 0 || e > 1 {
				return nil, fail(line("devices", i, "efficiency", k), "device %q: efficiency of %s must be in (0, 1]", sf.Name, k)
			}
			s.Efficiency[kind] = e
		}
		for j, k := range sf.Unsupported {
			kind, err := ops.ParseKind(k)
			if err != nil {
				return nil, fail(line("devices", i, "unsupported", j), "device %q: unknown op kind %q", sf.Name, k)
			}
			s.Unsupported[kind] = true
		}
		hw.Devices = append(hw.Devices, s)
	}
	for i, lf := range hf.Links {
		l := line("links", i)
		if !seen[lf.From] || !seen[lf.To] {
			return nil, fail(l, "link %s -> %s names a device the profile does not list", lf.From, lf.To)
		}
		if lf.BandwidthGBs <= 0 || lf.LatencyUS < 0 {
			return nil, fail(l, "link %s -> %s: bandwidth_gbs must be > 0 and latency_us >= 0", lf.From, lf.To)
		}
		hw.Links = append(hw.Links, Link{From: lf.From, To: lf.To, LatencyUS: lf.LatencyUS, BandwidthGBs: lf.BandwidthGBs, OneWay: lf.OneWay})
	}
	return hw, nil
}

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

// Spec returns the named device's spec.
func (h *Hardware) Spec(name string) (*Spec, bool) {
	for _, s := range h.Devices {
		if s.Name == name {
			return s, true
		}
	}
	return nil, false
}

// efficiencyDefault is the fraction of the roofline an op kind reaches when
// the profile does not say: the kernels of a mature backend on simple ops.
const efficiencyDefault = 0.5

// OpTime is the modelled time of op on the device: the launch latency plus
// the larger of its compute time and its memory time at the kind's
// efficiency; an fp16 device also moves every f32 input and output through a
// conversion.
func (s *Spec) OpTime(op *ops.Op) time.Duration {
	eff, ok := s.Efficiency[op.Kind]
	if !ok {
		eff = efficiencyDefault
	}
	bytes := float64(op.Cost.BytesRead + op.Cost.BytesWritten)
	mem := bytes / (s.BandwidthGBs * 1e9 * eff)
	comp := float64(op.Cost.FLOPs) / (s.TFLOPS * 1e12 * eff)
	sec := s.LaunchUS*1e-6 + max(mem, comp)
	if s.FP16 {
		// Read the f32 activations and write fp16, and back for the output:
		// about the op's activation bytes once more, at full bandwidth.
		act := float64(op.Cost.BytesWritten)
		if op.Weight == nil {
			act += float64(op.Cost.BytesRead)
		}
		sec += act / (s.BandwidthGBs * 1e9)
	}
	return time.Duration(sec * 1e9)
}

// CopyTime is the modelled time of copying bytes from one device of the
// profile to another: the link's latency plus bytes over its bandwidth.
func (h *Hardware) CopyTime(from, to string, bytes int64) (time.Duration, error) {
	if from == to {
		return 0, nil
	}
	for _, l := range h.Links {
		if (l.From == from && l.To == to) || (!l.OneWay && l.From == to && l.To == from) {
			return time.Duration((l.LatencyUS*1e-6 + float64(bytes)/(l.BandwidthGBs*1e9)) * 1e9), nil
		}
	}
	return 0, fmt.Errorf("sim: %s has no link from %s to %s", h.Name, from, to)
}
