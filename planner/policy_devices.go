package planner

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"hybrid/configs"
	"hybrid/devices"
)

// A device reference is a kind or a name: a lower-case word ("cpu",
// "cuda"), optionally followed by ":"-separated parts ("cpu:1", "cuda:0",
// and the names packages give their devices, as hardware profiles do
// simulated ones).
var polRefRe = regexp.MustCompile(`^[a-z][a-z0-9_-]*(:[a-z0-9_-]+)*$`)

func polCheckRef(r string) error {
	if r == "" {
		return errors.New("empty device reference")
	}
	if !polRefRe.MatchString(r) {
		return fmt.Errorf("device reference %q is not a kind or a device name (cpu, cuda, cuda:0, cpu:1)", r)
	}
	return nil
}

// polRefKind is the kind a reference stands for, for messages and to look
// up why a kind is missing: the kind of the device of that name if one is
// present; else the first ":"-separated part of it that is a kind known
// here (one of devs, or one of missing), so that a device named for a kind
// after a prefix finds that kind; else the reference's first part ("cuda"
// for "cuda:1").
func polRefKind(r string, devs []devices.Info, missing map[string]string) string {
	for _, d := range devs {
		if d.Name == r {
			return d.Kind
		}
	}
	parts := strings.Split(r, ":")
	for _, part := range parts {
		_, gone := missing[part]
		if gone || slices.ContainsFunc(devs, func(d devices.Info) bool { return d.Kind == part }) {
			return part
		}
	}
	return parts[0]
}

// Matches reports whether a device reference names the device: its name,
// the name of the device it stands for if it is simulated (StandsFor), or
// its kind. Devices, exclusions and pins go through Resolve, which prefers
// an exact name among several devices; memory caps use Matches alone.
func Matches(ref string, d devices.Info) bool {
	return ref == d.Name || ref == d.Kind || (d.Simulated && ref == StandsFor(d))
}

// StandsFor is the name of the device a simulated device stands for: its
// name after the simulator's prefix, its first ":"-separated part (the
// profile's "cuda:1" for sim:cuda:1); "" for a real device. So a policy
// written for a real host with two GPUs ("cuda:0", "cuda:1") plans the same
// on a hardware profile that names its GPUs as the host names them. The
// planner knows no simulator's prefix: it only takes what follows the
// first part.
func StandsFor(d devices.Info) string {
	if !d.Simulated {
		return ""
	}
	_, rest, ok := strings.Cut(d.Name, ":")
	if !ok {
		return ""
	}
	return rest
}

// Resolve returns the devices a reference stands for among devs: the device
// of that exact name if there is one ("cpu" is the first CPU, not cpu:1
// too), else the simulated device that stands for that name ("cuda:1" is
// sim:cuda:1), else every device of that kind.
func Resolve(ref string, devs []devices.Info) []devices.Info {
	for _, d := range devs {
		if d.Name == ref {
			return []devices.Info{d}
		}
	}
	for _, d := range devs {
		if d.Simulated && StandsFor(d) == ref {
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
// no device is an error naming the file and line (a *configs.Error), as is a rule that pins ops
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
			first, firstLine = configs.Errorf(p.Path, line, format, args...), line
		}
	}
	present := func(ref, what string, line int) bool {
		if len(Resolve(ref, devs)) > 0 {
			return true
		}
		kind := polRefKind(ref, devs, missing)
		absent := "no " + ref + " device is present"
		if kind != ref {
			absent = "no device " + ref + " is present"
		}
		why := ""
		if w, ok := missing[kind]; ok {
			why = " (" + kind + ": " + w + ")"
		} else if h := devices.NameHint(ref); h != "" {
			why = " (" + h + ")"
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
	for _, d := range devs {
		if msg, line := p.capProblem(d); msg != "" && p.allowed(d, devs) {
			report(line, "%s", msg)
		}
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
