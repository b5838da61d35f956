package sim

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"hybrid/devices"
	"hybrid/devices/cpu"
	"hybrid/ops"
	"hybrid/quant"
)

func TestShippedProfilesParse(t *testing.T) {
	names := Builtins()
	for _, want := range []string{"cpu-2core", "h100-pcie", "h100-sxm", "m4-pro"} {
		if !slices.Contains(names, want) {
			t.Errorf("built-in profiles %v lack %s", names, want)
		}
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			hw, err := LoadHardware(name)
			if err != nil {
				t.Fatal(err)
			}
			// The file in the tree parses the same as the embedded copy.
			path := filepath.Join("..", "..", "configs", "hardware", name+".yaml")
			if _, err := LoadHardware(path); err != nil {
				t.Fatal(err)
			}
			if hw.Path != "configs/hardware/"+name+".yaml" {
				t.Errorf("path %q", hw.Path)
			}
			// Every pair of devices can exchange values.
			for _, a := range hw.Devices {
				for _, b := range hw.Devices {
					if _, err := hw.CopyTime(a.Name, b.Name, 1024); err != nil {
						t.Error(err)
					}
				}
			}
			// Every device can run a whole graph somewhere: each kind runs
			// on at least one device.
			for _, k := range ops.Kinds() {
				ok := false
				for _, s := range hw.Devices {
					ok = ok || !s.Unsupported[k]
				}
				if !ok {
					t.Errorf("no device runs %s", k)
				}
			}
		})
	}
	if _, err := LoadHardware("m5-ultra"); err == nil || !strings.Contains(err.Error(), "m4-pro") {
		t.Errorf("unknown built-in: %v, want the list of built-in ones", err)
	}
	if _, err := LoadHardware("no/such.yaml"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// good is a valid profile; each bad case edits one line of it. Line numbers:
//
//	1 name   4 gpu   10 cpu   16 links   17 the link
const good = `name: x
source: s
devices:
  - name: gpu
    kind: cuda
    memory_gb: 8
    bandwidth_gbs: 100
    tflops: 10
    launch_us: 5
  - name: cpu
    kind: cpu
    memory_gb: 16
    bandwidth_gbs: 50
    tflops: 1
    launch_us: 2
links:
  - {from: cpu, to: gpu, latency_us: 10, bandwidth_gbs: 20}
`

// edit replaces line n (1-based) of good by repl, which may hold several
// lines or none.
func edit(n int, repl string) string {
	lines := strings.Split(good, "\n")
	var out []string
	out = append(out, lines[:n-1]...)
	if repl != "" {
		out = append(out, repl)
	}
	out = append(out, lines[n:]...)
	return strings.Join(out, "\n")
}

func TestBadProfilesNameFileAndLine(t *testing.T) {
	if _, err := ParseHardware([]byte(good), "x.yaml"); err != nil {
		t.Fatalf("the base profile: %v", err)
	}
	const kindList = "embed, rms_norm, mat_mul, rope, attention, silu_mul, add, last_row, add_bias"
	cases := []struct{ name, text, want string }{
		{"unknown key", edit(7, "    bandwith_gbs: 100"),
			`x.yaml:7: unknown key "bandwith_gbs" in devices[0] (known: name, kind, memory_gb, free_gb, bandwidth_gbs, tflops, launch_us, fp16, kv_cache, efficiency, compute_efficiency, unsupported)`},
		{"unknown top-level key", edit(16, "link:"), `x.yaml:16: unknown key "link" in the profile (known: name, source, devices, links)`},
		{"key twice", edit(9, "    launch_us: 5\n    tflops: 11"), `x.yaml:10: key "tflops" given twice in devices[0] (first at line 8)`},
		{"not a number", edit(7, "    bandwidth_gbs: fast"), `x.yaml:7: bandwidth_gbs: "fast" is not a number`},
		{"not a boolean", edit(9, "    launch_us: 5\n    fp16: maybe"), `x.yaml:10: fp16: "maybe" is not a boolean (true or false)`},
		{"zero bandwidth", edit(7, "    bandwidth_gbs: 0"), `x.yaml:7: device "gpu": bandwidth_gbs must be > 0`},
		{"negative launch", edit(9, "    launch_us: -1"), `x.yaml:9: device "gpu": launch_us must be >= 0`},
		{"missing tflops", edit(8, ""), `x.yaml:4: device "gpu": tflops is missing`},
		{"missing launch", edit(9, ""), `x.yaml:4: device "gpu": launch_us is missing`},
		{"bad kind", edit(5, "    kind: tpu"), `x.yaml:5: device "gpu": kind "tpu" is not one of cpu, cuda, metal, coreml`},
		{"bad device name", edit(4, "  - name: Big GPU"), `x.yaml:4: device name "Big GPU": want lower-case letters, digits, '-' or '_', starting with a letter, optionally followed by ':'-separated parts (cuda:1)`},
		{"empty name part", edit(4, `  - name: "cuda:"`), `x.yaml:4: device name "cuda:": want lower-case letters, digits, '-' or '_', starting with a letter, optionally followed by ':'-separated parts (cuda:1)`},
		{"free over memory", edit(6, "    memory_gb: 8\n    free_gb: 9"), `x.yaml:7: device "gpu": free_gb 9 is more than memory_gb 8`},
		{"free zero", edit(6, "    memory_gb: 8\n    free_gb: 0"), `x.yaml:7: device "gpu": free_gb must be > 0`},
		{"duplicate device", edit(10, "  - name: gpu"), `x.yaml:10: device "gpu" is listed twice (first at line 4)`},
		{"unknown op kind", edit(9, "    launch_us: 5\n    efficiency: {matmul: 0.5}"),
			`x.yaml:10: device "gpu": efficiency: unknown op kind "matmul" (known: ` + kindList + `)`},
		{"efficiency out of range", edit(9, "    launch_us: 5\n    efficiency:\n      add: 0.5\n      mat_mul: 1.5"),
			`x.yaml:12: device "gpu": efficiency of mat_mul is 1.5, want a fraction in (0, 1]`},
		{"unknown weight type", edit(9, "    launch_us: 5\n    efficiency: {mat_mul/q3_0: 0.5}"),
			`x.yaml:10: device "gpu": efficiency: unknown weight type "q3_0" in "mat_mul/q3_0"`},
		{"weight type of a weightless kind", edit(9, "    launch_us: 5\n    efficiency: {add/q4_0: 0.5}"),
			`x.yaml:10: device "gpu": efficiency: add ops have no weight, so "add/q4_0" cannot name a weight type`},
		{"compute efficiency out of range", edit(9, "    launch_us: 5\n    compute_efficiency: {mat_mul/q4_0: 0}"),
			`x.yaml:10: device "gpu": compute_efficiency of mat_mul/q4_0 is 0, want a fraction in (0, 1]`},
		{"unsupported unknown kind", edit(9, "    launch_us: 5\n    unsupported:\n      - embed\n      - matmul"),
			`x.yaml:12: device "gpu": unsupported: unknown op kind "matmul" (known: ` + kindList + `)`},
		{"link to nowhere", edit(17, "  - {from: cpu, to: tpu, latency_us: 10, bandwidth_gbs: 20}"),
			`x.yaml:17: link to: "tpu" is not a device of this profile (have cpu, gpu)`},
		{"link to itself", edit(17, "  - {from: cpu, to: cpu, latency_us: 10, bandwidth_gbs: 20}"),
			`x.yaml:17: link from "cpu" to itself (a copy within a device is free)`},
		{"link without bandwidth", edit(17, "  - {from: cpu, to: gpu, latency_us: 10}"),
			`x.yaml:17: link cpu -> gpu: bandwidth_gbs must be > 0`},
		{"second link", good + "  - {from: gpu, to: cpu, latency_us: 1, bandwidth_gbs: 1}\n",
			`x.yaml:18: a second link from gpu to cpu (first at line 17)`},
		{"no source", edit(2, ""), `x.yaml:1: profile "x" needs a source: where its numbers come from`},
		{"no devices", "name: x\nsource: s\ndevices: []\n", `x.yaml:3: profile "x" lists no devices`},
		{"devices not a list", "name: x\nsource: s\ndevices: 3\n", `x.yaml:3: devices must be a list`},
		{"two documents", good + "---\nname: y\n", `x.yaml:18: a second YAML document: a profile is one document`},
		{"empty", "", `x.yaml:1: empty hardware profile`},
		{"comments only", "# nothing\n", `x.yaml:1: empty hardware profile`},
		{"malformed", "name: [x\n", `x.yaml:1: did not find expected ',' or ']'`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseHardware([]byte(c.text), "x.yaml")
			if err == nil {
				t.Fatalf("accepted; want %s", c.want)
			}
			if err.Error() != c.want {
				t.Fatalf("error\n  %s\nwant\n  %s", err, c.want)
			}
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Path != "x.yaml" || pe.Line < 1 {
				t.Fatalf("%v is not a *ParseError with path and line", err)
			}
		})
	}
	// A lone device needs no links; an empty key is no value.
	lone := strings.Join(strings.Split(good, "\n")[:9], "\n") + "\n    efficiency:\nlinks:\n"
	if _, err := ParseHardware([]byte(lone), "x.yaml"); err != nil {
		t.Errorf("one device, empty links: %v", err)
	}
	// Link directions: a one-way link in each direction is two links, not a
	// duplicate.
	twoWays := edit(17, "  - {from: cpu, to: gpu, latency_us: 10, bandwidth_gbs: 20, oneway: true}\n  - {from: gpu, to: cpu, latency_us: 30, bandwidth_gbs: 5, oneway: true}")
	hw, err := ParseHardware([]byte(twoWays), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	up, _ := hw.CopyTime("cpu", "gpu", 20000)
	down, _ := hw.CopyTime("gpu", "cpu", 20000)
	if up != 11*time.Microsecond || down != 34*time.Microsecond {
		t.Fatalf("one-way links: up %v (want 11µs), down %v (want 34µs)", up, down)
	}
}

// TestOpTimeByHand checks the roofline against sums done by hand.
func TestOpTimeByHand(t *testing.T) {
	s := &Spec{Name: "g", Kind: "cuda", BandwidthGBs: 100, TFLOPS: 10, LaunchUS: 5,
		Efficiency:       map[ops.Kind]float64{ops.MatMul: 0.5},
		WeightEfficiency: map[ops.Kind]map[quant.Type]float64{ops.MatMul: {quant.Q4_0: 0.25}}}
	// A 1000×1024 Q8_0 weight: 1000 rows × 32 blocks × 34 bytes = 1,088,000
	// bytes; 8 tokens of 1024 inputs (32 KiB) in, 8×1000 f32 (32,000 bytes)
	// out, 2·8·1000·1024 FLOPs.
	w8 := &ops.Weight{Name: "w", Type: quant.Q8_0, Rows: 1000, Cols: 1024}
	mm := &ops.Op{Kind: ops.MatMul, Weight: w8, Cost: ops.Cost{FLOPs: 2 * 8 * 1000 * 1024, BytesRead: 1088000 + 32768, BytesWritten: 32000}}
	// memory: 1,152,768 B / (100e9 · 0.5) = 23.05536 µs; compute:
	// 16,384,000 / (10e12 · 0.5) = 3.2768 µs; plus 5 µs launch.
	if got, want := s.OpTime(mm), 28055*time.Nanosecond; got != want {
		t.Errorf("Q8_0 mat_mul: %v, want %v", got, want)
	}
	// The same shape in Q4_0 (1000 × 32 × 18 = 576,000 bytes) at its own
	// efficiency 0.25: 640,768 / 25e9 = 25.63072 µs.
	w4 := &ops.Weight{Name: "w", Type: quant.Q4_0, Rows: 1000, Cols: 1024}
	mm4 := &ops.Op{Kind: ops.MatMul, Weight: w4, Cost: ops.Cost{FLOPs: 2 * 8 * 1000 * 1024, BytesRead: 576000 + 32768, BytesWritten: 32000}}
	if got, want := s.OpTime(mm4), 30631*time.Nanosecond; got != want {
		t.Errorf("Q4_0 mat_mul: %v, want %v", got, want)
	}
	// An add at DefaultEfficiency 0.5: 12,000 bytes / 50e9 = 0.24 µs.
	add := &ops.Op{Kind: ops.Add, Cost: ops.Cost{FLOPs: 1000, BytesRead: 8000, BytesWritten: 4000}}
	if got, want := s.OpTime(add), 5240*time.Nanosecond; got != want {
		t.Errorf("add: %v, want %v", got, want)
	}
	// fp16 with conversions at the boundary (the default): the op rounds
	// as it reads and writes, nothing more is charged.
	s.FP16 = true
	if got, want := s.OpTime(add), 5240*time.Nanosecond; got != want {
		t.Errorf("fp16 add, boundary conversions: %v, want %v", got, want)
	}
	// Per-op conversions: the activations (all 12,000 bytes of the add)
	// pass 1.5 times more at full bandwidth: 18,000 / 100e9 = 0.18 µs.
	s.Conversions = PerOp
	if got, want := s.OpTime(add), 5420*time.Nanosecond; got != want {
		t.Errorf("fp16 add, per-op conversions: %v, want %v", got, want)
	}
	// Per-op conversions on an f32 device: nothing to convert.
	s.FP16 = false
	if got, want := s.OpTime(add), 5240*time.Nanosecond; got != want {
		t.Errorf("f32 add, per-op conversions: %v, want %v", got, want)
	}
	s.FP16 = true
	// For the mat-mul only the activations convert, not the weight:
	// 1.5 × (32,768 + 32,000) / 100e9 = 0.97152 µs.
	if got, want := s.ConvertTime(mm), 972*time.Nanosecond; got != want {
		t.Errorf("fp16 mat_mul conversion: %v, want %v", got, want)
	}
	// An embedding reads ids and table rows: only its output converts.
	emb := &ops.Op{Kind: ops.Embed, Weight: w8, Cost: ops.Cost{BytesRead: 2 * 1088, BytesWritten: 2 * 4096}}
	if got, want := s.ConvertTime(emb), 123*time.Nanosecond; got != want {
		t.Errorf("fp16 embed conversion: %v, want %v", got, want)
	}
}

func TestCopyTime(t *testing.T) {
	hw, err := ParseHardware([]byte(good), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// 10 µs + 1 MB / 20 GB/s = 60 µs, either way.
	for _, d := range [][2]string{{"cpu", "gpu"}, {"gpu", "cpu"}} {
		if got, err := hw.CopyTime(d[0], d[1], 1e6); err != nil || got != 60*time.Microsecond {
			t.Errorf("copy %s -> %s: %v %v, want 60µs", d[0], d[1], got, err)
		}
	}
	if got, err := hw.CopyTime("gpu", "gpu", 1e9); err != nil || got != 0 {
		t.Errorf("copy within a device: %v %v, want 0", got, err)
	}
	if _, err := hw.CopyTime("gpu", "npu", 1); err == nil {
		t.Error("a copy to a device the profile lacks was priced")
	}
	// A one-way link does not price the way back.
	hw.Links[0].OneWay = true
	if _, err := hw.CopyTime("gpu", "cpu", 1); err == nil {
		t.Error("a one-way link priced the way back")
	}
}

// TestSimComputesLikeTheCPU runs a small op set on a simulated device and
// on the CPU device: outputs must be identical to the bit, since the
// simulated device computes with the CPU's kernels.
func TestSimComputesLikeTheCPU(t *testing.T) {
	hw, err := LoadHardware("m4-pro")
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := hw.Spec("metal")
	sd := New(spec, hw, 2)
	cd := cpu.New("cpu", 2)
	defer sd.Close()
	defer cd.Close()

	r := rand.New(rand.NewPCG(1, 2))
	randVec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	const d, ff, vocab, n = 64, 96, 40, 3
	weight := func(name string, typ quant.Type, rows, cols int) (*ops.Weight, []byte) {
		rb, err := quant.RowBytes(typ, cols)
		if err != nil {
			t.Fatal(err)
		}
		raw := make([]byte, rb*rows)
		if err := quant.Quantize(typ, randVec(rows*cols), raw); err != nil {
			t.Fatal(err)
		}
		return &ops.Weight{Name: name, Type: typ, Rows: rows, Cols: cols}, raw
	}
	type tensor struct {
		w   *ops.Weight
		raw []byte
	}
	ws := map[string]tensor{}
	for _, x := range []struct {
		name      string
		typ       quant.Type
		rows, col int
	}{{"embd", quant.Q8_0, vocab, d}, {"norm", quant.F32, 1, d}, {"q8", quant.Q8_0, ff, d}, {"q4", quant.Q4_0, d, ff}} {
		w, raw := weight(x.name, x.typ, x.rows, x.col)
		ws[x.name] = tensor{w, raw}
	}
	attn := ops.AttnParams{Heads: 4, KVHeads: 2, HeadDim: 16, Context: 8}
	tokens := []int32{3, 17, 39}
	x, g, u, k := randVec(n*d), randVec(n*ff), randVec(n*ff), randVec(n*attn.KVHeads*attn.HeadDim)
	steps := []struct {
		op  *ops.Op
		out int
		in  [][]float32
	}{
		{&ops.Op{Kind: ops.Embed, Name: "embed", Weight: ws["embd"].w}, n * d, nil},
		{&ops.Op{Kind: ops.RMSNorm, Name: "norm", Weight: ws["norm"].w, Eps: 1e-5}, n * d, [][]float32{x}},
		{&ops.Op{Kind: ops.MatMul, Name: "up", Weight: ws["q8"].w}, n * ff, [][]float32{x}},
		{&ops.Op{Kind: ops.MatMul, Name: "down", Weight: ws["q4"].w}, n * d, [][]float32{g}},
		{&ops.Op{Kind: ops.MatMul, Name: "down1", Weight: ws["q4"].w}, d, [][]float32{g[:ff]}},
		{&ops.Op{Kind: ops.RoPE, Name: "rope", Rope: ops.RopeParams{HeadDim: 16, Dims: 16, Base: 10000}}, n * d, [][]float32{x}},
		{&ops.Op{Kind: ops.Attention, Name: "attn", Attn: attn}, n * d, [][]float32{x, k, k}},
		{&ops.Op{Kind: ops.SiLUMul, Name: "silu"}, n * ff, [][]float32{g, u}},
		{&ops.Op{Kind: ops.Add, Name: "add"}, n * ff, [][]float32{g, u}},
		{&ops.Op{Kind: ops.LastRow, Name: "last"}, d, [][]float32{x}},
	}
	results := map[string][][]float32{}
	for _, dev := range []devices.Device{sd, cd} {
		for _, tw := range ws {
			if err := dev.LoadWeight(tw.w, tw.raw); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range steps {
			var bufs []devices.Buffer
			for _, in := range s.in {
				b, err := dev.Alloc(len(in))
				if err != nil {
					t.Fatal(err)
				}
				if err := dev.Write(b, in); err != nil {
					t.Fatal(err)
				}
				bufs = append(bufs, b)
			}
			ob, err := dev.Alloc(s.out)
			if err != nil {
				t.Fatal(err)
			}
			st := ops.Step{Tokens: tokens, Pos: 2}
			if s.op.Name == "down1" {
				st = ops.Step{Tokens: tokens[:1], Pos: 5}
			}
			if err := dev.Run(s.op, st, bufs, ob); err != nil {
				t.Fatalf("%s: %s: %v", dev.Name(), s.op, err)
			}
			y := make([]float32, s.out)
			if err := dev.Read(y, ob); err != nil {
				t.Fatal(err)
			}
			results[dev.Name()] = append(results[dev.Name()], y)
		}
	}
	for i, s := range steps {
		got, want := results["sim:metal"][i], results["cpu"][i]
		for j := range want {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
				t.Fatalf("%s output %d: sim %g, cpu %g", s.op, j, got[j], want[j])
			}
		}
		if !slices.ContainsFunc(want, func(v float32) bool { return v != 0 }) {
			t.Fatalf("%s: all outputs zero, which proves nothing", s.op)
		}
	}
	if got := sd.OpTime(steps[2].op, ops.Step{}); got != spec.OpTime(steps[2].op) || got <= 0 {
		t.Fatalf("charged %v, the model says %v", got, spec.OpTime(steps[2].op))
	}
}

func TestSimInfoSupportsAndMemory(t *testing.T) {
	hw, err := LoadHardware("m4-pro")
	if err != nil {
		t.Fatal(err)
	}
	devs := Open(hw, 1)
	if len(devs) != len(hw.Devices) {
		t.Fatalf("%d devices for %d specs", len(devs), len(hw.Devices))
	}
	for _, d := range devs {
		in := d.Info()
		s, _ := hw.Spec(strings.TrimPrefix(in.Name, "sim:"))
		if !in.Simulated || in.Kind != s.Kind || in.Memory != int64(s.MemoryGB*(1<<30)) ||
			!strings.HasPrefix(in.Detail, "simulated m4-pro "+s.Name) {
			t.Errorf("info %+v", in)
		}
		if _, ok := d.(devices.Simulator); !ok {
			t.Errorf("%s is not a devices.Simulator", d.Name())
		}
		d.Close()
	}
	coreml, _ := hw.Spec("coreml")
	ane := New(coreml, hw, 1)
	defer ane.Close()
	op := &ops.Op{Kind: ops.Attention, Name: "attn"}
	if err := ane.Supports(op); !errors.Is(err, devices.ErrUnsupported) {
		t.Fatalf("the simulated Neural Engine accepted attention, which its profile excludes: %v", err)
	}
	if err := ane.Run(op, ops.Step{}, nil, nil); !errors.Is(err, devices.ErrUnsupported) {
		t.Fatalf("the simulated Neural Engine ran attention: %v", err)
	}
	if err := ane.Supports(&ops.Op{Kind: ops.SiLUMul, Name: "s"}); err != nil {
		t.Fatal(err)
	}

	// A device of 1 MiB holds 1 MiB.
	tiny := &Spec{Name: "tiny", Kind: "cuda", MemoryGB: 1.0 / 1024, BandwidthGBs: 1, TFLOPS: 1}
	small := New(tiny, &Hardware{Name: "h", Devices: []*Spec{tiny}}, 1)
	defer small.Close()
	if _, err := small.Alloc(1 << 17); err != nil { // 512 KiB
		t.Fatal(err)
	}
	if _, err := small.Alloc(1 << 17); err != nil { // 1 MiB in all
		t.Fatal(err)
	}
	if _, err := small.Alloc(1); err == nil || !strings.Contains(err.Error(), "out of memory") {
		t.Fatalf("allocation past the profile's memory: %v", err)
	}
}

// TestComputeEfficiencyMovesOnlyComputeTime: a compute efficiency changes the
// time of a compute-bound op (a prefill mat-mul) and leaves a memory-bound one
// (a decode mat-vec) as the efficiency makes it.
func TestComputeEfficiencyMovesOnlyComputeTime(t *testing.T) {
	w := &ops.Weight{Name: "w", Type: quant.Q4_0, Rows: 4096, Cols: 4096}
	decode := &ops.Op{Kind: ops.MatMul, Weight: w, Cost: ops.Cost{FLOPs: 2 * 4096 * 4096, BytesRead: w.Bytes()}}
	prefill := &ops.Op{Kind: ops.MatMul, Weight: w, Cost: ops.Cost{FLOPs: 512 * 2 * 4096 * 4096, BytesRead: w.Bytes()}}
	base := &Spec{BandwidthGBs: 1000, TFLOPS: 10, Efficiency: map[ops.Kind]float64{ops.MatMul: 0.5}}
	tc := *base
	tc.WeightComputeEfficiency = map[ops.Kind]map[quant.Type]float64{ops.MatMul: {quant.Q4_0: 0.25}}
	if a, b := base.OpTime(decode), tc.OpTime(decode); a != b {
		t.Errorf("decode mat-vec: %v without a compute efficiency, %v with one", a, b)
	}
	want := time.Duration(float64(prefill.Cost.FLOPs) / (10e12 * 0.25) * 1e9)
	if got := tc.OpTime(prefill); got < want-time.Microsecond || got > want+time.Microsecond {
		t.Errorf("prefill mat-mul at compute efficiency 0.25: %v, want %v", got, want)
	}
	if a, b := base.OpTime(prefill), tc.OpTime(prefill); 2*a-b > time.Microsecond || b-2*a > time.Microsecond {
		t.Errorf("prefill mat-mul: %v at efficiency 0.5, %v at compute efficiency 0.25, want twice", a, b)
	}
}
