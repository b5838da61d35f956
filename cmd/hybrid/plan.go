package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"hybrid/planner"
	"hybrid/runtime"
)

func planCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("plan", stderr)
	model := fs.String("model", "", "GGUF model `file` (default: the built-in stories260K)")
	policy := fs.String("policy", "auto", "placement policy name or YAML `file`")
	hardware := fs.String("hardware", "", "hardware profile (name or YAML `file`) to plan for, simulated")
	profile := fs.String("profile", "", "measured cost profile `file` from `hybrid profile`")
	cpus := fs.Int("cpus", 0, "separate CPU devices")
	threads := fs.Int("threads", 0, "CPU threads per CPU device; 0 uses every core")
	tokens := fs.Int("tokens", 1, "tokens in the step to plan: 1 is a decode step, more a prefill")
	batch := fs.Int("batch", 1, "sequences decoded together (hybrid serve --parallel N): plan their batched decode step")
	ctx := fs.Int("ctx", 0, "context size; 0 uses the model's, at most 4096; more than the model's needs --ctx-override")
	override := fs.Bool("ctx-override", false, ctxOverrideUsage)
	transfers := fs.String("transfers", "boundary", "boundary or per-op (the ablation)")
	format := fs.String("format", "table", "output: "+strings.Join(planner.Formats, ", "))
	if err := parse(fs, args); err != nil {
		return err
	}
	if *transfers != "boundary" && *transfers != "per-op" {
		return badFlag(fs, "--transfers is %q: want boundary or per-op", *transfers)
	}
	if err := checkDeviceFlags(fs, *threads, *cpus); err != nil {
		return err
	}
	if err := checkContextFlag(fs, *ctx); err != nil {
		return err
	}
	if *tokens < 1 || *tokens > runtime.MaxBatch {
		return badFlag(fs, "--tokens %d: want 1..%d", *tokens, runtime.MaxBatch)
	}
	if *batch < 1 || *batch > runtime.MaxSlots {
		return badFlag(fs, "--batch %d: want 1..%d", *batch, runtime.MaxSlots)
	}
	if *batch > 1 && *tokens > 1 {
		return badFlag(fs, "--batch %d with --tokens %d: a batched decode step has one token per sequence", *batch, *tokens)
	}
	m, err := runtime.LoadModel(*model, nil)
	if err != nil {
		return err
	}
	defer m.Close()
	c, err := contextSize(fs, m.Config, *ctx, *override)
	if err != nil {
		return err
	}
	if *tokens > c {
		return badFlag(fs, "--tokens %d: want 1..%d (the context)", *tokens, c)
	}
	sess, err := runtime.NewSession(m, runtime.SessionOptions{Policy: *policy, Hardware: *hardware, Profile: *profile,
		CPUs: *cpus, Threads: *threads, Context: c, ContextOverride: *override, PerOp: *transfers == "per-op", Batch: *batch})
	if err != nil {
		return err
	}
	defer sess.Close()
	p := sess.Plan
	if *tokens > 1 {
		if p, err = sess.PlanFor(*tokens); err != nil {
			return err
		}
	}
	if err := p.Render(stdout, *format); err != nil {
		return err
	}
	if *tokens == 1 && *batch == 1 && (*format == "table" || *format == "markdown") {
		// The other step: a prompt is planned for its own shape.
		n := min(runtime.MaxBatch, c)
		pp, err := sess.PlanFor(n)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "prefill step of %d tokens (its own plan: --tokens %d): predicted %.3f ms; ops %s", n, n, float64(pp.Predicted)/1e6, pp.PlacementText())
		if count, bytes := pp.StreamedWeights(); count > 0 {
			fmt.Fprintf(stdout, "; %d weights (%.1f MiB) streamed in", count, float64(bytes)/(1<<20))
		}
		if count, bytes := pp.StreamedCaches(); count > 0 {
			fmt.Fprintf(stdout, "; %d layers attend away from their KV cache (%.1f MiB of cells back)", count, float64(bytes)/(1<<20))
		}
		fmt.Fprintln(stdout)
		if step, piped := sess.Exec.PromptSteps(n); piped {
			// The plan is a chain of GPUs: a prompt runs in micro-batches,
			// each device on one while the next is on the one before.
			mp, err := sess.PlanFor(step)
			if err != nil {
				return err
			}
			m := (n + step - 1) / step
			fmt.Fprintf(stdout, "a prompt of %d tokens runs as %d micro-batches of %d tokens pipelined over %s: predicted %.3f ms (%.3f ms a micro-batch, one after another)\n",
				n, m, step, strings.Join(chainOf(mp), " -> "), float64(mp.Pipelined(m))/1e6, float64(mp.Predicted)/1e6)
		}
	}
	return nil
}

// chainOf lists the devices of a plan in the order its ops first visit
// them.
func chainOf(p *planner.Plan) []string {
	var out []string
	for _, d := range p.Device {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}
