package planner

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"hybrid/configs"
	"hybrid/devices"
	_ "hybrid/devices/coreml" // registers the coreml_units setting
	"hybrid/ops"
)

// Devices the tests place on: two real CPUs, and the simulated Mac of the
// m4-pro hardware profile.
var (
	polTwoCPUs = []devices.Info{{Name: "cpu", Kind: "cpu"}, {Name: "cpu:1", Kind: "cpu"}}
	polMac     = []devices.Info{{Name: "sim:coreml", Kind: "coreml", Simulated: true},
		{Name: "sim:cpu", Kind: "cpu", Simulated: true}, {Name: "sim:metal", Kind: "metal", Simulated: true}}
)

func TestShippedPolicies(t *testing.T) {
	names := BuiltinPolicies()
	for _, want := range []string{"auto", "cpu-only", "cpu-split", "cuda-only", "mac-hybrid", "metal-only"} {
		if !slices.Contains(names, want) {
			t.Errorf("policy %s is not shipped (have %v)", want, names)
		}
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			p, err := LoadPolicy(name)
			if err != nil {
				t.Fatal(err)
			}
			if p.Path != "builtin:"+name || p.Name != name || p.Description == "" || p.Transfers != "boundary" {
				t.Errorf("path %q, name %q, description %q, transfers %q", p.Path, p.Name, p.Description, p.Transfers)
			}
			text, err := fs.ReadFile(configs.FS, "policies/"+name+".yaml")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(text), "# "+name+": ") {
				t.Errorf("does not start with a comment saying what %s is for", name)
			}
			// The same file on disk, by path, parses to the same policy.
			path := filepath.Join("..", "configs", "policies", name+".yaml")
			q, err := LoadPolicy(path)
			if err != nil {
				t.Fatal(err)
			}
			if q.Path != path || q.Name != p.Name || len(q.Rules) != len(p.Rules) {
				t.Errorf("from %s: path %q, name %q, %d rules; embedded: %d rules", path, q.Path, q.Name, len(q.Rules), len(p.Rules))
			}
		})
	}
}

func TestLoadPolicyNotFound(t *testing.T) {
	for _, c := range []struct{ arg, want string }{
		{"no-such-policy", `no built-in policy "no-such-policy" (have auto, `},
		{"no-such-policy.yaml", "no-such-policy.yaml"},
		{"testdata/none/auto", "testdata/none/auto"},
	} {
		t.Run(c.arg, func(t *testing.T) {
			if _, err := LoadPolicy(c.arg); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

// TestShippedPlacements checks what each shipped policy lets every kind of
// op do, on the devices it is meant for.
func TestShippedPlacements(t *testing.T) {
	type want struct {
		kind  ops.Kind
		layer int
		devs  string
	}
	for _, c := range []struct {
		policy string
		devs   []devices.Info
		want   []want
	}{
		{"cpu-split", polTwoCPUs, []want{
			{ops.Embed, -1, "cpu"}, {ops.MatMul, 0, "cpu"}, {ops.MatMul, 1, "cpu:1"}, {ops.Add, 20, "cpu"},
			{ops.Attention, 21, "cpu:1"}, {ops.LastRow, -1, "cpu"}, {ops.MatMul, -1, "cpu"},
		}},
		{"cpu-only", polTwoCPUs, []want{{ops.MatMul, 3, "cpu"}, {ops.Embed, -1, "cpu"}}},
		{"auto", polTwoCPUs, []want{{ops.MatMul, 3, "cpu,cpu:1"}}},
		{"mac-hybrid", polMac, []want{
			{ops.MatMul, 0, "sim:metal"}, {ops.RMSNorm, 5, "sim:metal"}, {ops.RoPE, 5, "sim:metal"},
			{ops.Attention, 5, "sim:metal"}, {ops.SiLUMul, 5, "sim:coreml"}, {ops.Embed, -1, "sim:cpu"},
			{ops.Add, 5, "sim:coreml,sim:cpu,sim:metal"}, {ops.LastRow, -1, "sim:coreml,sim:cpu,sim:metal"},
			{ops.MatMul, -1, "sim:metal"},
		}},
		{"metal-only", polMac, []want{{ops.Embed, -1, "sim:metal"}, {ops.Add, 0, "sim:metal"}}},
	} {
		t.Run(c.policy, func(t *testing.T) {
			p, err := LoadPolicy(c.policy)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Check(c.devs, nil); err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				got := strings.Join(p.Candidates(&ops.Op{Kind: w.kind, Layer: w.layer}, c.devs), ",")
				if got != w.devs {
					t.Errorf("%s in layer %d: %s, want %s", w.kind, w.layer, got, w.devs)
				}
			}
		})
	}
}

// TestBadPolicyFiles: every file in testdata/policies is a bad policy whose
// error names the file and the line of the problem.
func TestBadPolicyFiles(t *testing.T) {
	cases := map[string]struct {
		line int
		has  string
	}{
		"comments_only.yaml":       {1, "empty policy file"},
		"coreml_units.yaml":        {4, `coreml_units is "neural_engine_only": want cpu_ne, all, cpu_gpu or cpu`},
		"device_reference.yaml":    {5, `"CUDA 0" is not a kind or a device name`},
		"devices_not_list.yaml":    {3, `devices is "cpu", want a list`},
		"duplicate_key.yaml":       {4, "devices is given twice (first on line 3)"},
		"empty.yaml":               {1, "empty policy file"},
		"empty_devices.yaml":       {3, "devices is an empty list"},
		"layers_backwards.yaml":    {6, `"5-2" runs backwards`},
		"layers_syntax.yaml":       {5, `"0..3" is not N, A-B, A-B/STEP or none`},
		"malformed.yaml":           {3, "did not find expected ',' or ']'"},
		"memory_size.yaml":         {7, `cap of metal: size "8 gigs" is not a number`},
		"not_mapping.yaml":         {2, "a policy is a mapping of keys"},
		"null_value.yaml":          {4, "transfers has no value"},
		"ops_not_list.yaml":        {4, `rule: ops is "mat_mul", want a list`},
		"rule_without_device.yaml": {6, "rule has no device"},
		"tab.yaml":                 {4, "found character that cannot start any token"},
		"transfers.yaml":           {4, `transfers is "sometimes": want boundary or per-op`},
		"two_documents.yaml":       {4, "a second YAML document"},
		// yaml.v3 names the line where the broken list began, not the stray line 6.
		"unclosed_key.yaml":     {4, "did not find expected '-' indicator"},
		"unknown_key.yaml":      {5, `unknown key "favourite" (known: coreml_units, description, devices, `},
		"unknown_op_kind.yaml":  {8, `unknown op kind "matmul" (have embed, rms_norm, mat_mul,`},
		"unknown_rule_key.yaml": {6, `rule: unknown key "devcie" (known: device, layers, ops)`},
	}
	files, err := filepath.Glob(filepath.Join("testdata", "policies", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad policies in testdata/policies: %v", err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			c, ok := cases[name]
			if !ok {
				t.Fatalf("no expected error for %s: add it to the table", f)
			}
			_, err := LoadPolicy(f)
			if err == nil {
				t.Fatal("parsed")
			}
			prefix := f + ":" + strconv.Itoa(c.line) + ": "
			if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), c.has) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q, want one line starting %q containing %q", err, prefix, c.has)
			}
		})
		delete(cases, name)
	}
	for name := range cases {
		t.Errorf("%s is in the table but not in testdata/policies", name)
	}
}

// TestParseShapes covers the shapes the bad files do not: each text is
// parsed as p.yaml and must fail on the given line.
func TestParseShapes(t *testing.T) {
	for _, c := range []struct {
		name, text string
		line       int
		has        string
	}{
		{"rule not a mapping", "rules:\n  - cpu\n", 2, `each rule is a mapping of device, layers, ops, not "cpu"`},
		{"rules not a list", "rules:\n  device: cpu\n", 2, "rules is a mapping, want a list"},
		{"memory not a mapping", "memory: [cpu]\n", 1, "memory is a list, want a mapping"},
		{"memory cap a list", "memory:\n  cpu: [1]\n", 2, "the cap of cpu is a list"},
		{"memory cap empty", "memory:\n  cpu:\n", 2, "the cap of cpu is empty"},
		{"memory cap zero", "memory:\n  cpu: 0\n", 2, "out of range"},
		{"memory ref", "memory:\n  Metal GPU: 1GiB\n", 2, `"Metal GPU" is not a kind`},
		{"memory twice", "memory:\n  cpu: 1GiB\n  cpu: 2GiB\n", 3, "cpu is given twice"},
		{"name a list", "name: [a]\n", 1, "name is a list, want a single value"},
		{"device item a list", "devices:\n  - [cpu]\n", 2, "devices: an entry is a list"},
		{"exclude ref", "exclude: [\"cpu 1\"]\n", 1, `exclude: device reference "cpu 1"`},
		{"empty ops", "rules:\n  - ops: []\n    device: cpu\n", 2, "ops is an empty list"},
		{"empty device", "rules:\n  - device: \"\"\n", 2, "rule: empty device reference"},
		{"layer step zero", "rules:\n  - device: cpu\n    layers: 0-9/0\n", 3, "has step 0"},
		{"layer overflow", "rules:\n  - device: cpu\n    layers: 0-99999999999999999999\n", 3, "out of range"},
		{"alias", "devices: &d [cpu]\nexclude: *d\n", 2, "aliases are not supported"},
		{"null document", "---\n", 1, "empty policy file"},
		{"scalar document", "auto\n", 1, `not "auto"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParsePolicy([]byte(c.text), "p.yaml")
			prefix := "p.yaml:" + strconv.Itoa(c.line) + ": "
			if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), c.has) {
				t.Fatalf("error %v, want %q ... %q", err, prefix, c.has)
			}
		})
	}
}

func TestParsePolicyValues(t *testing.T) {
	text := `# a comment
description: two rules
devices: [cpu, "sim:metal", "cuda:1"]
exclude: [coreml]
rules:
  - ops: [mat_mul, attention]
    layers: "0-3,8"
    device: metal
  - layers: none
    device: cpu
memory:
  metal: 1.5GB
  cpu: 512MiB
  "cuda:1": 1000
transfers: per-op
coreml_units: all
`
	p, err := ParsePolicy([]byte(text), "dir/mine.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "mine" || p.Path != "dir/mine.yaml" || p.Description != "two rules" || p.Transfers != "per-op" || p.CoreMLUnits != "all" {
		t.Errorf("name %q, path %q, description %q, transfers %q, coreml_units %q", p.Name, p.Path, p.Description, p.Transfers, p.CoreMLUnits)
	}
	if !slices.Equal(p.Devices, []string{"cpu", "sim:metal", "cuda:1"}) || !slices.Equal(p.Exclude, []string{"coreml"}) {
		t.Errorf("devices %v, exclude %v", p.Devices, p.Exclude)
	}
	if len(p.Rules) != 2 || p.Rules[0].Line != 6 || p.Rules[1].Line != 9 || p.Rules[0].Device != "metal" ||
		!slices.Equal(p.Rules[0].Ops, []ops.Kind{ops.MatMul, ops.Attention}) || p.Rules[1].Ops != nil ||
		p.Rules[0].Layers.String() != "0-3,8" || !p.Rules[1].Layers.Contains(-1) || p.Rules[1].Layers.Contains(0) {
		t.Errorf("rules %+v", p.Rules)
	}
	if p.Memory["metal"] != 1_500_000_000 || p.Memory["cpu"] != 512<<20 || p.Memory["cuda:1"] != 1000 || len(p.Memory) != 3 {
		t.Errorf("memory %v", p.Memory)
	}
}

func TestLayerSets(t *testing.T) {
	for _, c := range []struct {
		text    string
		in, out []int
	}{
		{"0-21", []int{0, 1, 21}, []int{22, -1}},
		{"0-21/2", []int{0, 2, 20}, []int{1, 21, 22, -1}},
		{"1-21/2", []int{1, 3, 21}, []int{0, 2, 22, -1}},
		{"3", []int{3}, []int{2, 4, -1}},
		{"0-3,8-11", []int{0, 3, 8, 11}, []int{4, 7, 12}},
		{"0-3, 8-11", []int{3, 8}, []int{4}},
		{"2-9/3", []int{2, 5, 8}, []int{3, 9, 11}},
		{"none", []int{-1}, []int{0, 1}},
		{"0-1,none", []int{-1, 0, 1}, []int{2}},
	} {
		t.Run(c.text, func(t *testing.T) {
			s, err := ParseLayerSet(c.text)
			if err != nil {
				t.Fatal(err)
			}
			if s.Empty() || s.String() != c.text {
				t.Errorf("empty %v, string %q", s.Empty(), s.String())
			}
			for _, l := range c.in {
				if !s.Contains(l) {
					t.Errorf("does not contain %d", l)
				}
			}
			for _, l := range c.out {
				if s.Contains(l) {
					t.Errorf("contains %d", l)
				}
			}
		})
	}
	var empty LayerSet
	if !empty.Empty() || !empty.Contains(-1) || !empty.Contains(0) || !empty.Contains(1000) {
		t.Error("the empty set must contain every layer, -1 included")
	}
	for _, bad := range []string{"", "a", "3-1", "1-5/0", "1--2", "1-", "-1", "0-3,", "1/2", "0-3/2/2", "all", "99999999999999999999"} {
		t.Run("bad "+bad, func(t *testing.T) {
			if s, err := ParseLayerSet(bad); err == nil {
				t.Errorf("parsed as %+v", s)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		text string
		want int64 // 0: an error
	}{
		{"8GiB", 8 << 30}, {"512MiB", 512 << 20}, {"1.5GB", 1_500_000_000}, {"4096", 4096}, {"1 KiB", 1024},
		{"2TB", 2e12}, {"100B", 100}, {"0.5KiB", 512},
		{"", 0}, {"0", 0}, {"8gib", 0}, {"-1GiB", 0}, {"1e9", 0}, {"GiB", 0}, {"2PiB", 0}, {"2000TiB", 0}, {"0.1B", 0},
	} {
		t.Run(c.text, func(t *testing.T) {
			n, err := ParseSize(c.text)
			if c.want == 0 {
				if err == nil {
					t.Fatalf("parsed as %d", n)
				}
				return
			}
			if err != nil || n != c.want {
				t.Fatalf("%d, %v; want %d", n, err, c.want)
			}
		})
	}
}

func TestCandidates(t *testing.T) {
	devs := append([]devices.Info{{Name: "cuda:0", Kind: "cuda"}, {Name: "cuda:1", Kind: "cuda"}}, polTwoCPUs...)
	type want struct {
		kind  ops.Kind
		layer int
		devs  string
	}
	for _, c := range []struct {
		name, text string
		want       []want
	}{
		{"no rules: every device", "name: x\n", []want{{ops.MatMul, 0, "cuda:0,cuda:1,cpu,cpu:1"}}},
		{"first match wins", "rules:\n  - ops: [mat_mul]\n    device: cuda:1\n  - device: cpu\n", []want{
			{ops.MatMul, 0, "cuda:1"}, {ops.MatMul, -1, "cuda:1"}, {ops.Add, 0, "cpu"}, {ops.Embed, -1, "cpu"},
		}},
		{"a kind pins to every device of it", "rules:\n  - ops: [attention]\n    device: cuda\n", []want{
			{ops.Attention, 3, "cuda:0,cuda:1"}, {ops.Add, 3, "cuda:0,cuda:1,cpu,cpu:1"},
		}},
		{"a name that is also a kind is the device", "rules:\n  - device: cpu\n", []want{{ops.Add, 3, "cpu"}}},
		{"layer sets", "rules:\n  - layers: 0-9/2\n    device: cuda:0\n  - layers: 1-9/2\n    device: cuda:1\n  - layers: none\n    device: cpu:1\n", []want{
			{ops.MatMul, 0, "cuda:0"}, {ops.MatMul, 8, "cuda:0"}, {ops.Add, 9, "cuda:1"}, {ops.Embed, -1, "cpu:1"},
			{ops.MatMul, 10, "cuda:0,cuda:1,cpu,cpu:1"},
		}},
		{"ops and layers together", "rules:\n  - ops: [mat_mul, rope]\n    layers: 2-3\n    device: cpu\n", []want{
			{ops.MatMul, 2, "cpu"}, {ops.RoPE, 3, "cpu"}, {ops.MatMul, 4, "cuda:0,cuda:1,cpu,cpu:1"},
			{ops.Add, 2, "cuda:0,cuda:1,cpu,cpu:1"}, {ops.MatMul, -1, "cuda:0,cuda:1,cpu,cpu:1"},
		}},
		{"devices allows", "devices: [cuda, cpu]\n", []want{{ops.MatMul, 0, "cuda:0,cuda:1,cpu"}}},
		{"exclude", "exclude: [\"cuda:1\", \"cpu:1\"]\n", []want{{ops.MatMul, 0, "cuda:0,cpu"}}},
		{"exclude a kind", "exclude: [cuda]\nrules:\n  - ops: [embed]\n    device: cpu:1\n", []want{
			{ops.MatMul, 0, "cpu,cpu:1"}, {ops.Embed, -1, "cpu:1"},
		}},
		{"a pin to a kind keeps its allowed devices", "exclude: [\"cuda:0\"]\nrules:\n  - device: cuda\n", []want{{ops.Add, 0, "cuda:1"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(c.text), "p.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Check(devs, nil); err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				got := strings.Join(p.Candidates(&ops.Op{Kind: w.kind, Layer: w.layer}, devs), ",")
				if got != w.devs {
					t.Errorf("%s in layer %d: %s, want %s", w.kind, w.layer, got, w.devs)
				}
			}
		})
	}
}

func TestCheck(t *testing.T) {
	missing := map[string]string{"cuda": "not built with -tags cuda", "metal": "not darwin"}
	for _, c := range []struct {
		name, text string
		devs       []devices.Info
		want       []string // nil: no error
	}{
		{"all present", "devices: [cpu, \"cpu:1\"]\nrules:\n  - device: cpu:1\nmemory:\n  cpu: 1GiB\n", polTwoCPUs, nil},
		{"pin to an absent kind", "name: x\nrules:\n  - ops: [add]\n    device: cpu\n  - ops: [mat_mul]\n    device: cuda\n", polTwoCPUs,
			[]string{`p.yaml:5: pin to "cuda" but no cuda device is present (cuda: not built with -tags cuda); present: cpu, cpu:1`}},
		{"pin to an absent name", "rules:\n  - device: \"cpu:2\"\n", polTwoCPUs,
			[]string{`p.yaml:2: pin to "cpu:2" but no device cpu:2 is present; present: cpu, cpu:1`}},
		{"absent allowed device", "devices:\n  - cpu\n  - metal\n", polTwoCPUs,
			[]string{`p.yaml:3: devices allows "metal" but no metal device is present (metal: not darwin)`}},
		{"absent excluded device", "exclude: [coreml]\n", polTwoCPUs,
			[]string{`p.yaml:1: exclude names "coreml" but no coreml device is present; present`}},
		{"absent capped device", "memory:\n  cpu: 1GiB\n  \"sim:cuda\": 1GiB\n", polTwoCPUs,
			[]string{`p.yaml:3: memory caps "sim:cuda" but no device sim:cuda is present (cuda: not built`}},
		{"simulated device without a profile", "devices: [\"sim:npu\"]\n", polTwoCPUs,
			[]string{`p.yaml:1: devices allows "sim:npu" but no device sim:npu is present (simulated devices come from a hardware profile)`}},
		{"the earliest line is reported", "rules:\n  - device: metal\nexclude: [coreml]\n", polTwoCPUs, []string{"p.yaml:2:", "metal"}},
		{"pin outside devices", "devices: [\"cpu:1\"]\nrules:\n  - ops: [embed]\n    device: cpu\n", polTwoCPUs,
			[]string{`p.yaml:3: pin to "cpu", which devices or exclude rule out; allowed: cpu:1`}},
		{"pin to an excluded device", "exclude: [cpu]\nrules:\n  - device: cpu\n", polTwoCPUs,
			[]string{`p.yaml:3: pin to "cpu", which devices or exclude rule out`}},
		{"nothing left", "devices: [cpu]\nexclude: [cpu]\n", polTwoCPUs,
			[]string{"p.yaml:1: devices and exclude leave no device to run on"}},
		{"kind references on the simulated Mac", "devices: [metal, coreml, cpu]\nrules:\n  - device: cpu\n", polMac, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(c.text), "p.yaml")
			if err != nil {
				t.Fatal(err)
			}
			err = p.Check(c.devs, missing)
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestCheckShipped: a shipped policy for hardware that is absent says which
// file and line and why.
func TestCheckShipped(t *testing.T) {
	p, err := LoadPolicy("cuda-only")
	if err != nil {
		t.Fatal(err)
	}
	err = p.Check(polTwoCPUs[:1], map[string]string{"cuda": "not built with -tags cuda"})
	want := `builtin:cuda-only:5: devices allows "cuda" but no cuda device is present (cuda: not built with -tags cuda); present: cpu`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
}

func TestMemoryCap(t *testing.T) {
	p, err := ParsePolicy([]byte("memory:\n  cpu: 2GiB\n  \"cpu:1\": 1GiB\n  metal: 8GiB\n  \"sim:metal\": 12GiB\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dev       devices.Info
		cap       int64
		line      int
		matchedBy string
	}{
		{devices.Info{Name: "cpu", Kind: "cpu"}, 2 << 30, 2, "its name and kind"},
		{devices.Info{Name: "cpu:1", Kind: "cpu"}, 1 << 30, 3, "its name, smaller than its kind's"},
		{devices.Info{Name: "sim:metal", Kind: "metal"}, 8 << 30, 4, "its kind, smaller than its name's"},
		{devices.Info{Name: "cuda:0", Kind: "cuda"}, 0, 0, "nothing"},
	} {
		t.Run(c.dev.Name, func(t *testing.T) {
			if got, line := p.MemoryCap(c.dev), p.CapLine(c.dev); got != c.cap || line != c.line {
				t.Fatalf("cap %d on line %d, want %d on line %d (matched by %s)", got, line, c.cap, c.line, c.matchedBy)
			}
		})
	}
}

func TestMatchesAndResolve(t *testing.T) {
	cpu1 := devices.Info{Name: "cpu:1", Kind: "cpu"}
	for _, c := range []struct {
		ref  string
		d    devices.Info
		want bool
	}{
		{"cpu", cpu1, true}, {"cpu:1", cpu1, true}, {"cpu:2", cpu1, false}, {"cuda", cpu1, false},
		{"metal", devices.Info{Name: "sim:metal", Kind: "metal"}, true},
		{"sim:metal", devices.Info{Name: "sim:metal", Kind: "metal"}, true},
		{"sim", devices.Info{Name: "sim:metal", Kind: "metal"}, false},
	} {
		if got := Matches(c.ref, c.d); got != c.want {
			t.Errorf("Matches(%q, %s) = %v", c.ref, c.d.Name, got)
		}
	}
	names := func(ds []devices.Info) string {
		var ns []string
		for _, d := range ds {
			ns = append(ns, d.Name)
		}
		return strings.Join(ns, ",")
	}
	if got := names(Resolve("cpu", polTwoCPUs)); got != "cpu" {
		t.Errorf(`Resolve("cpu") = %s: the exact name wins`, got)
	}
	if got := names(Resolve("cpu", polTwoCPUs[1:])); got != "cpu:1" {
		t.Errorf(`Resolve("cpu") without a device named cpu = %s, want the kind's`, got)
	}
	if got := names(Resolve("cpu", polMac)); got != "sim:cpu" {
		t.Errorf(`Resolve("cpu") on the simulated Mac = %s`, got)
	}
}

// TestPolicyFileFromDisk loads a user's policy by path, outside the
// embedded set.
func TestPolicyFileFromDisk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mine.yml")
	if err := os.WriteFile(path, []byte("devices: [cpu]\nrules:\n  - ops: [embed]\n    device: cpu\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "mine" || p.Path != path || len(p.Rules) != 1 || p.Rules[0].Line != 3 {
		t.Fatalf("%+v", p)
	}
}

// TestPolicyErrorsAreTyped: parse and Check errors are *configs.Error with
// the file and line, and a file over the size limit is refused by name.
func TestPolicyErrorsAreTyped(t *testing.T) {
	_, err := ParsePolicy([]byte("name: x\ntransfers: never\n"), "p.yaml")
	var e *configs.Error
	if !errors.As(err, &e) || e.Path != "p.yaml" || e.Line != 2 {
		t.Fatalf("parse: %v is not a *configs.Error at p.yaml:2", err)
	}
	p, err := ParsePolicy([]byte("name: x\nrules:\n  - device: cuda\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(polTwoCPUs, nil); !errors.As(err, &e) || e.Line != 3 {
		t.Fatalf("check: %v is not a *configs.Error at line 3", err)
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, []byte("description: "+strings.Repeat("x", configs.MaxBytes)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPolicy(big); !errors.As(err, &e) || e.Issue != configs.TooLarge || !strings.Contains(err.Error(), big+": larger than 1 MiB") {
		t.Fatalf("a policy over the limit: %v", err)
	}
}

// TestDeviceSettings: a policy's device settings are keys only when a
// package registered them, and are checked by it.
func TestDeviceSettings(t *testing.T) {
	for _, c := range []struct {
		name, text string
		line       int    // 0: parses
		has        string // in the error
	}{
		{"given", "coreml_units: cpu_gpu\n", 0, ""},
		{"no value", "name: x\ncoreml_units:\n", 2, "coreml_units has no value"},
		{"a list", "coreml_units: [all]\n", 1, `coreml_units is a list, want a single value`},
		{"twice", "coreml_units: all\ncoreml_units: cpu\n", 2, "coreml_units is given twice (first on line 1)"},
		{"bad value", "name: x\ncoreml_units: gpu\n", 2, `coreml_units is "gpu": want cpu_ne, all, cpu_gpu or cpu`},
		{"not registered", "metal_queues: 2\n", 1, `unknown key "metal_queues"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(c.text), "p.yaml")
			if c.line == 0 {
				if err != nil || p.CoreMLUnits != "cpu_gpu" || p.Settings["coreml_units"] != "cpu_gpu" {
					t.Fatalf("%v; settings %v", err, p.Settings)
				}
				return
			}
			prefix := "p.yaml:" + strconv.Itoa(c.line) + ": "
			if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), c.has) {
				t.Fatalf("error %v, want %q ... %q", err, prefix, c.has)
			}
		})
	}
}

// TestDeviceReferences: references are a lower-case word and ":" parts,
// whatever package names the devices; the kind of an absent one is found
// among the kinds known.
func TestDeviceReferences(t *testing.T) {
	for ref, ok := range map[string]bool{"cpu": true, "cuda:0": true, "cpu:1": true, "remote:metal": true, "remote:cuda:1": true,
		"npu-2:a_b": true, "": false, "Cuda": false, "cuda:": false, ":0": false, "cuda 0": false, "1cpu": false, "cuda::0": false} {
		if err := polCheckRef(ref); (err == nil) != ok {
			t.Errorf("%q: %v", ref, err)
		}
	}
	missing := map[string]string{"cuda": "not built with -tags cuda"}
	for _, c := range []struct{ ref, kind string }{
		{"cpu:1", "cpu"}, {"cuda:3", "cuda"}, {"remote:cuda:1", "cuda"}, {"remote:metal", "metal"}, {"remote:npu", "remote"}, {"npu", "npu"},
	} {
		if got := polRefKind(c.ref, polMac, missing); got != c.kind {
			t.Errorf("polRefKind(%q) = %q, want %q", c.ref, got, c.kind)
		}
	}
}
