package planner

import (
	"strings"
	"testing"

	"hybrid/devices"
	"hybrid/ops"
)

func TestShippedPoliciesParse(t *testing.T) {
	names := BuiltinPolicies()
	for _, want := range []string{"auto", "cpu-only", "cuda-only", "metal-only", "mac-hybrid", "cpu-split"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Fatalf("policy %s is not shipped (have %v)", want, names)
		}
	}
	for _, n := range names {
		if _, err := LoadPolicy(n); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLayerSets(t *testing.T) {
	for _, c := range []struct {
		text string
		in   []int
		out  []int
	}{
		{"0-3", []int{0, 1, 3}, []int{4, -1}},
		{"1-21/2", []int{1, 3, 21}, []int{0, 2, 22}},
		{"3,8-9", []int{3, 8, 9}, []int{4, 10}},
		{"none", []int{-1}, []int{0}},
		{"0-1,none", []int{-1, 0, 1}, []int{2}},
	} {
		s, err := ParseLayerSet(c.text)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range c.in {
			if !s.Contains(l) {
				t.Errorf("%q should contain %d", c.text, l)
			}
		}
		for _, l := range c.out {
			if s.Contains(l) {
				t.Errorf("%q should not contain %d", c.text, l)
			}
		}
	}
	for _, bad := range []string{"", "a", "3-1", "1-5/0", "1--2"} {
		if _, err := ParseLayerSet(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestPolicyErrorsNameLines(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"name: x\nfavourite: 1\n", "p.yaml:2:"},
		{"name: x\nrules:\n  - ops: [add]\n    device: cpu\n  - ops: [matmul]\n    device: cpu\n", "p.yaml:5:"},
		{"name: x\nrules:\n  - layers: 9-1\n    device: cpu\n", "p.yaml:3:"},
		{"name: x\nmemory:\n  cpu: lots\n", "p.yaml:3:"},
		{"name: x\ntransfers: sometimes\n", "p.yaml:2:"},
		{"name: x\ndevices: [\"CPU!\"]\n", "p.yaml:2:"},
		{"name: x\ndevices: cpu\n", "p.yaml:2:"},
		{"", "p.yaml:1:"},
	} {
		_, err := ParsePolicy([]byte(c.text), "p.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.text, err, c.want)
		}
	}
}

func TestCandidatesAndCheck(t *testing.T) {
	devs := []devices.Info{{Name: "cpu", Kind: "cpu"}, {Name: "cpu:1", Kind: "cpu"}, {Name: "sim:metal", Kind: "metal", Simulated: true}}
	p, err := ParsePolicy([]byte("name: x\nexclude: [\"cpu:1\"]\nrules:\n  - ops: [mat_mul]\n    layers: 0-1\n    device: metal\n  - ops: [mat_mul]\n    device: cpu\nmemory:\n  metal: 1GiB\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(devs, nil); err != nil {
		t.Fatal(err)
	}
	get := func(k ops.Kind, layer int) string {
		return strings.Join(p.Candidates(&ops.Op{Kind: k, Layer: layer}, devs), ",")
	}
	if got := get(ops.MatMul, 1); got != "sim:metal" {
		t.Fatalf("pinned mat_mul in layer 1: %s", got)
	}
	if got := get(ops.MatMul, 5); got != "cpu" {
		t.Fatalf("mat_mul in layer 5: %s (the second rule; cpu names the device cpu, not cpu:1)", got)
	}
	if got := get(ops.Add, 5); got != "cpu,sim:metal" {
		t.Fatalf("unpinned add: %s (cpu:1 is excluded)", got)
	}
	if c := p.MemoryCap(devs[2]); c != 1<<30 {
		t.Fatalf("cap %d", c)
	}
	q, _ := ParsePolicy([]byte("name: x\nrules:\n  - device: cuda\n"), "q.yaml")
	err = q.Check(devs, map[string]string{"cuda": "not built with -tags cuda"})
	if err == nil || !strings.Contains(err.Error(), "q.yaml:3:") || !strings.Contains(err.Error(), "not built") {
		t.Fatalf("pin to an absent device: %v", err)
	}
}
