package runtime

import (
	"strings"
	"testing"

	"hybrid/devices"
	"hybrid/devices/cpu"
)

// TestKVCacheBytes checks the formula against the CPU device's own count of
// the cache it allocated for a run.
func TestKVCacheBytes(t *testing.T) {
	m := builtinModel(t)
	c := m.Config
	// stories260K: 5 layers, 4 KV heads of 8 features.
	if got, want := KVCacheBytes(c, 128), int64(2*5*128*4*8*2); got != want {
		t.Fatalf("KVCacheBytes(128) = %d, want %d", got, want)
	}
	s, err := NewSession(m, SessionOptions{Policy: "cpu-only", Threads: 1, Context: 128})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Exec.Forward([]int32{1}, 0); err != nil {
		t.Fatal(err)
	}
	d, ok := s.Devices[0].(*cpu.Device)
	if !ok {
		t.Fatalf("device %T, want *cpu.Device", s.Devices[0])
	}
	if got := d.KVCacheBytes(); got != KVCacheBytes(c, 128) {
		t.Fatalf("the CPU device's KV cache is %d bytes, KVCacheBytes says %d", got, KVCacheBytes(c, 128))
	}
}

func TestCheckContext(t *testing.T) {
	c := builtinModel(t).Config // context_length 2048
	const gib = 1 << 30
	for name, tc := range map[string]struct {
		ctx      int
		override bool
		mem      int64
		known    bool
		want     []string // in the error; none: no error
	}{
		"the model's":            {ctx: c.Context, mem: 16 * gib, known: true},
		"one":                    {ctx: 1, mem: 16 * gib, known: true},
		"zero":                   {ctx: 0, mem: 16 * gib, known: true, want: []string{"context of 0", "at least 1"}},
		"negative":               {ctx: -1, mem: 16 * gib, known: true, want: []string{"context of -1"}},
		"past the model's":       {ctx: c.Context + 1, mem: 16 * gib, known: true, want: []string{"2049", "model's 2048", "llama.context_length"}},
		"overridden":             {ctx: 1 << 20, override: true, mem: 16 * gib, known: true},
		"past the hard limit":    {ctx: 1<<20 + 1, override: true, mem: 1 << 50, known: true, want: []string{"1048577", "1048576"}},
		"huge":                   {ctx: 1 << 62, override: true, mem: 1 << 50, known: true, want: []string{"1048576"}},
		"past half the memory":   {ctx: 1 << 20, override: true, mem: 1 * gib, known: true, want: []string{"671088640 bytes", "536870912 bytes", "half of this machine's 1.0 GiB"}},
		"exactly half":           {ctx: 1 << 20, override: true, mem: 2 * 671088640, known: true},
		"unknown memory":         {ctx: 1 << 20, override: true, mem: 1 * gib, want: []string{"640.0 MiB", "assumed"}},
		"the model's, no memory": {ctx: c.Context, mem: 1 << 20, known: true, want: []string{"KV cache of 1.2 MiB"}},
	} {
		t.Run(name, func(t *testing.T) {
			err := checkContext(c, tc.ctx, tc.override, tc.mem, tc.known)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestMemTotal(t *testing.T) {
	n, err := memTotal(strings.NewReader("MemFree:  1 kB\nMemTotal:       24683620 kB\nSwap: 0 kB\n"))
	if err != nil || n != 24683620<<10 {
		t.Fatalf("memTotal = %d, %v", n, err)
	}
	for _, bad := range []string{"", "MemFree: 1 kB\n", "MemTotal: -5 kB\n", "MemTotal: 99999999999999999999 kB\n"} {
		if n, err := memTotal(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: %d, want an error", bad, n)
		}
	}
	if mem, known := hostMemory(); mem <= 0 || (!known && mem != unknownMemory) {
		t.Fatalf("hostMemory = %d, %v", mem, known)
	}
}

// TestSessionBounds checks that every size a session is made from is
// refused out of range before anything is allocated from it: the sizes of
// the issue ran out of memory or panicked.
func TestSessionBounds(t *testing.T) {
	m := builtinModel(t)
	for name, tc := range map[string]struct {
		o    SessionOptions
		want string
	}{
		"ctx -1":               {SessionOptions{Threads: 1, Context: -1}, "context of -1"},
		"ctx 2^40":             {SessionOptions{Threads: 1, Context: 1 << 40, ContextOverride: true}, "1048576"},
		"ctx max int":          {SessionOptions{Threads: 1, Context: int(^uint(0) >> 1), ContextOverride: true}, "1048576"},
		"ctx past the model's": {SessionOptions{Threads: 1, Context: 4096}, "model's 2048"},
		"threads 1e9":          {SessionOptions{Threads: 1e9}, "1000000000 threads"},
		"threads -5":           {SessionOptions{Threads: -5}, "-5 threads"},
		"cpus 1e9":             {SessionOptions{Threads: 1, CPUs: 1e9}, "1000000000 CPU devices"},
		"cpus 17":              {SessionOptions{Threads: 1, CPUs: 17}, "want 0..16"},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := NewSession(m, tc.o)
			if err == nil {
				s.Close()
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
	s, err := NewSession(m, SessionOptions{Threads: 1, Context: 4096, ContextOverride: true})
	if err != nil {
		t.Fatalf("an overridden context: %v", err)
	}
	if got := s.Exec.Context(); got != 4096 {
		t.Errorf("context %d, want 4096", got)
	}
	s.Close()

	for _, o := range []SessionOptions{{Threads: 1 << 30}, {CPUs: -1}} {
		if _, _, _, err := Devices(o); err == nil {
			t.Errorf("Devices(%+v) accepted", o)
		}
	}
	// The CPU backend refuses them too, for a caller that skips the runtime.
	devs, missing := devices.Discover(devices.Options{Threads: 1 << 30})
	for _, d := range devs {
		if d.Info().Kind == "cpu" {
			t.Errorf("the CPU backend opened %s with 2^30 threads", d.Name())
		}
		d.Close()
	}
	found := false
	for _, x := range missing {
		found = found || x.Kind == "cpu" && strings.Contains(x.Why, "1073741824 threads")
	}
	if !found {
		t.Errorf("the CPU backend's refusal is not among the missing kinds: %+v", missing)
	}
	// And a pool asked for more than MaxThreads has MaxThreads.
	d := cpu.New("cpu", 1<<30)
	if got := d.Threads(); got != MaxThreads {
		t.Errorf("cpu.New with 2^30 threads has %d, want %d", got, MaxThreads)
	}
	d.Close()
}

func TestBenchBounds(t *testing.T) {
	m := builtinModel(t)
	for _, tc := range []struct {
		p, n, r int
		want    string
	}{
		{1, 1, 0, "reps 1..1000"},
		{1, 1, 1001, "reps 1..1000"},
		{-1, 1, 1, "n-prompt >= 0"},
		{1, -1, 1, "n-gen >= 0"},
		{100000000, 1, 1, "1048576"},
		{4096, 1, 1, "model's 2048"},
	} {
		if _, err := BenchCPU(m, 1, tc.p, tc.n, 0, tc.r, false); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("BenchCPU(-p %d -n %d -r %d): %v, want an error saying %q", tc.p, tc.n, tc.r, err, tc.want)
		}
	}
}

// TestMeasureProfileRefusesNoSteps: steps divide every measurement, so a
// caller other than the CLI (which bounds --steps) gets an error, not a
// division by zero.
func TestMeasureProfileRefusesNoSteps(t *testing.T) {
	m := builtinModel(t)
	d := cpu.New("cpu", 1)
	defer d.Close()
	for _, steps := range []int{0, -1} {
		if _, err := MeasureProfile(m, []devices.Device{d}, 16, 0, steps); err == nil {
			t.Fatalf("steps %d accepted", steps)
		}
	}
}

// TestBenchDepth checks llama-bench's -d: the timed runs start at the
// depth, which must fit the context with the runs, or be allowed past the
// model's by the override.
func TestBenchDepth(t *testing.T) {
	m := builtinModel(t)
	r, err := BenchCPU(m, 1, 4, 4, 100, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if r.Depth != 100 || len(r.PrefillTokS) != 1 || len(r.DecodeTokS) != 1 {
		t.Errorf("got depth %d, %d prefill and %d decode timings; want 100, 1, 1", r.Depth, len(r.PrefillTokS), len(r.DecodeTokS))
	}
	if _, err := BenchCPU(m, 1, 4, 4, 2046, 1, false); err == nil || !strings.Contains(err.Error(), "model's 2048") {
		t.Errorf("depth 2046 + 4 tokens: %v, want an error naming the model's 2048", err)
	}
	if _, err := BenchCPU(m, 1, 4, 4, 2046, 1, true); err != nil {
		t.Errorf("depth 2046 + 4 tokens with the override: %v", err)
	}
	if _, err := BenchCPU(m, 1, 4, 4, -1, 1, false); err == nil {
		t.Error("depth -1: no error")
	}
}
