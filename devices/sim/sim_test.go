package sim

import (
	"io/fs"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"hybrid/configs"
	"hybrid/devices"
	"hybrid/devices/cpu"
	"hybrid/models/quant"
	"hybrid/ops"
)

func TestShippedProfilesParse(t *testing.T) {
	ents, err := fs.ReadDir(configs.FS, "hardware")
	if err != nil || len(ents) < 4 {
		t.Fatalf("hardware profiles: %v (%d)", err, len(ents))
	}
	for _, e := range ents {
		name := strings.TrimSuffix(e.Name(), ".yaml")
		hw, err := LoadHardware(name)
		if err != nil {
			t.Fatal(err)
		}
		if hw.Source == "" {
			t.Errorf("%s has no source for its numbers", name)
		}
		for _, a := range hw.Devices {
			for _, b := range hw.Devices {
				if _, err := hw.CopyTime(a.Name, b.Name, 1024); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
		}
	}
}

func TestBadProfilesNameFileAndLine(t *testing.T) {
	good := "name: x\nsource: s\ndevices:\n  - name: gpu\n    kind: cuda\n    memory_gb: 8\n    bandwidth_gbs: 100\n    tflops: 10\n"
	cases := []struct{ name, text, want string }{
		{"unknown key", good + "    bandwith_gbs: 3\n", "x.yaml:9:"},
		{"bad kind", strings.Replace(good, "kind: cuda", "kind: tpu", 1), "x.yaml:5:"},
		{"zero bandwidth", strings.Replace(good, "bandwidth_gbs: 100", "bandwidth_gbs: 0", 1), "x.yaml:4:"},
		{"unknown op kind", good + "    efficiency: {matmul: 0.5}\n", "x.yaml:9:"},
		{"bad efficiency", good + "    efficiency: {mat_mul: 1.5}\n", "x.yaml:9:"},
		{"link to nowhere", good + "links:\n  - {from: gpu, to: cpu, latency_us: 1, bandwidth_gbs: 1}\n", "x.yaml:10:"},
		{"duplicate device", good + "  - name: gpu\n    kind: cpu\n    memory_gb: 1\n    bandwidth_gbs: 1\n    tflops: 1\n", "x.yaml:9:"},
		{"malformed", "name: [x\n", "x.yaml:"},
		{"empty", "", "x.yaml:1:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseHardware([]byte(c.text), "x.yaml")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// TestOpTimeByHand checks the roofline on a mat-mul and an add.
func TestOpTimeByHand(t *testing.T) {
	s := &Spec{Name: "g", Kind: "cuda", BandwidthGBs: 100, TFLOPS: 10, LaunchUS: 5, Efficiency: map[ops.Kind]float64{ops.MatMul: 0.5}}
	mm := &ops.Op{Kind: ops.MatMul, Cost: ops.Cost{FLOPs: 2e9, BytesRead: 1e8, BytesWritten: 1e6}}
	// memory: 1.01e8 / (100e9 * 0.5) = 2.02 ms; compute: 2e9 / (10e12 * 0.5) = 0.4 ms.
	if got, want := s.OpTime(mm), 5*time.Microsecond+2020*time.Microsecond; got != want {
		t.Fatalf("mat_mul: %v, want %v", got, want)
	}
	add := &ops.Op{Kind: ops.Add, Cost: ops.Cost{FLOPs: 1000, BytesRead: 8000, BytesWritten: 4000}}
	// default efficiency 0.5: 12000 / 50e9 = 0.24 µs.
	if got, want := s.OpTime(add), 5*time.Microsecond+240*time.Nanosecond; got != want {
		t.Fatalf("add: %v, want %v", got, want)
	}
	s.FP16 = true // plus 12000 bytes at 100 GB/s = 0.12 µs
	if got, want := s.OpTime(add), 5*time.Microsecond+360*time.Nanosecond; got-want > time.Nanosecond || want-got > time.Nanosecond {
		t.Fatalf("fp16 add: %v, want %v", got, want)
	}
	hw := &Hardware{Name: "h", Devices: []*Spec{s, {Name: "c"}}, Links: []Link{{From: "c", To: "g", LatencyUS: 10, BandwidthGBs: 1}}}
	for _, d := range [][2]string{{"c", "g"}, {"g", "c"}} {
		if got, err := hw.CopyTime(d[0], d[1], 1000); err != nil || got != 11*time.Microsecond {
			t.Fatalf("copy %v: %v %v, want 11µs", d, got, err)
		}
	}
}

// TestSimComputesLikeTheCPU runs ops on a simulated device and on the CPU:
// outputs must be bit-identical, and the sim must say it is simulated and
// charge its model's time.
func TestSimComputesLikeTheCPU(t *testing.T) {
	hw, err := LoadHardware("m4-pro")
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := hw.Spec("metal")
	sd := New(spec, hw, 1)
	cd := cpu.New("cpu", 1)
	if !sd.Info().Simulated || !strings.Contains(sd.Info().Detail, "SIMULATED") {
		t.Fatalf("info %+v does not say simulated", sd.Info())
	}
	r := rand.New(rand.NewPCG(1, 2))
	const rows, cols = 48, 64
	wf := make([]float32, rows*cols)
	for i := range wf {
		wf[i] = float32(r.NormFloat64())
	}
	raw := make([]byte, rows*34*cols/32)
	if err := quant.Quantize(quant.Q8_0, wf, raw); err != nil {
		t.Fatal(err)
	}
	w := &ops.Weight{Name: "w", Type: quant.Q8_0, Rows: rows, Cols: cols}
	op := &ops.Op{Kind: ops.MatMul, Name: "mm", Weight: w, Cost: ops.Cost{FLOPs: 2 * rows * cols, BytesRead: int64(len(raw))}}
	x := make([]float32, 2*cols)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	outs := map[string][]float32{}
	for _, d := range []devices.Device{sd, cd} {
		if err := d.LoadWeight(w, raw); err != nil {
			t.Fatal(err)
		}
		in, _ := d.Alloc(len(x))
		out, _ := d.Alloc(2 * rows)
		if err := d.Write(in, x); err != nil {
			t.Fatal(err)
		}
		if err := d.Run(op, ops.Step{Tokens: make([]int32, 2)}, []devices.Buffer{in}, out); err != nil {
			t.Fatal(err)
		}
		y := make([]float32, 2*rows)
		if err := d.Read(y, out); err != nil {
			t.Fatal(err)
		}
		outs[d.Name()] = y
	}
	for i := range outs["cpu"] {
		if math.Float32bits(outs["cpu"][i]) != math.Float32bits(outs["sim:metal"][i]) {
			t.Fatalf("output %d: sim %g, cpu %g", i, outs["sim:metal"][i], outs["cpu"][i])
		}
	}
	if got := sd.OpTime(op, ops.Step{}); got != spec.OpTime(op) || got <= 0 {
		t.Fatalf("charged %v, model %v", got, spec.OpTime(op))
	}
	coreml, _ := hw.Spec("coreml")
	if err := New(coreml, hw, 1).Supports(&ops.Op{Kind: ops.Attention, Name: "a"}); err == nil {
		t.Fatal("the simulated Neural Engine accepted attention, which its profile excludes")
	}
}
