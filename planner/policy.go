package planner

import (
	"fmt"
	"io/fs"
	"strings"

	"hybrid/configs"
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
//	memory:                         # byte cap per reference: 8GiB, 512MiB, 1.5GB, 1000000,
//	  metal: 12GiB                  # or auto: the device's free memory less a margin
//	  "cuda:1": auto                # (AutoCap)
//	transfers: boundary             # or per-op (the ablation)
//	coreml_units: cpu_ne            # a device setting (see below)
//
// A cap of auto is the device's free memory when it was opened
// (devices.Info.Free, or its whole memory where that is unknown, as for a
// simulated device whose profile gives no free_gb) less AutoMargin, 1 GiB;
// on a device with no fixed memory (the host CPU) it is an error. Under the
// caps a plan fits each device's weights, its KV cache sized from the
// context and the step's activations; a plan that cannot says which
// device's cap is too small, for what, and the largest context that fits.
//
// Besides these, a policy may give the settings that device packages
// register (devices.RegisterSetting), each checked by its package:
// coreml_units, from devices/coreml, is CoreML's compute units.
//
// A device reference is a device's name ("cpu", "cpu:1", "cuda:0", or the
// name of a simulated device from a hardware profile) or its kind ("cpu",
// "cuda", "metal", "coreml"). In devices, exclude and rules it stands for
// the device of that exact name if one is present, else for every device of
// that kind (see Resolve): "cpu" is the device named cpu and not cpu:1 too,
// and with a hardware profile that replaces the host CPU it is the
// simulated CPU. Memory caps match by name or kind (see Matches), so a cap
// on "cpu" caps every CPU device. A simulated device also answers to the
// name of the device it stands for (StandsFor): "cuda:1" is sim:cuda:1 of
// a hardware profile that names its GPUs cuda:0 and cuda:1.
type Policy struct {
	Name        string
	Path        string // the file, or "builtin:NAME" for an embedded one
	Description string
	Devices     []string // references allowed; empty: every device
	Exclude     []string // references never used
	Rules       []Rule   // pins; the first that matches an op wins
	// Memory is the byte cap of each reference given a size.
	Memory map[string]int64
	// MemoryAuto holds the references whose cap is auto: each device they
	// match is capped at its free memory less a margin (AutoCap).
	MemoryAuto map[string]bool
	// Transfers is "boundary" (copies only where a value crosses devices) or
	// "per-op" (the ablation: a host round trip around every op).
	Transfers string
	// Settings holds the device settings the file gives, by key, each
	// checked by the package that registered it.
	Settings map[string]string
	// CoreMLUnits is Settings["coreml_units"], which the runtime passes on
	// to the devices (devices.Options.CoreMLUnits); "" leaves the CoreML
	// device's default.
	CoreMLUnits string

	lines polLines
}

// polLines remembers where things were in the file, for errors found after
// parsing (Check, and the planner's memory-cap errors through CapLine).
type polLines struct {
	devices, exclude []int          // line of each entry of Devices, Exclude
	memory           map[string]int // line of each cap
}

// LoadPolicy loads a policy: a bare name ("auto") from the built-in
// configs/policies, anything with a path separator or a .yaml (.yml) suffix
// as a file, which must be a regular file within the size limit
// (configs.Format.ReadFile).
func LoadPolicy(nameOrPath string) (*Policy, error) {
	if !strings.ContainsAny(nameOrPath, "/\\") && !strings.HasSuffix(nameOrPath, ".yaml") && !strings.HasSuffix(nameOrPath, ".yml") {
		b, err := fs.ReadFile(configs.FS, "policies/"+nameOrPath+".yaml")
		if err != nil {
			return nil, fmt.Errorf("planner: no built-in policy %q (have %s); or give a YAML file", nameOrPath, strings.Join(BuiltinPolicies(), ", "))
		}
		return ParsePolicy(b, "builtin:"+nameOrPath)
	}
	f := polFormat()
	b, err := f.ReadFile(nameOrPath)
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

// polBase is a policy's default name: its file's base name.
func polBase(p string) string {
	if i := strings.LastIndexAny(p, "/\\:"); i >= 0 {
		p = p[i+1:]
	}
	return strings.TrimSuffix(strings.TrimSuffix(p, ".yaml"), ".yml")
}
