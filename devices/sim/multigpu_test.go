package sim

import (
	"maps"
	"strings"
	"testing"
	"time"

	"hybrid/devices"
)

// TestTwoGPUProfiles: the two-H100 profiles open as two simulated CUDA
// devices named as the CUDA backend names its GPUs (sim:cuda:0, sim:cuda:1)
// and the host CPU; each GPU and the CPU are h100-sxm's, number for number;
// each GPU's host link is h100-sxm's; and the link between the GPUs is
// NVLink's in one profile and PCIe's in the other, priced between the two
// simulated devices in both directions.
func TestTwoGPUProfiles(t *testing.T) {
	one, err := LoadHardware("h100-sxm")
	if err != nil {
		t.Fatal(err)
	}
	gpu, _ := one.Spec("cuda")
	host, _ := one.Spec("cpu")
	hostLink, _ := one.link("cpu", "cuda")
	for _, c := range []struct {
		name             string
		latencyUS, gbs   float64
		peer8KB, peer4MB time.Duration
	}{
		// 8 µs + 8192 B / 387 GB/s; 8 µs + 4 MiB / 387 GB/s.
		{"2xh100-nvlink", 8, 387, 8*time.Microsecond + 21*time.Nanosecond, 8*time.Microsecond + 10838*time.Nanosecond},
		// 9 µs + 8192 B / 50 GB/s; 9 µs + 4 MiB / 50 GB/s.
		{"2xh100-pcie", 9, 50, 9*time.Microsecond + 164*time.Nanosecond, 9*time.Microsecond + 83886*time.Nanosecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			hw, err := LoadHardware(c.name)
			if err != nil {
				t.Fatal(err)
			}
			devs := Open(hw, 1)
			defer func() {
				for _, d := range devs {
					d.Close()
				}
			}()
			var names []string
			infos := map[string]devices.Info{}
			for _, d := range devs {
				names = append(names, d.Name())
				infos[d.Name()] = d.Info()
			}
			if got := strings.Join(names, ","); got != "sim:cuda:0,sim:cuda:1,sim:cpu" {
				t.Fatalf("devices %s, want sim:cuda:0,sim:cuda:1,sim:cpu", got)
			}
			for _, n := range []string{"cuda:0", "cuda:1"} {
				s, _ := hw.Spec(n)
				if !sameSpec(s, gpu) {
					t.Errorf("%s is not h100-sxm's GPU: %+v", n, s)
				}
				if in := infos["sim:"+n]; in.Kind != "cuda" || !in.Simulated || in.Memory != gpu.memoryBytes() || in.Free != 0 {
					t.Errorf("%s: info %+v", n, in)
				}
				if l, ok := hw.link("cpu", n); !ok || l.LatencyUS != hostLink.LatencyUS || l.BandwidthGBs != hostLink.BandwidthGBs {
					t.Errorf("cpu -> %s: %+v, want h100-sxm's %+v", n, l, hostLink)
				}
			}
			if s, _ := hw.Spec("cpu"); !sameSpec(s, host) {
				t.Errorf("the CPU is not h100-sxm's: %+v", s)
			}
			l, ok := hw.link("cuda:1", "cuda:0")
			if !ok || l.LatencyUS != c.latencyUS || l.BandwidthGBs != c.gbs {
				t.Fatalf("cuda:1 -> cuda:0: %+v, want %g µs and %g GB/s", l, c.latencyUS, c.gbs)
			}
			// Priced by either simulated device, in both directions; a
			// device that is not the profile's (the host) stands for its
			// CPU.
			g0, g1 := devs[0].(*Device), devs[1].(*Device)
			for _, pair := range []struct {
				by       *Device
				from, to devices.Info
				bytes    int64
				want     time.Duration
			}{
				{g0, infos["sim:cuda:0"], infos["sim:cuda:1"], 8192, c.peer8KB},
				{g1, infos["sim:cuda:0"], infos["sim:cuda:1"], 8192, c.peer8KB},
				{g0, infos["sim:cuda:1"], infos["sim:cuda:0"], 4 << 20, c.peer4MB},
				{g1, devices.Host, infos["sim:cuda:1"], 8192, 7500*time.Nanosecond + 152*time.Nanosecond},
			} {
				got, ok := pair.by.CopyTime(pair.from, pair.to, pair.bytes)
				if !ok || got != pair.want {
					t.Errorf("%s prices %s -> %s of %d bytes at %v (%v), want %v", pair.by.Name(), pair.from.Name, pair.to.Name, pair.bytes, got, ok, pair.want)
				}
			}
		})
	}
	nv, _ := LoadHardware("2xh100-nvlink")
	pc, _ := LoadHardware("2xh100-pcie")
	a, _ := nv.CopyTime("cuda:0", "cuda:1", 4<<20)
	b, _ := pc.CopyTime("cuda:0", "cuda:1", 4<<20)
	if a >= b {
		t.Fatalf("a 4 MiB peer copy takes %v over NVLink, %v over PCIe", a, b)
	}
}

// sameSpec reports whether two specs model the same hardware (names aside).
func sameSpec(a, b *Spec) bool {
	return a.Kind == b.Kind && a.MemoryGB == b.MemoryGB && a.FreeGB == b.FreeGB && a.BandwidthGBs == b.BandwidthGBs &&
		a.TFLOPS == b.TFLOPS && a.LaunchUS == b.LaunchUS && a.FP16 == b.FP16 && a.KVBytes == b.KVBytes &&
		maps.Equal(a.Efficiency, b.Efficiency) && maps.Equal(a.ComputeEfficiency, b.ComputeEfficiency) &&
		maps.EqualFunc(a.WeightEfficiency, b.WeightEfficiency, maps.Equal) &&
		maps.EqualFunc(a.WeightComputeEfficiency, b.WeightComputeEfficiency, maps.Equal) &&
		maps.Equal(a.Unsupported, b.Unsupported)
}

// TestFreeMemory: a device's free_gb is its Info.Free, and it holds no more
// than that (another process holds the rest); without free_gb, Free is 0
// (unknown) and the device holds its whole memory.
func TestFreeMemory(t *testing.T) {
	hw, err := ParseHardware([]byte(`name: shared
source: a test host
devices:
  - {name: "cuda:0", kind: cuda, memory_gb: 0.001, free_gb: 0.0005, bandwidth_gbs: 100, tflops: 1, launch_us: 1}
  - {name: "cuda:1", kind: cuda, memory_gb: 0.001, bandwidth_gbs: 100, tflops: 1, launch_us: 1}
`), "shared.yaml")
	if err != nil {
		t.Fatal(err)
	}
	devs := Open(hw, 1)
	defer devs[0].Close()
	defer devs[1].Close()
	if in := devs[0].Info(); in.Memory != 1073741 || in.Free != 536870 {
		t.Fatalf("sim:cuda:0: memory %d, free %d", in.Memory, in.Free)
	}
	if in := devs[1].Info(); in.Free != 0 {
		t.Fatalf("sim:cuda:1 without free_gb: free %d, want 0 (unknown)", in.Free)
	}
	// 0.0005 GB (of 2^30 bytes) is 536870 bytes: 100000 floats fit, 140000
	// do not.
	if _, err := devs[0].Alloc(100000); err != nil {
		t.Fatal(err)
	}
	if _, err := devs[0].Alloc(40000); err == nil || !strings.Contains(err.Error(), "gives cuda:0 0.0005 GB free of 0.001 GB") {
		t.Fatalf("allocation past the free memory: %v", err)
	}
	if _, err := devs[1].Alloc(200000); err != nil { // 0.8 MB of its 1 MB
		t.Fatalf("a device without free_gb holds its whole memory: %v", err)
	}
}
