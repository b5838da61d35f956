package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"

	"hybrid/devices/sim"
	"hybrid/planner"
	"hybrid/runtime"
)

// policyBench is one policy's result in `hybrid bench --policies`.
type policyBench struct {
	Policy    string         `json:"policy"`
	Devices   string         `json:"devices"`
	Simulated bool           `json:"simulated"`
	Placement map[string]int `json:"placement"`
	// Conversions is the design of the fp16 devices' conversions the run
	// was charged for (boundary or per-op); FP16Ops is how many ops of a
	// decode step ran on an fp16 device (when none did, the design makes
	// no difference and only the first mode asked for is run).
	Conversions string `json:"conversions"`
	FP16Ops     int    `json:"fp16_ops"`
	// PrefillTokS and DecodeTokS are llama-bench-style speeds, wall time on
	// this machine.
	PrefillTokS    float64 `json:"prefill_tokens_per_s"`
	DecodeTokS     float64 `json:"decode_tokens_per_s"`
	CopiesPerToken float64 `json:"copies_per_token"`
	BytesPerToken  float64 `json:"bytes_per_token"`
	PredictedMS    float64 `json:"predicted_ms_per_token"`
	// AccountedMS is the decode step's time as the executor records it: op
	// times (modelled on simulated devices) plus copy times.
	AccountedMS float64 `json:"accounted_ms_per_token"`
	// AccountedPrefillTokS and AccountedDecodeTokS are the speeds at the
	// accounted times: where every device is simulated, the simulated
	// speed.
	AccountedPrefillTokS float64 `json:"accounted_prefill_tokens_per_s"`
	AccountedDecodeTokS  float64 `json:"accounted_decode_tokens_per_s"`
	// ConvertMS is the part of AccountedMS charged for fp16 conversion
	// passes (zero with conversions at the boundary).
	ConvertMS float64 `json:"convert_ms_per_token"`
	// WallMS is the decode step's wall time on this machine.
	WallMS float64 `json:"wall_ms_per_token"`
}

func benchCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", stderr)
	model := fs.String("model", "", "GGUF model `file` (default: the built-in stories260K)")
	nPrompt := fs.Int("p", 512, "prompt tokens to prefill")
	nGen := fs.Int("n", 128, "tokens to decode")
	reps := fs.Int("r", 3, "repetitions")
	threads := fs.Int("threads", 0, "CPU threads; 0 uses every core")
	policies := fs.String("policies", "", "compare these policies (comma-separated names or files) in one run")
	hardware := fs.String("hardware", "", "hardware profile whose devices are added, simulated")
	cpus := fs.Int("cpus", 0, "separate CPU devices")
	conversions := fs.String("conversions", "boundary", "with --hardware, the fp16 devices' conversion designs to compare (comma-separated): boundary (f32 between ops, rounded inside each op) and per-op (a conversion pass of every input and output of every op, the ablation)")
	asJSON := fs.Bool("json", false, "print JSON")
	jsonOut := fs.String("json-out", "", "with --policies, also write the JSON to this `file` (the table is still printed)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *jsonOut != "" && *policies == "" {
		return fmt.Errorf("--json-out needs --policies")
	}
	var modes []string
	for _, c := range strings.Split(*conversions, ",") {
		c = strings.TrimSpace(c)
		if _, err := sim.ParseConversions(c); err != nil {
			return fmt.Errorf("--conversions: %w", err)
		}
		if slices.Contains(modes, c) {
			return fmt.Errorf("--conversions names %s twice", c)
		}
		modes = append(modes, c)
	}
	if *policies == "" && (len(modes) > 1 || modes[0] != "boundary") {
		return fmt.Errorf("--conversions needs --policies (and --hardware)")
	}
	prog, done := bar(stderr, "loading "+*model)
	m, err := runtime.LoadModel(*model, prog)
	done()
	if err != nil {
		return err
	}
	defer m.Close()
	ctx := max(*nPrompt, *nGen, 1)
	if *policies == "" {
		sess, err := runtime.NewSession(m, runtime.SessionOptions{Policy: "cpu-only", Threads: *threads, Context: ctx})
		if err != nil {
			return err
		}
		defer sess.Close()
		res, err := sess.Exec.Bench(*nPrompt, *nGen, *reps, 42)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(struct {
				Model   string `json:"model"`
				Threads int    `json:"threads"`
				*runtime.BenchResult
			}{m.Path, *threads, res})
		}
		fmt.Fprintf(stdout, "%s, %s\n", m.Path, deviceList(sess.Exec))
		if len(res.PrefillTokS) > 0 {
			mean, sd := runtime.MeanStd(res.PrefillTokS)
			fmt.Fprintf(stdout, "pp%d: %.2f ± %.2f tok/s\n", *nPrompt, mean, sd)
		}
		if len(res.DecodeTokS) > 0 {
			mean, sd := runtime.MeanStd(res.DecodeTokS)
			fmt.Fprintf(stdout, "tg%d: %.2f ± %.2f tok/s\n", *nGen, mean, sd)
		}
		return nil
	}

	var results []policyBench
	var hw *sim.Hardware
	for _, pol := range strings.Split(*policies, ",") {
		pol = strings.TrimSpace(pol)
		for i, mode := range modes {
			sess, err := runtime.NewSession(m, runtime.SessionOptions{Policy: pol, Hardware: *hardware, Threads: *threads,
				CPUs: *cpus, Context: ctx, Conversions: mode})
			if err != nil {
				return err
			}
			hw = sess.Hardware
			if i > 0 && fp16Ops(sess) == 0 {
				sess.Close() // no op on an fp16 device: the same run again
				continue
			}
			r, err := benchPolicy(sess, *nPrompt, *nGen, *reps)
			sess.Close()
			if err != nil {
				return fmt.Errorf("policy %s: %w", pol, err)
			}
			r.Conversions = mode
			results = append(results, r)
		}
	}
	var hwName, hwSource string
	if hw != nil {
		hwName, hwSource = hw.Path, hw.Source
	}
	doc := struct {
		Model          string        `json:"model"`
		Prompt         int           `json:"n_prompt"`
		Gen            int           `json:"n_gen"`
		Reps           int           `json:"reps"`
		Hardware       string        `json:"hardware,omitempty"`
		HardwareSource string        `json:"hardware_source,omitempty"`
		Policies       []policyBench `json:"policies"`
	}{m.Path, *nPrompt, *nGen, *reps, hwName, hwSource, results}
	if *jsonOut != "" {
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		if err := writeFileAtomic(*jsonOut, append(b, '\n')); err != nil {
			return fmt.Errorf("--json-out: %w", err)
		}
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(doc)
	}
	fmt.Fprintf(stdout, "%s: pp%d, tg%d, %d reps\n", m.Path, *nPrompt, *nGen, *reps)
	if hw != nil {
		fmt.Fprintf(stdout, "SIMULATED devices: times of sim:* devices are modelled from %s (%s), not measured\n", hwName, hwSource)
	}
	t := table.NewWriter()
	if hw == nil {
		// Real devices only: no conversions, and the accounted speeds
		// would be those of launches where a device runs asynchronously.
		t.AppendHeader(table.Row{"policy", "devices", "prefill tok/s", "decode tok/s", "copies/token", "KiB/token",
			"predicted ms/token", "accounted ms/token", "wall ms/token"})
		for _, r := range results {
			t.AppendRow(table.Row{r.Policy, r.Devices, fmt.Sprintf("%.2f", r.PrefillTokS), fmt.Sprintf("%.2f", r.DecodeTokS),
				fmt.Sprintf("%.1f", r.CopiesPerToken), fmt.Sprintf("%.1f", r.BytesPerToken/1024),
				fmt.Sprintf("%.3f", r.PredictedMS), fmt.Sprintf("%.3f", r.AccountedMS), fmt.Sprintf("%.3f", r.WallMS)})
		}
		fmt.Fprintln(stdout, t.Render())
		return nil
	}
	t.AppendHeader(table.Row{"policy", "conversions", "devices", "wall prefill tok/s", "wall decode tok/s", "copies/token", "KiB/token",
		"predicted ms/token", "accounted ms/token", "of which fp16 conversions", "accounted prefill tok/s", "accounted decode tok/s",
		"wall ms/token"})
	for _, r := range results {
		conv := "-"
		if r.FP16Ops > 0 {
			conv = fmt.Sprintf("%s (%d fp16 ops)", r.Conversions, r.FP16Ops)
		}
		t.AppendRow(table.Row{r.Policy, conv, r.Devices, fmt.Sprintf("%.2f", r.PrefillTokS), fmt.Sprintf("%.2f", r.DecodeTokS),
			fmt.Sprintf("%.1f", r.CopiesPerToken), fmt.Sprintf("%.1f", r.BytesPerToken/1024),
			fmt.Sprintf("%.3f", r.PredictedMS), fmt.Sprintf("%.3f", r.AccountedMS), fmt.Sprintf("%.4f", r.ConvertMS),
			fmt.Sprintf("%.2f", r.AccountedPrefillTokS), fmt.Sprintf("%.2f", r.AccountedDecodeTokS), fmt.Sprintf("%.3f", r.WallMS)})
	}
	fmt.Fprintln(stdout, t.Render())
	return nil
}

// fp16Ops counts the ops of the session's decode plan placed on an fp16
// device.
func fp16Ops(s *runtime.Session) int {
	prec := map[string]string{}
	for _, d := range s.Plan.Devices {
		prec[d.Name] = d.Precision
	}
	n := 0
	for _, d := range s.Plan.Device {
		if prec[d] == "f16" {
			n++
		}
	}
	return n
}

// convertTime is what the plan's ops on simulated fp16 devices are charged
// for conversion passes in a step of plan's graph (zero unless their profile
// converts per op).
func convertTime(s *runtime.Session, p *planner.Plan) time.Duration {
	if s.Hardware == nil {
		return 0
	}
	var t time.Duration
	for i, op := range p.Graph.Ops {
		spec, ok := s.Hardware.Spec(strings.TrimPrefix(p.Device[i], "sim:"))
		if ok && strings.HasPrefix(p.Device[i], "sim:") && spec.FP16 && spec.Conversions == sim.PerOp {
			t += spec.ConvertTime(op)
		}
	}
	return t
}

// benchPolicy measures one session: llama-bench-style prefill and decode
// speed, then a decode-only pass with fresh counters for the per-token copies
// and the accounted time.
func benchPolicy(s *runtime.Session, nPrompt, nGen, reps int) (policyBench, error) {
	ex := s.Exec
	r := policyBench{Policy: s.Policy.Name, Devices: deviceList(ex), Placement: s.Plan.Placement(),
		PredictedMS: float64(s.Plan.Predicted) / 1e6, FP16Ops: fp16Ops(s), Conversions: "boundary",
		ConvertMS: float64(convertTime(s, s.Plan)) / 1e6}
	for _, d := range ex.Devices() {
		r.Simulated = r.Simulated || d.Info().Simulated
	}
	res, err := ex.Bench(nPrompt, nGen, reps, 42)
	if err != nil {
		return r, err
	}
	r.PrefillTokS, _ = runtime.MeanStd(res.PrefillTokS)
	r.DecodeTokS, _ = runtime.MeanStd(res.DecodeTokS)
	if nPrompt > 0 {
		// One prefill with fresh counters for its accounted time.
		rng := rand.New(rand.NewPCG(7, 1))
		toks := make([]int32, nPrompt)
		for i := range toks {
			toks[i] = int32(rng.IntN(s.Model.Config.Vocab))
		}
		ex.ResetStats()
		if _, err := ex.Prefill(toks, 0); err != nil {
			return r, err
		}
		if acc := accounted(ex.Stats); acc > 0 {
			r.AccountedPrefillTokS = float64(nPrompt) / acc.Seconds()
		}
	}
	ex.ResetStats()
	t0 := time.Now()
	if _, err := ex.Bench(0, nGen, 1, 7); err != nil {
		return r, err
	}
	wall := time.Since(t0)
	st := ex.Stats
	steps := float64(max(st.Steps, 1))
	r.CopiesPerToken = float64(st.Copies.Count) / steps
	r.BytesPerToken = float64(st.Copies.Bytes) / steps
	acc := accounted(st)
	r.AccountedMS = float64(acc) / steps / 1e6
	if acc > 0 {
		r.AccountedDecodeTokS = steps / acc.Seconds()
	}
	r.WallMS = float64(wall) / steps / 1e6
	return r, nil
}

// accounted is the time the executor recorded: op times (modelled on
// simulated devices) plus copy times.
func accounted(st runtime.Stats) time.Duration {
	var acc time.Duration
	for _, d := range st.Devices {
		acc += d.Time
	}
	return acc + st.Copies.Time
}

// writeFileAtomic writes b to path through a temporary file in the same
// folder, renamed into place.
func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
