package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"

	"hybrid/runtime"
)

// policyBench is one policy's result in `hybrid bench --policies`.
type policyBench struct {
	Policy         string         `json:"policy"`
	Devices        string         `json:"devices"`
	Simulated      bool           `json:"simulated"`
	Placement      map[string]int `json:"placement"`
	PrefillTokS    float64        `json:"prefill_tokens_per_s"`
	DecodeTokS     float64        `json:"decode_tokens_per_s"`
	CopiesPerToken float64        `json:"copies_per_token"`
	BytesPerToken  float64        `json:"bytes_per_token"`
	PredictedMS    float64        `json:"predicted_ms_per_token"`
	// AccountedMS is the decode step's time as the executor records it: op
	// times (modelled on simulated devices) plus copy times.
	AccountedMS float64 `json:"accounted_ms_per_token"`
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
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
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
	for _, pol := range strings.Split(*policies, ",") {
		pol = strings.TrimSpace(pol)
		sess, err := runtime.NewSession(m, runtime.SessionOptions{Policy: pol, Hardware: *hardware, Threads: *threads, CPUs: *cpus, Context: ctx})
		if err != nil {
			return err
		}
		r, err := benchPolicy(sess, *nPrompt, *nGen, *reps)
		sess.Close()
		if err != nil {
			return fmt.Errorf("policy %s: %w", pol, err)
		}
		results = append(results, r)
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(struct {
			Model    string        `json:"model"`
			Prompt   int           `json:"n_prompt"`
			Gen      int           `json:"n_gen"`
			Reps     int           `json:"reps"`
			Policies []policyBench `json:"policies"`
		}{m.Path, *nPrompt, *nGen, *reps, results})
	}
	fmt.Fprintf(stdout, "%s: pp%d, tg%d, %d reps\n", m.Path, *nPrompt, *nGen, *reps)
	t := table.NewWriter()
	t.AppendHeader(table.Row{"policy", "devices", "prefill tok/s", "decode tok/s", "copies/token", "KiB/token",
		"predicted ms/token", "accounted ms/token", "wall ms/token"})
	for _, r := range results {
		dev := r.Devices
		if r.Simulated {
			dev += " — simulated times"
		}
		t.AppendRow(table.Row{r.Policy, dev, fmt.Sprintf("%.2f", r.PrefillTokS), fmt.Sprintf("%.2f", r.DecodeTokS),
			fmt.Sprintf("%.1f", r.CopiesPerToken), fmt.Sprintf("%.1f", r.BytesPerToken/1024),
			fmt.Sprintf("%.3f", r.PredictedMS), fmt.Sprintf("%.3f", r.AccountedMS), fmt.Sprintf("%.3f", r.WallMS)})
	}
	fmt.Fprintln(stdout, t.Render())
	return nil
}

// benchPolicy measures one session: llama-bench-style prefill and decode
// speed, then a decode-only pass with fresh counters for the per-token copies
// and the accounted time.
func benchPolicy(s *runtime.Session, nPrompt, nGen, reps int) (policyBench, error) {
	ex := s.Exec
	r := policyBench{Policy: s.Policy.Name, Devices: deviceList(ex), Placement: s.Plan.Placement(),
		PredictedMS: float64(s.Plan.Predicted) / 1e6}
	for _, d := range ex.Devices() {
		r.Simulated = r.Simulated || d.Info().Simulated
	}
	res, err := ex.Bench(nPrompt, nGen, reps, 42)
	if err != nil {
		return r, err
	}
	r.PrefillTokS, _ = runtime.MeanStd(res.PrefillTokS)
	r.DecodeTokS, _ = runtime.MeanStd(res.DecodeTokS)
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
	var acc time.Duration
	for _, d := range st.Devices {
		acc += d.Time
	}
	acc += st.Copies.Time
	r.AccountedMS = float64(acc) / steps / 1e6
	r.WallMS = float64(wall) / steps / 1e6
	return r, nil
}
