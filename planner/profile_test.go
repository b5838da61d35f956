package planner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hybrid/configs"
	"hybrid/devices"
	"hybrid/ops"
)

// TestProfileRoundTrip: what Save writes, LoadProfile reads back, empty
// maps and devices without copies included.
func TestProfileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "profile.yaml")
	p := &Profile{Model: "m", Taken: "2025-01-01T00:00:00Z", Devices: map[string]*DeviceProfile{
		"cpu | 16 cores": {Ops: map[string]float64{"mat_mul q8_0 64x64 n1": 12.5, "add io256 n1": 0.25},
			Copies: map[string]CopyFit{"cpu:1 | 16 cores": {LatencyUS: 3, BandwidthGBs: 1e-3}}},
		"cpu:1 | 16 cores": {},
	}}
	if err := p.Save(path); err != nil {
		t.Fatal(err)
	}
	q, err := LoadProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	a, b := q.Devices["cpu | 16 cores"], q.Devices["cpu:1 | 16 cores"]
	if q.Model != "m" || q.Taken != p.Taken || len(q.Devices) != 2 || a == nil || b == nil ||
		a.Ops["mat_mul q8_0 64x64 n1"] != 12.5 || a.Ops["add io256 n1"] != 0.25 ||
		a.Copies["cpu:1 | 16 cores"] != (CopyFit{3, 1e-3}) || len(b.Ops) != 0 || len(b.Copies) != 0 {
		t.Fatalf("read back %+v", q)
	}
}

// TestBadProfiles: a profile that is not what Save writes is an error
// naming the file and the line.
func TestBadProfiles(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, text string
		line       int
		has        string
	}{
		{"unknown key", "model: m\ndevices:\n  cpu:\n    op: {add: 1}\n", 4, `unknown key "op" in devices cpu (known: ops, copies)`},
		{"not a number", "devices:\n  cpu:\n    ops:\n      add: fast\n", 4, `"fast" is not a number`},
		{"copies a list", "devices:\n  cpu:\n    copies: [a]\n", 3, "copies must be a mapping"},
		{"empty", "", 1, "empty cost profile"},
		{"too large", "model: " + strings.Repeat("m", configs.MaxBytes) + "\n", 0, "larger than 1 MiB, the most a cost profile may be"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".yaml")
			if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadProfile(path)
			var e *configs.Error
			if !errors.As(err, &e) || e.Path != path || e.Line != c.line || !strings.Contains(e.Msg, c.has) {
				t.Fatalf("error %v, want %s at line %d saying %q", err, path, c.line, c.has)
			}
		})
	}
}

// TestCPURooflineScalesWithThreads: without a measurement, a CPU device of
// 16 threads is predicted to read a decode mat-vec's weights 4× as fast as
// one of 2 (bandwidth grows up to 8 threads) and to do a prompt's
// arithmetic 8× as fast, less the fixed cost per op.
func TestCPURooflineScalesWithThreads(t *testing.T) {
	c := &Costs{}
	read := &ops.Op{Kind: ops.MatMul, Cost: ops.Cost{FLOPs: 2 << 20, BytesRead: 1 << 30}}
	compute := &ops.Op{Kind: ops.MatMul, Cost: ops.Cost{FLOPs: 1 << 40, BytesRead: 1 << 20}}
	for _, tc := range []struct {
		op   *ops.Op
		want float64
	}{{read, 4}, {compute, 8}} {
		t2, src := c.OpTime(devices.Info{Name: "cpu", Kind: "cpu", Threads: 2}, tc.op, 1)
		t16, _ := c.OpTime(devices.Info{Name: "cpu", Kind: "cpu", Threads: 16}, tc.op, 1)
		if src != "roofline" {
			t.Fatalf("source %q, want roofline", src)
		}
		if r := float64(t2) / float64(t16); r < tc.want*0.99 || r > tc.want*1.01 {
			t.Errorf("%d FLOPs, %d bytes: 2 threads %v, 16 threads %v: %.2f×, want %.0f×", tc.op.Cost.FLOPs, tc.op.Cost.BytesRead, t2, t16, r, tc.want)
		}
	}
}
