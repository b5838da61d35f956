// Package verify checks a device against the CPU device, the project's
// oracle: every op kind and weight type the device supports on random inputs
// (within a tolerance that fits its precision), then greedy generation on
// real models under placement policies that use it, token for token against
// cpu-only. On a Mac it is the check of the Metal and CoreML devices; on any
// machine it checks whatever devices are present (a second CPU device, a
// CUDA GPU, the simulated devices of a hardware profile).
package verify

import (
	"fmt"
	"strconv"
	"strings"

	"hybrid/devices"
	"hybrid/devices/cpu"
	"hybrid/runtime"
)

// Options say what to verify.
type Options struct {
	// Device is the name ("cpu:1", "cuda:0") or kind ("metal") of the device
	// whose ops are checked; a kind picks the first device of that kind.
	Device string
	// Models are the GGUF files to generate with; none: the built-in
	// stories260K.
	Models []string
	// Policies are the placement policies whose greedy tokens must equal
	// cpu-only's; nil: DefaultPolicies of the device's kind.
	Policies []string
	// Hardware is a hardware profile whose simulated devices the sessions of
	// the policies get (and the device, if it names one of them).
	Hardware string
	Seed     uint64
	Threads  int    // CPU threads per CPU device; 0: all cores
	Tokens   int    // tokens to generate per model and policy; 0: 32
	Prompt   string // "": "Once upon a time"
	// Progress, if set, receives each result as it is found.
	Progress func(Result)
}

// Status is the outcome of one check.
type Status string

// The outcomes of a check.
const (
	Pass Status = "pass"
	Fail Status = "FAIL"
	Skip Status = "skip" // the device does not run it, and says why
)

// Result is one check: an op at one shape against the CPU device, or one
// model's generation under one policy against cpu-only.
type Result struct {
	Part   string  // "op" or "generate"
	Name   string  // e.g. "mat_mul Q4_K 96×512 n=7", "stories260K.gguf metal-only"
	Metric string  // what Err measures
	Err    float64 // the worst error found
	Tol    float64 // the most Err may be (0 with no tolerance)
	Status Status
	Note   string // why it failed or was skipped; where a policy put the ops
}

// Report is everything Run found.
type Report struct {
	Device  devices.Info
	Results []Result
}

// Failed is the number of failed checks.
func (r *Report) Failed() int {
	n := 0
	for _, x := range r.Results {
		if x.Status == Fail {
			n++
		}
	}
	return n
}

// DefaultPolicies are the policies verified with a device of kind: those
// that put ops on it.
func DefaultPolicies(kind string) []string {
	switch kind {
	case "metal":
		return []string{"metal-only", "mac-hybrid"}
	case "coreml":
		return []string{"mac-hybrid"}
	case "cuda":
		return []string{"cuda-only", "auto"}
	case "cpu":
		return []string{"cpu-split", "auto"}
	}
	return []string{"auto"}
}

// Run checks the device's ops against a CPU device of its own, then
// generates with every model under every policy. An error means the checks
// could not start (no such device, an unreadable model); failed checks are
// in the report.
func Run(o Options) (*Report, error) {
	if o.Device == "" {
		return nil, fmt.Errorf("verify: no device named")
	}
	cpus := cpuCount(o)
	dev, err := findDevice(o, cpus)
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	rep := &Report{Device: dev.Info()}
	emit := func(rs ...Result) {
		for _, r := range rs {
			rep.Results = append(rep.Results, r)
			if o.Progress != nil {
				o.Progress(r)
			}
		}
	}
	ref := cpu.New("cpu-reference", o.Threads)
	defer ref.Close()
	emit(Allocator(dev, ref))
	for _, r := range Ops(dev, ref, o.Seed) {
		emit(r)
	}
	policies := o.Policies
	if len(policies) == 0 {
		policies = DefaultPolicies(rep.Device.Kind)
	}
	models := o.Models
	if len(models) == 0 {
		models = []string{""}
	}
	for _, path := range models {
		rs, err := Generation(path, policies, GenOptions{
			Hardware: o.Hardware, Threads: o.Threads, CPUs: cpus, Tokens: o.Tokens, Prompt: o.Prompt,
		})
		if err != nil {
			return rep, err
		}
		emit(rs...)
	}
	return rep, nil
}

// cpuCount is the number of CPU devices the checks need: two for cpu-split,
// n+1 to check "cpu:n".
func cpuCount(o Options) int {
	n := 1
	if rest, ok := strings.CutPrefix(o.Device, "cpu:"); ok {
		if i, err := strconv.Atoi(rest); err == nil && i >= 0 {
			n = i + 1
		}
	}
	policies := o.Policies
	if len(policies) == 0 && strings.HasPrefix(o.Device, "cpu") {
		policies = DefaultPolicies("cpu")
	}
	for _, p := range policies {
		if p == "cpu-split" {
			n = max(n, 2)
		}
	}
	return n
}

// findDevice opens this machine's devices and keeps the one named, closing
// the rest; when none is and a hardware profile is given, it looks among the
// profile's simulated devices too.
func findDevice(o Options, cpus int) (devices.Device, error) {
	so := runtime.SessionOptions{Threads: o.Threads, CPUs: cpus}
	found, names, missing, err := openNamed(so, o.Device)
	if err != nil || found != nil {
		return found, err
	}
	if o.Hardware != "" {
		so.Hardware = o.Hardware
		if found, names, _, err = openNamed(so, o.Device); err != nil || found != nil {
			return found, err
		}
	}
	kind, _, _ := strings.Cut(o.Device, ":")
	for _, m := range missing {
		if m.Kind == kind {
			return nil, fmt.Errorf("verify: no %s device: %s", o.Device, m.Why)
		}
	}
	hint := ""
	if h := devices.NameHint(o.Device); h != "" && o.Hardware == "" {
		hint = "; " + h
	}
	return nil, fmt.Errorf("verify: no device %q on this machine (present: %s)%s", o.Device, strings.Join(names, ", "), hint)
}

// openNamed opens the devices so says and keeps the one named ref (by name,
// or by kind), closing the rest; it also returns the names it saw and the
// kinds missing.
func openNamed(so runtime.SessionOptions, ref string) (devices.Device, []string, []devices.Missing, error) {
	devs, missing, _, err := runtime.Devices(so)
	if err != nil {
		return nil, nil, nil, err
	}
	var found devices.Device
	var names []string
	for _, d := range devs {
		in := d.Info()
		names = append(names, in.Name)
		if found == nil && (in.Name == ref || in.Kind == ref) {
			found = d
			continue
		}
		d.Close()
	}
	return found, names, missing, nil
}
