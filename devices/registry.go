package devices

import (
	"fmt"
	"sort"
	"sync"
)

// A Backend finds the devices of one kind on this machine. Packages register
// theirs in init, as image formats and SQL drivers do; the CPU is always
// there, CUDA only in a build with the cuda tag, Metal and CoreML only on
// darwin.
type Backend struct {
	Kind string
	// Open returns the devices this backend finds, or an error saying why there
	// are none ("not built with -tags cuda", "no driver", "not darwin").
	Open func(opts Options) ([]Device, error)
}

// Options configure discovery.
type Options struct {
	Threads int // CPU worker threads per CPU device; 0: all cores
	// CPUs is how many separate CPU devices to make ("cpu", "cpu:1", ...), each
	// with its own buffers and worker pool, so that copies between them are
	// real; 0 or 1 means one.
	CPUs int
	// CoreMLUnits is the compute units CoreML models may use (a policy's
	// coreml_units); "" is the CoreML device's default.
	CoreMLUnits string
}

var (
	mu       sync.Mutex
	backends = map[string]Backend{}
)

// Register makes a backend available to Discover. It panics if the kind is
// registered twice (a programming error).
func Register(b Backend) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := backends[b.Kind]; dup {
		panic("devices: backend " + b.Kind + " registered twice")
	}
	backends[b.Kind] = b
}

// Missing is a kind of device that is not available, and why.
type Missing struct {
	Kind string
	Why  string
}

// Discover opens every registered backend and returns the devices found,
// sorted by name, and the kinds that are missing with the reason.
func Discover(opts Options) ([]Device, []Missing) {
	mu.Lock()
	var bs []Backend
	for _, b := range backends {
		bs = append(bs, b)
	}
	mu.Unlock()
	sort.Slice(bs, func(i, j int) bool { return bs[i].Kind < bs[j].Kind })
	var devs []Device
	var missing []Missing
	for _, b := range bs {
		ds, err := b.Open(opts)
		if err != nil {
			missing = append(missing, Missing{Kind: b.Kind, Why: err.Error()})
			continue
		}
		devs = append(devs, ds...)
	}
	sort.Slice(devs, func(i, j int) bool { return devs[i].Name() < devs[j].Name() })
	return devs, missing
}

var hints []func(ref string) string

// RegisterNameHint adds an explanation of device names that discovery does
// not find: a package whose devices come from elsewhere (simulated devices,
// from a hardware profile) says where. It is called from init.
func RegisterNameHint(h func(ref string) string) {
	mu.Lock()
	defer mu.Unlock()
	hints = append(hints, h)
}

// NameHint says where devices named like ref come from, when a registered
// package knows; "" otherwise.
func NameHint(ref string) string {
	mu.Lock()
	hs := hints
	mu.Unlock()
	for _, h := range hs {
		if s := h(ref); s != "" {
			return s
		}
	}
	return ""
}

// ErrNotAvailable is wrapped by backends' errors when their hardware or
// build support is absent.
var ErrNotAvailable = fmt.Errorf("not available")

// A Setting is an option for one kind of device that a policy file may give
// as a top-level key (coreml_units). The device's package registers it from
// init, on every system, and checks its values; the policy only passes them
// on.
type Setting struct {
	Key string
	Doc string // one line: what it sets, and its values
	// Check returns an error saying what is wanted when value is not one
	// (nil: any value will do).
	Check func(value string) error
}

var settings = map[string]Setting{}

// RegisterSetting makes a device setting known to policies. It panics if
// the key is registered twice (a programming error).
func RegisterSetting(s Setting) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := settings[s.Key]; dup || s.Key == "" {
		panic("devices: setting " + s.Key + " registered twice or without a key")
	}
	settings[s.Key] = s
}

// Settings returns the registered settings, by key.
func Settings() []Setting {
	mu.Lock()
	defer mu.Unlock()
	out := make([]Setting, 0, len(settings))
	for _, s := range settings {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// CheckSetting checks a value of the setting key with the package that
// registered it.
func CheckSetting(key, value string) error {
	mu.Lock()
	s, ok := settings[key]
	mu.Unlock()
	switch {
	case !ok:
		return fmt.Errorf("no device setting %q is registered", key)
	case s.Check == nil:
		return nil
	}
	return s.Check(value)
}
