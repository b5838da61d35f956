// Package sim provides simulated devices: they compute every op with the CPU
// kernels, so their outputs are exactly the CPU's, but the time they report
// comes from a hardware profile (configs/hardware/*.yaml): memory bandwidth,
// compute rate, launch latency, per-op efficiency, fp16 conversion, the links
// between devices and their memory size. They let plans for machines we do
// not have (a Mac, an H100 host) be made and compared; everything they report
// is labelled simulated.
package sim

import (
	"fmt"
	"io/fs"
	"strings"
	"time"

	"hybrid/configs"
	"hybrid/ops"
	"hybrid/quant"
)

// Hardware is a hardware profile: the devices of one machine and the links
// between them.
type Hardware struct {
	Name    string
	Source  string // where the numbers come from
	Path    string // the file it was read from ("configs/hardware/x.yaml" for a built-in one)
	Devices []*Spec
	Links   []Link
}

// Spec is one device of a profile: a roofline with a fixed cost per op.
type Spec struct {
	Name     string // the simulated device is prefix+Name
	Kind     string // cpu, cuda, metal or coreml
	MemoryGB float64
	// FreeGB, where a profile gives it (free_gb), is the part of MemoryGB
	// free when the device is opened: another process holds the rest, as on
	// a GPU shared with other jobs. The device holds no more than it, and
	// reports it as devices.Info.Free, which a policy's `memory: auto` caps
	// the device at (less a margin). 0 is all of MemoryGB.
	FreeGB       float64
	BandwidthGBs float64 // memory bandwidth, 1e9 bytes/s
	TFLOPS       float64 // f32 rate the kernels can use, 1e12 FLOP/s
	LaunchUS     float64 // fixed cost of one op, µs
	// FP16 devices compute in half precision: every f32 activation an op reads
	// is rounded to binary16 on the way in and its output on the way out, and
	// weights are held as binary16 (fp16.go). Conversions says what that
	// costs.
	FP16        bool
	Conversions Conversions
	// KVBytes is the bytes per element of the KV cache the hardware's
	// device keeps (kv_cache: f16, the default, or f32): the simulated
	// device charges its memory at that size.
	KVBytes int
	// Efficiency is the fraction of both rates an op kind reaches;
	// WeightEfficiency refines it by the type of the op's weight
	// ("mat_mul/q4_0" in a profile). Kinds in neither reach
	// DefaultEfficiency.
	Efficiency       map[ops.Kind]float64
	WeightEfficiency map[ops.Kind]map[quant.Type]float64
	// ComputeEfficiency and WeightComputeEfficiency, where a profile gives
	// them (compute_efficiency), replace the efficiency for the compute
	// rate alone: a GPU's batched mat-muls run on other units (tensor
	// cores) and reach another fraction of TFLOPS than their mat-vecs reach
	// of the bandwidth.
	ComputeEfficiency       map[ops.Kind]float64
	WeightComputeEfficiency map[ops.Kind]map[quant.Type]float64
	// Unsupported lists the op kinds the hardware cannot run.
	Unsupported map[ops.Kind]bool
}

// Link is the cost of copying between two devices: latency + bytes/bandwidth,
// in both directions unless OneWay.
type Link struct {
	From, To     string
	LatencyUS    float64
	BandwidthGBs float64
	OneWay       bool
}

// DefaultEfficiency is the fraction of the roofline reached by an op kind a
// profile does not name: about what straightforward kernels of a mature
// backend reach on simple ops. A profile should name every kind it cares
// about.
const DefaultEfficiency = 0.5

// builtinDir is where the shipped profiles sit, in configs.FS and in the
// source tree.
const builtinDir = "hardware"

// LoadHardware reads a profile: a bare name ("m4-pro") is a built-in one, a
// path (with a separator or a .yaml suffix) a file, which must be a regular
// file within the size limit (configs.Format.ReadFile).
func LoadHardware(nameOrPath string) (*Hardware, error) {
	if !strings.ContainsAny(nameOrPath, `/\`) && !strings.HasSuffix(nameOrPath, ".yaml") {
		return Builtin(nameOrPath)
	}
	b, err := hwFormat.ReadFile(nameOrPath)
	if err != nil {
		return nil, fmt.Errorf("sim: hardware profile: %w", err)
	}
	return ParseHardware(b, nameOrPath)
}

// Builtin returns the shipped profile of that name, embedded in the binary.
func Builtin(name string) (*Hardware, error) {
	b, err := fs.ReadFile(configs.FS, builtinDir+"/"+name+".yaml")
	if err != nil {
		return nil, fmt.Errorf("sim: no built-in hardware profile %q (have %s); or give a YAML file", name, strings.Join(Builtins(), ", "))
	}
	return ParseHardware(b, "configs/"+builtinDir+"/"+name+".yaml")
}

// Builtins lists the names of the shipped profiles.
func Builtins() []string {
	ents, _ := fs.ReadDir(configs.FS, builtinDir)
	var names []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok && !e.IsDir() {
			names = append(names, n)
		}
	}
	return names
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

// CopyTime is the modelled time of copying bytes from one device of the
// profile to another: the link's latency plus bytes over its bandwidth. A
// copy within a device is free; a pair with no link is an error.
func (h *Hardware) CopyTime(from, to string, bytes int64) (time.Duration, error) {
	if from == to {
		return 0, nil
	}
	l, ok := h.link(from, to)
	if !ok {
		return 0, fmt.Errorf("sim: hardware profile %s has no link from %q to %q", h.Name, from, to)
	}
	return seconds(l.LatencyUS*1e-6 + float64(bytes)/(l.BandwidthGBs*1e9)), nil
}

// link finds the link from one device to another: one declared in that
// direction first, then a two-way one declared the other way.
func (h *Hardware) link(from, to string) (Link, bool) {
	for _, l := range h.Links {
		if l.From == from && l.To == to {
			return l, true
		}
	}
	for _, l := range h.Links {
		if !l.OneWay && l.From == to && l.To == from {
			return l, true
		}
	}
	return Link{}, false
}

// EfficiencyOf is the fraction of the roofline op reaches on the device.
func (s *Spec) EfficiencyOf(op *ops.Op) float64 {
	if e, ok := lookupEff(op, s.WeightEfficiency, s.Efficiency); ok {
		return e
	}
	return DefaultEfficiency
}

// lookupEff is op's entry in byWeight (by kind and weight type), else in
// byKind.
func lookupEff(op *ops.Op, byWeight map[ops.Kind]map[quant.Type]float64, byKind map[ops.Kind]float64) (float64, bool) {
	if op.Weight != nil {
		if e, ok := byWeight[op.Kind][op.Weight.Type]; ok {
			return e, true
		}
	}
	e, ok := byKind[op.Kind]
	return e, ok
}

// ComputeEfficiencyOf is the fraction of TFLOPS op reaches on the device:
// its compute efficiency where the profile gives one, else its efficiency.
func (s *Spec) ComputeEfficiencyOf(op *ops.Op) float64 {
	if e, ok := lookupEff(op, s.WeightComputeEfficiency, s.ComputeEfficiency); ok {
		return e
	}
	return s.EfficiencyOf(op)
}

// OpTime is the modelled time of op on the device: the launch latency plus
// the larger of its compute time (at its compute efficiency) and its memory
// time (at its efficiency), plus, for an fp16 device with per-op
// conversions, the conversion passes of its activations (ConvertTime).
func (s *Spec) OpTime(op *ops.Op) time.Duration {
	bytes := float64(op.Cost.BytesRead + op.Cost.BytesWritten)
	mem := bytes / (s.BandwidthGBs * 1e9 * s.EfficiencyOf(op))
	comp := float64(op.Cost.FLOPs) / (s.TFLOPS * 1e12 * s.ComputeEfficiencyOf(op))
	t := seconds(s.LaunchUS*1e-6 + max(mem, comp))
	if s.Conversions == PerOp {
		t += s.ConvertTime(op)
	}
	return t
}

// ConvertTime is what an fp16 device spends on op in separate conversion
// passes, the cost the per-op design pays (OpTime charges it only under
// PerOp): each input element is read as 4 bytes and written as 2, and the
// output the other way round, so 1.5 times the f32 bytes of the activations
// pass through memory, at the device's full bandwidth (a streaming pass).
// The activations are the bytes the op reads and writes less its weight: for
// attention that also counts the KV cache, which an fp16 device would keep
// in fp16; no shipped fp16 device runs attention. Zero for other devices.
func (s *Spec) ConvertTime(op *ops.Op) time.Duration {
	if !s.FP16 {
		return 0
	}
	act := op.Cost.BytesRead + op.Cost.BytesWritten
	if op.Kind == ops.Embed {
		act = op.Cost.BytesWritten // reads token ids and table rows, no activations
	} else if op.Weight != nil {
		act -= op.Weight.Bytes()
	}
	return seconds(1.5 * float64(max(act, 0)) / (s.BandwidthGBs * 1e9))
}

// Conversions is where an fp16 device's f32↔fp16 conversions happen, which
// decides what the simulator charges for them. Both compute the same values:
// rounding an already rounded value changes nothing.
type Conversions int

const (
	// Boundary is the default design: activations stay f32 in every buffer
	// and across every copy, and the fp16 device rounds each input as its op
	// reads it and the output as the op writes it, inside the op. That read
	// and write are already in the op's roofline at 4 bytes an element, so no
	// conversion is charged on top: the assumption this design stands on
	// (an fp16 engine that loads f32 and rounds in its load path), not a
	// measurement.
	Boundary Conversions = iota
	// PerOp is the ablation: every op on an fp16 device converts each f32
	// input to fp16 in a pass of its own before it runs, and its fp16 output
	// back to f32 after, as an integration that keeps fp16 tensors per op
	// and f32 between them does. OpTime adds ConvertTime. The op's own
	// roofline is left at f32 bytes, so the ablation charges the passes
	// alone.
	PerOp
)

// ParseConversions reads a mode: "boundary" or "per-op".
func ParseConversions(s string) (Conversions, error) {
	switch s {
	case "boundary":
		return Boundary, nil
	case "per-op":
		return PerOp, nil
	}
	return 0, fmt.Errorf("sim: conversions %q: want boundary or per-op", s)
}

func (c Conversions) String() string {
	if c == PerOp {
		return "per-op"
	}
	return "boundary"
}

// SetConversions sets the conversion design of every device of the profile
// (only fp16 devices are affected).
func (h *Hardware) SetConversions(c Conversions) {
	for _, s := range h.Devices {
		s.Conversions = c
	}
}

// seconds converts to a Duration, rounding to the nearest nanosecond.
func seconds(s float64) time.Duration { return time.Duration(s*1e9 + 0.5) }
