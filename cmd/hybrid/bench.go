package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"

	"hybrid/devices/sim"
	"hybrid/internal/atomicfile"
	"hybrid/runtime"
)

func benchCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", stderr)
	model := fs.String("model", "", "GGUF model `file` (default: the built-in stories260K)")
	nPrompt := fs.Int("p", 512, "prompt tokens to prefill (at most the model's context)")
	nGen := fs.Int("n", 128, "tokens to decode (at most the model's context)")
	reps := fs.Int("r", 3, "repetitions, 1..1000")
	depth := fs.Int("d", 0, "tokens in the KV cache before each timed run, prefilled untimed (llama-bench's -d); with --policies, of one policy")
	override := fs.Bool("ctx-override", false, "allow -d plus -p or -n past the model's context length, up to "+fmt.Sprint(runtime.MaxContext)+" positions and a KV cache of half this machine's memory")
	threads := fs.Int("threads", 0, "CPU threads; 0 uses every core")
	policies := fs.String("policies", "", "compare these policies (comma-separated names or files) in one run")
	hardware := fs.String("hardware", "", "hardware profile whose devices are added, simulated")
	cpus := fs.Int("cpus", 0, "separate CPU devices")
	ubatch := fs.Int("ubatch", 0, fmt.Sprintf("tokens of each micro-batch a prompt is split into (llama-bench's -ub); 0: %d where the plan is a chain of GPUs, each holding a run of whole layers, so that they work at once (a pipeline), else steps of up to %d tokens; -1: steps of up to %d tokens", runtime.DefaultMicroBatch, runtime.MaxBatch, runtime.MaxBatch))
	conversions := fs.String("conversions", "boundary", "with --hardware, the fp16 devices' conversion designs to compare (comma-separated): boundary (f32 between ops, rounded inside each op) and per-op (a conversion pass of every input and output of every op, the ablation)")
	asJSON := fs.Bool("json", false, "print JSON")
	jsonOut := fs.String("json-out", "", "with --policies, also write the JSON to this `file` (the table is still printed)")
	opsFlag := fs.Bool("ops", false, "after the timed runs, decode -n tokens once more with every op timed alone, and print where a step's time goes (on a GPU each op is waited for, so that pass is slower than the timed one)")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the whole bench to this `file` (read it with go tool pprof)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if *jsonOut != "" && *policies == "" {
		return badFlag(fs, "--json-out needs --policies")
	}
	var modes []string
	for _, c := range strings.Split(*conversions, ",") {
		c = strings.TrimSpace(c)
		if _, err := sim.ParseConversions(c); err != nil {
			return badFlag(fs, "--conversions: %v", err)
		}
		if slices.Contains(modes, c) {
			return badFlag(fs, "--conversions names %s twice", c)
		}
		modes = append(modes, c)
	}
	if *policies == "" && (len(modes) > 1 || modes[0] != "boundary") {
		return badFlag(fs, "--conversions needs --policies (and --hardware)")
	}
	if err := checkDeviceFlags(fs, *threads, *cpus); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"-p", *nPrompt}, {"-n", *nGen}, {"-d", *depth}} {
		if f.v < 0 || f.v > runtime.MaxContext {
			return badFlag(fs, "%s %d: want 0..%d tokens", f.name, f.v, runtime.MaxContext)
		}
	}
	if *opsFlag && strings.Contains(*policies, ",") {
		return badFlag(fs, "--ops takes one policy in --policies")
	}
	if *opsFlag && *nGen == 0 {
		return badFlag(fs, "--ops times decode steps: it needs -n of 1 or more")
	}
	if *depth > 0 && strings.Contains(*policies, ",") {
		return badFlag(fs, "-d takes one policy in --policies (the policy comparison runs at depth 0)")
	}
	if *ubatch < -1 || *ubatch > runtime.MaxBatch {
		return badFlag(fs, "--ubatch %d: want 1..%d tokens, 0 for %d, or -1 for none", *ubatch, runtime.MaxBatch, runtime.DefaultMicroBatch)
	}
	if *reps < 1 || *reps > runtime.MaxBenchReps {
		return badFlag(fs, "-r %d: want 1..%d repetitions", *reps, runtime.MaxBenchReps)
	}
	prog, done := bar(stderr, "loading "+*model)
	m, err := runtime.LoadModel(*model, prog)
	done()
	if err != nil {
		return err
	}
	defer m.Close()
	// The bench's context is its longer run: it must fit the model's
	// context and this machine's memory.
	for _, f := range []struct {
		name string
		v    int
	}{{"-p", *nPrompt}, {"-n", *nGen}} {
		if *depth+f.v > m.Config.Context && !*override {
			return badFlag(fs, "-d %d with %s %d: more than the model's context length of %d tokens (--ctx-override allows it)", *depth, f.name, f.v, m.Config.Context)
		}
	}
	if err := runtime.CheckContext(m.Config, *depth+max(*nPrompt, *nGen, 1), *override); err != nil {
		return badFlag(fs, "-d %d, -p %d, -n %d: %v", *depth, *nPrompt, *nGen, err)
	}
	if *policies == "" || *depth > 0 || *opsFlag {
		pol := strings.TrimSpace(*policies)
		if pol == "" {
			pol = "cpu-only"
		}
		so := runtime.SessionOptions{Policy: pol, Hardware: *hardware, Threads: *threads, CPUs: *cpus, ContextOverride: *override, MicroBatch: *ubatch}
		res, err := runtime.BenchSession(m, so, *nPrompt, *nGen, *depth, *reps, *opsFlag)
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
		fmt.Fprintf(stdout, "%s, %s\n", m.Path, res.Devices)
		at := "" // llama-bench's way of naming a test at a depth
		if *depth > 0 {
			at = fmt.Sprintf(" @ d%d", *depth)
		}
		if len(res.PrefillTokS) > 0 {
			mean, sd := runtime.MeanStd(res.PrefillTokS)
			fmt.Fprintf(stdout, "pp%d%s: %.2f ± %.2f tok/s\n", *nPrompt, at, mean, sd)
		}
		if len(res.DecodeTokS) > 0 {
			mean, sd := runtime.MeanStd(res.DecodeTokS)
			fmt.Fprintf(stdout, "tg%d%s: %.2f ± %.2f tok/s\n", *nGen, at, mean, sd)
			if res.ChainDepth > 1 {
				fmt.Fprintf(stdout, "decode: up to %d steps queued ahead of their picks\n", res.ChainDepth)
			}
		}
		if res.Ops != nil {
			printBreakdown(stdout, res.Ops)
		}
		return nil
	}

	var pols []string
	for _, pol := range strings.Split(*policies, ",") {
		pols = append(pols, strings.TrimSpace(pol))
	}
	doc, err := runtime.ComparePolicies(m, runtime.CompareOptions{Policies: pols, Hardware: *hardware, Threads: *threads,
		CPUs: *cpus, Conversions: modes, Prompt: *nPrompt, Gen: *nGen, Reps: *reps, MicroBatch: *ubatch})
	if err != nil {
		return err
	}
	if *jsonOut != "" {
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		if err := atomicfile.Write(*jsonOut, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("--json-out: %w", err)
		}
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(doc)
	}
	printComparison(stdout, doc)
	return nil
}

// printBenchPeaks prints the most memory each policy's GPUs held.
func printBenchPeaks(w io.Writer, c *runtime.Comparison) {
	for _, r := range c.Policies {
		names := make([]string, 0, len(r.Peaks))
		for name := range r.Peaks {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			fmt.Fprintf(w, "%s: %s %s\n", r.Policy, name, peakText(r.Peaks[name]))
		}
	}
}

// printComparison prints c as a table: with a hardware profile, the
// conversions and the accounted (simulated) speeds too.
func printComparison(w io.Writer, c *runtime.Comparison) {
	fmt.Fprintf(w, "%s: pp%d, tg%d, %d reps\n", c.Model, c.Prompt, c.Gen, c.Reps)
	if c.Hardware != "" {
		fmt.Fprintf(w, "SIMULATED devices: times of simulated devices are modelled from %s (%s), not measured\n", c.Hardware, c.HardwareSource)
	}
	t := table.NewWriter()
	if c.Hardware == "" {
		// Real devices only: no conversions, and the accounted speeds
		// would be those of launches where a device runs asynchronously.
		t.AppendHeader(table.Row{"policy", "devices", "prefill tok/s", "decode tok/s", "copies/token", "KiB/token",
			"predicted ms/token", "accounted ms/token", "wall ms/token"})
		for _, r := range c.Policies {
			t.AppendRow(table.Row{r.Policy, r.Devices, fmt.Sprintf("%.2f", r.PrefillTokS), fmt.Sprintf("%.2f", r.DecodeTokS),
				fmt.Sprintf("%.1f", r.CopiesPerToken), fmt.Sprintf("%.1f", r.BytesPerToken/1024),
				fmt.Sprintf("%.3f", r.PredictedMS), fmt.Sprintf("%.3f", r.AccountedMS), fmt.Sprintf("%.3f", r.WallMS)})
		}
		fmt.Fprintln(w, t.Render())
		printBenchPeaks(w, c)
		return
	}
	t.AppendHeader(table.Row{"policy", "conversions", "devices", "wall prefill tok/s", "wall decode tok/s", "copies/token", "KiB/token",
		"predicted ms/token", "accounted ms/token", "of which fp16 conversions", "accounted prefill tok/s", "accounted decode tok/s",
		"wall ms/token"})
	for _, r := range c.Policies {
		conv := "-"
		if r.FP16Ops > 0 {
			conv = fmt.Sprintf("%s (%d fp16 ops)", r.Conversions, r.FP16Ops)
		}
		t.AppendRow(table.Row{r.Policy, conv, r.Devices, fmt.Sprintf("%.2f", r.PrefillTokS), fmt.Sprintf("%.2f", r.DecodeTokS),
			fmt.Sprintf("%.1f", r.CopiesPerToken), fmt.Sprintf("%.1f", r.BytesPerToken/1024),
			fmt.Sprintf("%.3f", r.PredictedMS), fmt.Sprintf("%.3f", r.AccountedMS), fmt.Sprintf("%.4f", r.ConvertMS),
			fmt.Sprintf("%.2f", r.AccountedPrefillTokS), fmt.Sprintf("%.2f", r.AccountedDecodeTokS), fmt.Sprintf("%.3f", r.WallMS)})
	}
	fmt.Fprintln(w, t.Render())
}

// printBreakdown prints where a decode step's time went, by op.
func printBreakdown(w io.Writer, b *runtime.Breakdown) {
	fmt.Fprintf(w, "decode step by op (%d tokens at depth %d, each op timed alone): %.3f ms/token\n", b.Tokens, b.Depth, b.WallMS)
	t := table.NewWriter()
	t.AppendHeader(table.Row{"op", "kind", "device", "per step", "ms/token", "share", "weights MiB", "weights GB/s"})
	var sum float64
	for _, o := range b.Ops {
		sum += o.MS
		mib, gbs := "", ""
		if o.WeightBytes > 0 {
			mib, gbs = fmt.Sprintf("%.1f", float64(o.WeightBytes)/(1<<20)), fmt.Sprintf("%.1f", o.GBs())
		}
		t.AppendRow(table.Row{o.Op, o.Kind, o.Device, o.PerStep, fmt.Sprintf("%.3f", o.MS), share(o.MS, b.WallMS), mib, gbs})
	}
	if b.CopiesMS > 0 {
		t.AppendRow(table.Row{"copies between devices", "", "", "", fmt.Sprintf("%.3f", b.CopiesMS), share(b.CopiesMS, b.WallMS)})
	}
	rest := b.WallMS - sum - b.CopiesMS
	t.AppendRow(table.Row{"rest of the step", "", "", "", fmt.Sprintf("%.3f", rest), share(rest, b.WallMS)})
	fmt.Fprintln(w, t.Render())
}

func share(part, whole float64) string {
	if whole <= 0 {
		return ""
	}
	return fmt.Sprintf("%.1f%%", 100*part/whole)
}
