package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"

	"hybrid/runtime"
	"hybrid/verify"
)

func verifyCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("verify", stderr)
	device := fs.String("device", "metal", "device to check: a name (cpu:1, cuda:0) or a kind (metal, coreml, cuda)")
	models := fs.String("models", os.Getenv("HYBRID_TEST_MODELS"), "`dir`ectory whose *.gguf models to generate with (default $HYBRID_TEST_MODELS; none: the built-in stories260K)")
	policies := fs.String("policies", "", "comma-separated policies whose greedy tokens must equal cpu-only's (default by the device's kind: metal-only,mac-hybrid for metal)")
	hardware := fs.String("hardware", "", "hardware profile whose simulated devices the policies may use")
	seed := fs.Uint64("seed", 1, "seed of the random op inputs")
	threads := fs.Int("threads", 0, "CPU threads per CPU device; 0 uses every core")
	n := fs.Int("n", 32, "tokens to generate per model and policy")
	prompt := fs.String("prompt", "Once upon a time", "prompt `text`")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := checkDeviceFlags(fs, *threads, 0); err != nil {
		return err
	}
	if *n < 1 || *n > runtime.MaxContext {
		return badFlag(fs, "-n %d: want 1..%d tokens", *n, runtime.MaxContext)
	}
	o := verify.Options{Device: *device, Hardware: *hardware, Seed: *seed, Threads: *threads, Tokens: *n, Prompt: *prompt}
	if *policies != "" {
		for _, p := range strings.Split(*policies, ",") {
			if p = strings.TrimSpace(p); p != "" {
				o.Policies = append(o.Policies, p)
			}
		}
	}
	if *models != "" {
		files, err := filepath.Glob(filepath.Join(*models, "*.gguf"))
		if err != nil || len(files) == 0 {
			return fmt.Errorf("--models %s: no *.gguf files", *models)
		}
		sort.Strings(files)
		o.Models = files
	}
	rep, err := verify.Run(o)
	if rep != nil {
		printVerify(stdout, rep)
	}
	if err != nil {
		return err
	}
	if f := rep.Failed(); f > 0 {
		return fmt.Errorf("%s: %d of %d checks failed", rep.Device.Name, f, len(rep.Results))
	}
	return nil
}

// printVerify prints one row per check and a count of outcomes.
func printVerify(w io.Writer, rep *verify.Report) {
	in := rep.Device
	prec := in.Precision
	if prec == "" {
		prec = "f32"
	}
	fmt.Fprintf(w, "verifying %s (%s; %s) against the CPU device\n", in.Name, in.Detail, prec)
	t := table.NewWriter()
	t.AppendHeader(table.Row{"part", "check", "metric", "error", "tolerance", "result", "note"})
	count := map[verify.Status]int{}
	for _, r := range rep.Results {
		count[r.Status]++
		errText, tolText := "-", "-"
		if r.Status != verify.Skip && r.Metric != "" {
			errText = fmt.Sprintf("%.2g", r.Err)
		}
		if r.Tol > 0 && r.Status != verify.Skip {
			tolText = fmt.Sprintf("%.0e", r.Tol)
		}
		t.AppendRow(table.Row{r.Part, r.Name, r.Metric, errText, tolText, string(r.Status), r.Note})
	}
	fmt.Fprintln(w, t.Render())
	fmt.Fprintf(w, "%d checks: %d passed, %d failed, %d skipped\n", len(rep.Results), count[verify.Pass], count[verify.Fail], count[verify.Skip])
}
