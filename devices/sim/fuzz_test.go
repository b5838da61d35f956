package sim

import (
	"io/fs"
	"testing"

	"hybrid/configs"
)

// FuzzHardware: ParseHardware never panics, and a profile it accepts has
// every number finite and in its range, and models large ops and copies as
// positive times (checkHardware). Seeded with the shipped profiles and a
// few that are wrong in a number.
func FuzzHardware(f *testing.F) {
	ents, err := fs.ReadDir(configs.FS, builtinDir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range ents {
		b, err := fs.ReadFile(configs.FS, builtinDir+"/"+e.Name())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		good,
		edit(8, "    tflops: .nan"),
		edit(7, "    bandwidth_gbs: -.inf"),
		edit(6, "    memory_gb: 1e-300"),
		edit(9, "    launch_us: 5\n    efficiency: {mat_mul/q4_0: 0.5, add: 1e-300}"),
		edit(17, "  - {from: cpu, to: gpu, latency_us: 1e300, bandwidth_gbs: 20, oneway: true}"),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		hw, err := ParseHardware(data, "fuzz.yaml")
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("%T %v is not a *ParseError", err, err)
			}
			return
		}
		checkHardware(t, hw)
	})
}
