package sim

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"hybrid/ops"
	"hybrid/quant"
)

// TestNumbersBounded: every number of a profile is finite and in its range
// (bounds), or an error at its line. Before, .nan and .inf passed every
// check ("v <= 0" is false for NaN), as did 1e300 and 1e-300, and
// predictions overflowed a time.Duration.
func TestNumbersBounded(t *testing.T) {
	type bad struct{ value, has string }
	notFinite := []bad{{".nan", `".nan" is not a finite number`}, {".inf", `".inf" is not a finite number`}, {"-.inf", `"-.inf" is not a finite number`}}
	cases := []struct {
		key   string
		line  int
		text  func(v string) string // good with the key set to v
		extra []bad
	}{
		{"memory_gb", 6, func(v string) string { return edit(6, "    memory_gb: "+v) },
			[]bad{{"-1", "memory_gb must be > 0"}, {"0", "memory_gb must be > 0"}, {"1e-9", "memory_gb is 1e-09, below 1e-06 GB"}, {"2e6", "memory_gb is 2e+06, above 1e+06 GB"}}},
		{"bandwidth_gbs", 7, func(v string) string { return edit(7, "    bandwidth_gbs: "+v) },
			[]bad{{"-1", "bandwidth_gbs must be > 0"}, {"1e-300", "bandwidth_gbs is 1e-300, below 0.001 GB/s"}, {"1e300", "bandwidth_gbs is 1e+300, above 1e+06 GB/s"}}},
		{"tflops", 8, func(v string) string { return edit(8, "    tflops: "+v) },
			[]bad{{"-1", "tflops must be > 0"}, {"0.0001", "tflops is 0.0001, below 0.001 TFLOP/s"}, {"1e7", "tflops is 1e+07, above 1e+06 TFLOP/s"}}},
		{"launch_us", 9, func(v string) string { return edit(9, "    launch_us: "+v) },
			[]bad{{"-1", "launch_us must be >= 0"}, {"1e18", "launch_us is 1e+18, above 1e+06 µs"}}},
		{"efficiency", 10, func(v string) string { return edit(9, "    launch_us: 5\n    efficiency: {mat_mul/q4_0: "+v+"}") },
			[]bad{{"-1", "efficiency of mat_mul/q4_0 is -1, want a fraction in (0, 1]"}, {"1e-9", "efficiency of mat_mul/q4_0 is 1e-09, below 0.001"}}},
		{"compute_efficiency", 11, func(v string) string {
			return edit(9, "    launch_us: 5\n    compute_efficiency:\n      mat_mul: "+v)
		}, []bad{{"-1", "compute_efficiency of mat_mul is -1, want a fraction in (0, 1]"}, {"1.5", "want a fraction in (0, 1]"}, {"1e-300", "below 0.001"}}},
		{"link latency_us", 17, func(v string) string {
			return edit(17, "  - {from: cpu, to: gpu, latency_us: "+v+", bandwidth_gbs: 20}")
		}, []bad{{"-1", "link cpu -> gpu: latency_us must be given and >= 0"}, {"1e8", "link cpu -> gpu: latency_us is 1e+08, above 1e+07 µs"}}},
		{"link bandwidth_gbs", 19, func(v string) string {
			return edit(17, "  - from: cpu\n    to: gpu\n    bandwidth_gbs: "+v+"\n    latency_us: 10")
		}, []bad{{"-1", "link cpu -> gpu: bandwidth_gbs must be > 0"}, {"1e-5", "link cpu -> gpu: bandwidth_gbs is 1e-05, below 0.001 GB/s"}, {"1e9", "above 1e+06 GB/s"}}},
	}
	for _, c := range cases {
		for _, b := range append(notFinite, c.extra...) {
			t.Run(c.key+"="+b.value, func(t *testing.T) {
				_, err := ParseHardware([]byte(c.text(b.value)), "x.yaml")
				var pe *ParseError
				if !errors.As(err, &pe) || pe.Path != "x.yaml" || pe.Line != c.line || !strings.Contains(pe.Msg, b.has) {
					t.Fatalf("error %v; want x.yaml:%d: ...%s...", err, c.line, b.has)
				}
			})
		}
		// The same line with a number in range is accepted.
		if _, err := ParseHardware([]byte(c.text("0.5")), "x.yaml"); err != nil {
			t.Errorf("%s: 0.5: %v", c.key, err)
		}
	}
}

// TestBoundsKeepTimesInRange: a profile with every number at the end of its
// range that makes times largest still models an op of 100 GB and 1e15
// FLOPs, and a copy of 100 GB, as a positive time, not one wrapped around a
// time.Duration.
func TestBoundsKeepTimesInRange(t *testing.T) {
	text := `name: slow
source: the ends of the ranges
devices:
  - {name: a, kind: cpu, memory_gb: 0.000001, bandwidth_gbs: 0.001, tflops: 0.001, launch_us: 1000000,
     efficiency: {mat_mul: 0.001}, compute_efficiency: {mat_mul: 0.001}}
  - {name: b, kind: cuda, memory_gb: 999999, bandwidth_gbs: 1000000, tflops: 1000000, launch_us: 0}
links:
  - {from: a, to: b, latency_us: 10000000, bandwidth_gbs: 0.001}
`
	hw, err := ParseHardware([]byte(text), "slow.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checkHardware(t, hw)
	if hw.Devices[0].memoryBytes() <= 0 {
		t.Errorf("memory_gb 1e-6 is %d bytes, which a device reads as no limit", hw.Devices[0].memoryBytes())
	}
}

// checkHardware fails t unless every number of hw is finite and in its
// range, and the times it models for large ops and copies are positive.
func checkHardware(t *testing.T, hw *Hardware) {
	t.Helper()
	in := func(what string, v, lo, hi float64, open bool) {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < lo || v > hi || (open && v <= lo) {
			t.Errorf("%s is %g, out of range", what, v)
		}
	}
	big := []*ops.Op{
		{Kind: ops.MatMul, Weight: &ops.Weight{Type: quant.Q4_0, Rows: 1 << 16, Cols: 1 << 16}, Cost: ops.Cost{FLOPs: 1e15, BytesRead: 1e11, BytesWritten: 1e9}},
		{Kind: ops.Add, Cost: ops.Cost{BytesRead: 1e11, BytesWritten: 1e11}},
		{Kind: ops.Attention, Cost: ops.Cost{FLOPs: 1e15, BytesRead: 1e10}},
	}
	for _, s := range hw.Devices {
		in(s.Name+" memory_gb", s.MemoryGB, 1e-6, 1e6, false)
		in(s.Name+" bandwidth_gbs", s.BandwidthGBs, 1e-3, 1e6, false)
		in(s.Name+" tflops", s.TFLOPS, 1e-3, 1e6, false)
		in(s.Name+" launch_us", s.LaunchUS, 0, 1e6, false)
		for _, effs := range []map[ops.Kind]float64{s.Efficiency, s.ComputeEfficiency} {
			for k, e := range effs {
				in(fmt.Sprint(s.Name, " efficiency of ", k), e, 1e-3, 1, false)
			}
		}
		for _, effs := range []map[ops.Kind]map[quant.Type]float64{s.WeightEfficiency, s.WeightComputeEfficiency} {
			for k, m := range effs {
				for typ, e := range m {
					in(fmt.Sprint(s.Name, " efficiency of ", k, "/", typ), e, 1e-3, 1, false)
				}
			}
		}
		for _, op := range big {
			if d := s.OpTime(op); d <= 0 {
				t.Errorf("%s: %s of %d bytes, %d FLOPs takes %v", s.Name, op.Kind, op.Cost.BytesRead, op.Cost.FLOPs, d)
			}
		}
	}
	for _, l := range hw.Links {
		in(l.From+" -> "+l.To+" latency_us", l.LatencyUS, 0, 1e7, false)
		in(l.From+" -> "+l.To+" bandwidth_gbs", l.BandwidthGBs, 1e-3, 1e6, false)
		if d, err := hw.CopyTime(l.From, l.To, 1e11); err != nil || d <= 0 {
			t.Errorf("copy of 100 GB %s -> %s: %v, %v", l.From, l.To, d, err)
		}
	}
}
