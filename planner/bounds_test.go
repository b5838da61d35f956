package planner

import (
	"errors"
	"math"
	"strings"
	"testing"

	"hybrid/configs"
)

// goodProfile is a valid cost profile; the bad cases edit one line of it.
// Lines: 7 the add op, 11 and 12 the copy's latency and bandwidth.
const goodProfile = `model: m
taken: "2025-01-01T00:00:00Z"
devices:
  "cpu | 16 cores":
    ops:
      "mat_mul q8_0 64x64 n1": 12.5
      "add io256 n1": 0.25
      "attention h4/2 d16 n8": 3
    copies:
      "cpu:1 | 16 cores":
        latency_us: 3
        bandwidth_gbs: 0.001
  "cpu:1 | 16 cores":
    ops: {"embed q4_0 32000x64 n8": 0}
`

// editProfile replaces line n (1-based) of goodProfile by repl.
func editProfile(n int, repl string) string {
	lines := strings.Split(goodProfile, "\n")
	lines[n-1] = repl
	return strings.Join(lines, "\n")
}

// TestProfileNumbersBounded: every number of a cost profile is finite and
// in its range, and every op key is one OpKey writes, or an error at its
// line. Before, all of these were accepted, and a negative or NaN time gave
// negative predictions and plans with hundreds of needless copies.
func TestProfileNumbersBounded(t *testing.T) {
	if _, err := ParseProfile([]byte(goodProfile), "p.yaml"); err != nil {
		t.Fatalf("the base profile: %v", err)
	}
	type bad struct{ value, has string }
	notFinite := []bad{{".nan", `".nan" is not a finite number`}, {".inf", `".inf" is not a finite number`}, {"-.inf", `"-.inf" is not a finite number`}}
	cases := []struct {
		key   string
		line  int
		text  func(v string) string
		extra []bad
	}{
		{"op time", 7, func(v string) string { return editProfile(7, `      "add io256 n1": `+v) },
			[]bad{{"-1", `op "add io256 n1" takes -1 µs, want a time in [0, 1e+09] µs`}, {"1e10", "takes 1e+10 µs"}}},
		{"copy latency_us", 11, func(v string) string { return editProfile(11, "        latency_us: "+v) },
			[]bad{{"-1", `copy to "cpu:1 | 16 cores": latency_us is -1, want a time in [0, 1e+09] µs`}, {"1e300", "latency_us is 1e+300"}}},
		{"copy bandwidth_gbs", 12, func(v string) string { return editProfile(12, "        bandwidth_gbs: "+v) },
			[]bad{{"-1", "bandwidth_gbs is -1, want a rate in [1e-06, 1e+10] GB/s"}, {"0", "bandwidth_gbs is 0"}, {"1e-300", "bandwidth_gbs is 1e-300"}, {"1e11", "bandwidth_gbs is 1e+11"}}},
	}
	for _, c := range cases {
		for _, b := range append(notFinite, c.extra...) {
			t.Run(c.key+"="+b.value, func(t *testing.T) {
				checkProfileError(t, c.text(b.value), c.line, b.has)
			})
		}
	}
	for _, c := range []struct{ name, key, has string }{
		{"no tokens", "add io256 n0", "size or token count 0: want a whole number of at least 1"},
		{"no rows", "mat_mul q8_0 0x64 n1", "size or token count 0"},
		{"no heads", "attention h0/2 d16 n1", "size or token count 0"},
		{"no kv heads", "attention h4/0 d16 n1", "size or token count 0"},
		{"negative bytes", "add io-256 n1", "not an op key"},
		{"negative tokens", "add io256 n-1", "not an op key"},
		{"bytes overflow", "add io99999999999999999999 n1", "byte count 99999999999999999999 is out of range"},
		{"tokens overflow", "add io256 n99999999999999999999", "size or token count 99999999999999999999"},
		{"unknown kind", "matmul q8_0 64x64 n1", `unknown op kind "matmul"`},
		{"unknown weight type", "mat_mul q3_0 64x64 n1", `unknown weight type "q3_0"`},
		{"no shape", "add", "not an op key"},
		{"float size", "mat_mul q8_0 64.5x64 n1", "not an op key"},
	} {
		t.Run("op key "+c.name, func(t *testing.T) {
			checkProfileError(t, editProfile(7, `      "`+c.key+`": 1`), 7, `device "cpu | 16 cores": op "`+c.key+`": `+c.has)
		})
	}
	t.Run("copy without bandwidth", func(t *testing.T) {
		checkProfileError(t, editProfile(12, ""), 10, `copy to "cpu:1 | 16 cores": bandwidth_gbs is missing`)
	})
	t.Run("copy without latency", func(t *testing.T) {
		checkProfileError(t, editProfile(11, ""), 10, `copy to "cpu:1 | 16 cores": latency_us is missing`)
	})
}

func checkProfileError(t *testing.T, text string, line int, has string) {
	t.Helper()
	_, err := ParseProfile([]byte(text), "p.yaml")
	var e *configs.Error
	if !errors.As(err, &e) || e.Path != "p.yaml" || e.Line != line || !strings.Contains(e.Msg, has) {
		t.Fatalf("error %v; want p.yaml:%d: ...%s...", err, line, has)
	}
}

// checkProfile fails t unless every number of p is finite and in its range
// and every op key one OpKey writes.
func checkProfile(t *testing.T, p *Profile) {
	t.Helper()
	for id, dp := range p.Devices {
		if dp == nil {
			t.Errorf("device %q: nil", id)
			continue
		}
		for k, us := range dp.Ops {
			if math.IsNaN(us) || us < 0 || us > 1e9 {
				t.Errorf("%q: op %q: %g µs", id, k, us)
			}
			if msg := checkOpKey(k); msg != "" {
				t.Errorf("%q: op %q: %s", id, k, msg)
			}
		}
		for to, f := range dp.Copies {
			if math.IsNaN(f.LatencyUS) || f.LatencyUS < 0 || f.LatencyUS > 1e9 ||
				math.IsNaN(f.BandwidthGBs) || f.BandwidthGBs < 1e-6 || f.BandwidthGBs > 1e10 {
				t.Errorf("%q: copy to %q: %+v", id, to, f)
			}
			// A copy of 1 GB (more than any activation a plan moves) stays
			// under a thousandth of what a time.Duration holds, leaving room
			// for sums.
			if s := f.LatencyUS*1e-6 + 1e9/(f.BandwidthGBs*1e9); s*1e9 >= math.MaxInt64/1e3 {
				t.Errorf("%q: copy to %q: 1 GB takes %g s", id, to, s)
			}
		}
	}
}
