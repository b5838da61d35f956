package planner

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"hybrid/configs"
)

// FuzzProfile: ParseProfile never panics, and a profile it accepts has
// every number finite and in its range (checkProfile). Seeded with what
// Save writes, the hand-written goodProfile and a few bad ones.
func FuzzProfile(f *testing.F) {
	saved := filepath.Join(f.TempDir(), "saved.yaml")
	p := &Profile{Model: "m", Taken: "2025-01-01T00:00:00Z", Devices: map[string]*DeviceProfile{
		"cpu | 16 cores": {Ops: map[string]float64{"mat_mul q8_0 64x64 n1": 12.5, "add io256 n1": 0.25, "attention h4/2 d16 n8": 3},
			Copies: map[string]CopyFit{"cpu:1 | 16 cores": {LatencyUS: 3, BandwidthGBs: 12}}},
		"cpu:1 | 16 cores": {Ops: map[string]float64{"rms_norm f32 1x64 n1": 0.5}},
	}}
	if err := p.Save(saved); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(saved)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	for _, s := range []string{
		goodProfile,
		editProfile(7, `      "add io256 n1": .nan`),
		editProfile(11, "        latency_us: -1"),
		editProfile(12, "        bandwidth_gbs: 1e-300"),
		editProfile(7, `      "add io256 n0": 1`),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProfile(data, "fuzz.yaml")
		if err != nil {
			if _, ok := err.(*configs.Error); !ok {
				t.Fatalf("%T %v is not a *configs.Error", err, err)
			}
			return
		}
		checkProfile(t, p)
	})
}

// FuzzPolicy: ParsePolicy never panics, and a policy it accepts has its
// numbers in range: memory caps of 1 byte to 1 PiB or auto, layer sets within
// polMaxLayer with steps of at least 1, lines within the file. Seeded with
// the shipped policies and the bad ones in testdata.
func FuzzPolicy(f *testing.F) {
	for _, dir := range []fs.FS{configs.FS, os.DirFS("testdata")} {
		names, err := fs.Glob(dir, "policies/*.yaml")
		if err != nil {
			f.Fatal(err)
		}
		for _, n := range names {
			b, err := fs.ReadFile(dir, n)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte("memory:\n  cpu: 1.5GB\n  metal: 999999TiB\nrules:\n  - {ops: [mat_mul], layers: \"0-21/2,none\", device: cpu}\n"))
	f.Add([]byte("memory:\n  cuda: auto\n  \"cuda:1\": 40GiB\nrules:\n  - {layers: \"0-3\", device: \"cuda:0\"}\n  - {layers: \"4-1000\", device: \"cuda:1\"}\n"))
	f.Add([]byte("memory: {\"cuda:0\": auto, \"cuda:1\": Auto}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(data, "fuzz.yaml")
		if err != nil {
			if _, ok := err.(*configs.Error); !ok {
				t.Fatalf("%T %v is not a *configs.Error", err, err)
			}
			return
		}
		// YAML breaks lines at \r, NEL and LS too: a file of n bytes has at
		// most n+1 lines.
		lines := len(data) + 1
		for ref, n := range p.Memory {
			if n < 1 || n > 1<<50 {
				t.Errorf("memory cap of %s: %d bytes", ref, n)
			}
			if l := p.lines.memory[ref]; l < 1 || l > lines {
				t.Errorf("memory cap of %s: line %d of %d", ref, l, lines)
			}
			if p.MemoryAuto[ref] {
				t.Errorf("memory cap of %s is both %d bytes and auto", ref, n)
			}
		}
		// An auto cap is a reference of the file, with its line.
		for ref := range p.MemoryAuto {
			if err := polCheckRef(ref); err != nil {
				t.Errorf("auto cap: %v", err)
			}
			if l := p.lines.memory[ref]; l < 1 || l > lines {
				t.Errorf("auto cap of %s: line %d of %d", ref, l, lines)
			}
		}
		for _, r := range p.Rules {
			if r.Line < 1 || r.Line > lines {
				t.Errorf("rule at line %d of %d", r.Line, lines)
			}
			for _, sp := range r.Layers.spans {
				if sp.from < 0 || sp.to < sp.from || sp.to > polMaxLayer || sp.step < 1 {
					t.Errorf("layers %q: span %+v", r.Layers, sp)
				}
			}
		}
		if p.Transfers != "boundary" && p.Transfers != "per-op" {
			t.Errorf("transfers %q", p.Transfers)
		}
	})
}
