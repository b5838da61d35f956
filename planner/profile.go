package planner

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"

	"hybrid/configs"
	"hybrid/devices"
	"hybrid/internal/atomicfile"
	"hybrid/ops"
	"hybrid/quant"
)

// Profile holds measured op and copy times, written by `hybrid profile` and
// read by the planner. Devices are keyed by identity (name and hardware
// line), so a profile taken on one machine is not applied to another.
type Profile struct {
	Model   string                    `yaml:"model"`
	Taken   string                    `yaml:"taken"`
	Devices map[string]*DeviceProfile `yaml:"devices"`
}

// DeviceProfile is one device's measurements.
type DeviceProfile struct {
	// Ops maps an op's kind and shape (OpKey) to its time in microseconds.
	Ops map[string]float64 `yaml:"ops"`
	// Copies maps a destination device identity to the fitted cost of a
	// copy there: fixed latency plus bytes over bandwidth.
	Copies map[string]CopyFit `yaml:"copies,omitempty"`
}

// CopyFit is latency + bytes/bandwidth.
type CopyFit struct {
	LatencyUS    float64 `yaml:"latency_us"`
	BandwidthGBs float64 `yaml:"bandwidth_gbs"`
}

// Identity is how a profile names a device.
func Identity(d devices.Info) string { return d.Name + " | " + d.Detail }

// OpKey names an op's kind and shape: ops of the same key cost the same.
func OpKey(op *ops.Op, tokens int) string {
	switch {
	case op.Weight != nil:
		return fmt.Sprintf("%s %s %dx%d n%d", op.Kind, op.Weight.Type, op.Weight.Rows, op.Weight.Cols, tokens)
	case op.Kind == ops.Attention:
		a := op.Attn
		return fmt.Sprintf("%s h%d/%d d%d n%d", op.Kind, a.Heads, a.KVHeads, a.HeadDim, tokens)
	}
	return fmt.Sprintf("%s io%d n%d", op.Kind, op.Cost.BytesWritten, tokens)
}

// OpTime is the measured time of op on d, if the profile has it.
func (p *Profile) OpTime(d devices.Info, op *ops.Op, tokens int) (time.Duration, bool) {
	dp := p.Devices[Identity(d)]
	if dp == nil {
		return 0, false
	}
	us, ok := dp.Ops[OpKey(op, tokens)]
	if !ok {
		return 0, false
	}
	return time.Duration(us * 1e3), true
}

// CopyTime is the measured cost of a copy from one device to another.
func (p *Profile) CopyTime(from, to devices.Info, bytes int64) (time.Duration, bool) {
	dp := p.Devices[Identity(from)]
	if dp == nil {
		return 0, false
	}
	f, ok := dp.Copies[Identity(to)]
	if !ok || f.BandwidthGBs <= 0 {
		return 0, false
	}
	return time.Duration((f.LatencyUS*1e-6 + float64(bytes)/(f.BandwidthGBs*1e9)) * 1e9), true
}

// profileFormat is how cost profiles are read: strictly, as hand-written
// configs are, since a profile may be edited or come from another version.
var profileFormat = configs.Format{Name: "cost profile"}

// LoadProfile reads a profile written by Save: a regular file within the
// size limit (configs.Format.ReadFile), parsed by ParseProfile.
func LoadProfile(path string) (*Profile, error) {
	b, err := profileFormat.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseProfile(b, path)
}

// Bounds of a profile's numbers. An op or a copy measured at over 1e9 µs
// (about 17 minutes) is a broken measurement, and with times below it a plan
// of a million ops still fits in a time.Duration. Copy bandwidth is above 0
// (CopyTime would skip the fit) and at least 1e-6 GB/s (1 kB/s), so that a
// 1 GB copy stays within 1e6 s; its upper bound is above the most the fit
// in runtime.measureCopy can give, 4 MiB over its 1e-12 s floor (4.2e9
// GB/s), which stands for "as fast as measurable".
const (
	profMaxUS       = 1e9
	profMinGBs      = 1e-6
	profMaxGBs      = 1e10
	profOpKeyFormat = "KIND TYPE ROWSxCOLS nTOKENS, attention hHEADS/KVHEADS dHEADDIM nTOKENS, or KIND ioBYTES nTOKENS"
)

// The three shapes of an OpKey.
var (
	profWeightKey = regexp.MustCompile(`^([a-z_]+) (\S+) (\d+)x(\d+) n(\d+)$`)
	profAttnKey   = regexp.MustCompile(`^attention h(\d+)/(\d+) d(\d+) n(\d+)$`)
	profPlainKey  = regexp.MustCompile(`^([a-z_]+) io(\d+) n(\d+)$`)
)

// ParseProfile parses a profile strictly: besides what the decoder refuses
// (an unknown key, a value that is not a number, .nan or .inf), an op key
// not of a shape OpKey writes (a known kind and weight type, sizes of at
// least 1, a byte count of at least 0, at least 1 token), an op time or
// copy latency outside [0, 1e9] µs and a copy bandwidth outside [1e-6,
// 1e10] GB/s are errors, each a *configs.Error naming path and line.
func ParseProfile(data []byte, path string) (*Profile, error) {
	var p Profile
	doc, err := profileFormat.Decode(data, path, &p)
	if err != nil {
		return nil, err
	}
	// In file order, so that of several errors the first is reported.
	devs := doc.Get("devices")
	for _, id := range devs.Keys() {
		dn, dp := devs.Get(id), p.Devices[id]
		if dp == nil { // the decoder makes every device; this only guards the lookups below
			continue
		}
		opNodes := dn.Get("ops")
		for _, key := range opNodes.Keys() {
			n := opNodes.Get(key)
			if msg := checkOpKey(key); msg != "" {
				return nil, configs.Errorf(path, n.KeyLine, "device %q: op %q: %s (want %s)", id, key, msg, profOpKeyFormat)
			}
			if us := dp.Ops[key]; !(us >= 0 && us <= profMaxUS) {
				return nil, configs.Errorf(path, n.Line, "device %q: op %q takes %g µs, want a time in [0, %g] µs", id, key, us, profMaxUS)
			}
		}
		copies := dn.Get("copies")
		for _, to := range copies.Keys() {
			c, f := copies.Get(to), dp.Copies[to]
			for _, k := range []string{"latency_us", "bandwidth_gbs"} {
				if !c.Has(k) {
					return nil, configs.Errorf(path, c.KeyLine, "device %q: copy to %q: %s is missing", id, to, k)
				}
			}
			if !(f.LatencyUS >= 0 && f.LatencyUS <= profMaxUS) {
				return nil, configs.Errorf(path, c.LineOf("latency_us"), "device %q: copy to %q: latency_us is %g, want a time in [0, %g] µs", id, to, f.LatencyUS, profMaxUS)
			}
			if !(f.BandwidthGBs >= profMinGBs && f.BandwidthGBs <= profMaxGBs) {
				return nil, configs.Errorf(path, c.LineOf("bandwidth_gbs"), "device %q: copy to %q: bandwidth_gbs is %g, want a rate in [%g, %g] GB/s", id, to, f.BandwidthGBs, profMinGBs, profMaxGBs)
			}
		}
	}
	return &p, nil
}

// checkOpKey says what is wrong with an op key, or "".
func checkOpKey(key string) string {
	var kind string
	var sizes []string // each at least 1
	var bytes string   // at least 0
	if m := profAttnKey.FindStringSubmatch(key); m != nil {
		kind, sizes = "attention", m[1:]
	} else if m := profWeightKey.FindStringSubmatch(key); m != nil {
		if _, err := quant.ParseType(m[2]); err != nil {
			return fmt.Sprintf("unknown weight type %q", m[2])
		}
		kind, sizes = m[1], m[3:]
	} else if m := profPlainKey.FindStringSubmatch(key); m != nil {
		kind, bytes, sizes = m[1], m[2], m[3:]
	} else {
		return "not an op key"
	}
	if _, err := ops.ParseKind(kind); err != nil {
		return fmt.Sprintf("unknown op kind %q", kind)
	}
	if bytes != "" {
		if _, err := strconv.ParseInt(bytes, 10, 64); err != nil {
			return fmt.Sprintf("byte count %s is out of range", bytes)
		}
	}
	for _, s := range sizes {
		if n, err := strconv.ParseInt(s, 10, 64); err != nil || n < 1 {
			return fmt.Sprintf("size or token count %s: want a whole number of at least 1", s)
		}
	}
	return ""
}

// Save writes the profile as YAML, atomically, with internal/atomicfile: a
// path that is not a regular file is refused, a symbolic link is written
// through, an existing file keeps its mode and a new one is 0644 less the
// umask.
func (p *Profile) Save(path string) error {
	b, err := yaml.Marshal(p)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o644)
}
