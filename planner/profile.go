package planner

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"gopkg.in/yaml.v3"

	"hybrid/configs"
	"hybrid/devices"
	"hybrid/ops"
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

// LoadProfile reads a profile written by Save. A malformed one is a
// *configs.Error naming the file and line.
func LoadProfile(path string) (*Profile, error) {
	b, err := profileFormat.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p Profile
	if _, err := profileFormat.Decode(b, path, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Save writes the profile as YAML, atomically (a temporary file renamed into
// place).
func (p *Profile) Save(path string) error {
	b, err := yaml.Marshal(p)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".profile-*.yaml")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
