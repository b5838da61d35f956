package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hybrid/runtime"
)

// TestBenchConversionsAblation compares metal-only and mac-hybrid on the
// simulated M4 Pro with the fp16 conversions at the boundary and per op:
// metal-only has no fp16 op and runs once; mac-hybrid runs twice, the per-op
// run charged exactly its conversion passes more per decode step.
func TestBenchConversionsAblation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bench.json")
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "-p", "8", "-n", "4", "-r", "1", "--threads", "1", "--hardware", "m4-pro",
		"--policies", "metal-only,mac-hybrid", "--conversions", "boundary,per-op", "--json-out", file}
	if code := Main(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "SIMULATED devices: times of simulated devices are modelled from configs/hardware/m4-pro.yaml") {
		t.Errorf("the table does not say it is simulated:\n%s", stdout.String())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Hardware string                `json:"hardware"`
		Policies []runtime.PolicyBench `json:"policies"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Policies) != 3 || res.Hardware != "configs/hardware/m4-pro.yaml" {
		t.Fatalf("hardware %q, %d rows, want 3: %+v", res.Hardware, len(res.Policies), res.Policies)
	}
	metal, boundary, perOp := res.Policies[0], res.Policies[1], res.Policies[2]
	if metal.Policy != "metal-only" || metal.FP16Ops != 0 || metal.CopiesPerToken != 0 {
		t.Errorf("metal-only row: %+v", metal)
	}
	if boundary.Conversions != "boundary" || perOp.Conversions != "per-op" || boundary.FP16Ops == 0 || perOp.FP16Ops != boundary.FP16Ops {
		t.Fatalf("mac-hybrid rows: %+v, %+v", boundary, perOp)
	}
	for _, r := range res.Policies {
		if !r.Simulated || r.AccountedDecodeTokS <= 0 || r.AccountedPrefillTokS <= 0 {
			t.Errorf("%s (%s): %+v", r.Policy, r.Conversions, r)
		}
	}
	if boundary.ConvertMS != 0 || perOp.ConvertMS <= 0 {
		t.Errorf("conversion ms/token: boundary %g, per-op %g", boundary.ConvertMS, perOp.ConvertMS)
	}
	// Modelled times are exact sums: per-op is boundary plus the passes
	// (within the nanosecond rounding of each op's time).
	if d := perOp.AccountedMS - boundary.AccountedMS - perOp.ConvertMS; d < -1e-5 || d > 1e-5 {
		t.Errorf("per-op %.6f ms/token, boundary %.6f + conversions %.6f", perOp.AccountedMS, boundary.AccountedMS, perOp.ConvertMS)
	}
	if perOp.BytesPerToken != boundary.BytesPerToken || perOp.CopiesPerToken != boundary.CopiesPerToken {
		t.Errorf("the conversion design changed the copies: %+v, %+v", boundary, perOp)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--policies", "mac-hybrid", "--hardware", "m4-pro", "--conversions", "per_op"}, "want boundary or per-op"},
		{[]string{"--policies", "mac-hybrid", "--hardware", "m4-pro", "--conversions", "per-op,per-op"}, "twice"},
		{[]string{"--conversions", "per-op"}, "--conversions needs --policies"},
		{[]string{"--policies", "cpu-only", "--conversions", "per-op"}, "hardware profile"},
		{[]string{"--json-out", file}, "--json-out needs --policies"},
	} {
		stdout.Reset()
		stderr.Reset()
		if code := Main(append([]string{"bench", "-p", "1", "-n", "1", "-r", "1"}, c.args...), &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr.String(), c.want)
		}
	}
}

// TestBenchDepthPolicy measures decode at a depth of the KV cache under
// one policy: here cpu-split over two CPU devices, which the table names.
func TestBenchDepthPolicy(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "-p", "0", "-n", "4", "-d", "32", "-r", "1", "--threads", "1", "--cpus", "2", "--policies", "cpu-split"}
	if code := Main(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "cpu+cpu:1") || !strings.Contains(out, "tg4 @ d32: ") {
		t.Errorf("want the two CPU devices and a tg4 @ d32 line:\n%s", out)
	}
}

// TestBenchOps checks `hybrid bench --ops`: a row per op name of the
// built-in model's decode step, each mat-mul with its weight bytes, and
// times that add up to no more than the step.
func TestBenchOps(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "-p", "0", "-n", "8", "-r", "1", "--threads", "1", "--ops", "--json"}
	if code := Main(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res struct {
		Ops *runtime.Breakdown `json:"decode_ops"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	b := res.Ops
	if b == nil || b.Tokens != 8 || b.WallMS <= 0 {
		t.Fatalf("breakdown: %+v", b)
	}
	rows := map[string]runtime.OpTime{}
	var sum float64
	for _, o := range b.Ops {
		rows[o.Op] = o
		sum += o.MS
	}
	q, out := rows["attn_q"], rows["output"]
	if q.Kind != "mat_mul" || q.PerStep < 1 || q.WeightBytes <= 0 || q.Device != "cpu" {
		t.Errorf("attn_q row: %+v", q)
	}
	if out.PerStep != 1 || out.WeightBytes <= 0 {
		t.Errorf("output row: %+v", out)
	}
	if n := rows["attn_norm"]; n.PerStep != q.PerStep || n.WeightBytes != 0 {
		t.Errorf("attn_norm row: %+v (attn_q %+v)", n, q)
	}
	if sum > b.WallMS*1.0001 {
		t.Errorf("ops sum to %.4f ms/token, more than the step's %.4f", sum, b.WallMS)
	}
	// The table form names the rows too.
	stdout.Reset()
	if code := Main([]string{"bench", "-p", "0", "-n", "4", "-r", "1", "--threads", "1", "--ops"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"decode step by op", "ATTN_Q", "rest of the step"} {
		if !strings.Contains(strings.ToUpper(stdout.String()), strings.ToUpper(want)) {
			t.Errorf("table lacks %q:\n%s", want, stdout.String())
		}
	}
}
