// Command accuracy measures what the simulated Neural Engine's fp16
// arithmetic does to a model's output: for every model and reference prompt
// it runs cpu-only and each policy over a hardware profile's simulated
// devices, greedy, and compares them with cpu-only:
//
//   - the first step's logits: max and mean of |Δlogit| / max|logit|;
//   - the generated tokens: how many lead identical, and the position of the
//     first divergence, with cpu-only's margin there (top-1 minus top-2
//     logit: a small one is a near-tie that any rounding may flip).
//
// It prints a markdown table and, with -json, writes the numbers to a file
// (atomically). Usage:
//
//	go run ./bench/mac/accuracy -models ../shared/models [-n 32] [-policies metal-only,mac-hybrid] [-hardware m4-pro] [-json out.json]
//
// Without -models it uses the built-in stories260K and the prompts of the
// shared references (p1 and p2).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"

	"hybrid/internal/atomicfile"
	"hybrid/models/llama"
	"hybrid/runtime"
)

// defaultPrompts are the shared references' prompts (../shared/models/README.md).
var defaultPrompts = []string{"Once upon a time", "Lily and Tom went to the park. They"}

// Run is one model, prompt and policy compared with cpu-only.
type Run struct {
	Model  string `json:"model"`
	Prompt string `json:"prompt"`
	Policy string `json:"policy"`
	// FP16Ops is how many ops of a decode step run on an fp16 device, of
	// Ops.
	FP16Ops   int            `json:"fp16_ops"`
	Ops       int            `json:"ops"`
	Placement map[string]int `json:"placement"`
	// MaxRel and MeanRel are max and mean |Δlogit| / max|cpu-only logit|
	// over the vocabulary after the prompt.
	MaxRel  float64 `json:"max_rel_logit_error"`
	MeanRel float64 `json:"mean_rel_logit_error"`
	// Same is how many generated tokens lead identical to cpu-only's, of
	// Generated (cpu-only's count); Diverge is the position (0-based, in
	// the generated tokens) of the first difference, -1 for none, and
	// Margin cpu-only's top-1 minus top-2 logit there.
	Same      int     `json:"same"`
	Generated int     `json:"generated"`
	Diverge   int     `json:"diverge"`
	Margin    float64 `json:"margin_at_divergence,omitempty"`
}

// generation is one greedy run.
type generation struct {
	first   []float32 // logits after the prompt
	tokens  []int32
	margins []float64 // top-1 minus top-2 logit before each token
	fp16    int
	ops     int
	place   map[string]int
}

// generate runs m greedily under policy for at most n tokens after prompt.
func generate(m *llama.Model, prompt, policy, hardware string, n, threads int) (*generation, error) {
	ids := m.Tokenizer.Encode(prompt, true)
	ctx := len(ids) + n + 1
	s, err := runtime.NewSession(m, runtime.SessionOptions{Policy: policy, Hardware: hardware, Threads: threads, Context: ctx})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	g := &generation{ops: len(s.Plan.Device), place: s.Plan.Placement()}
	prec := map[string]string{}
	for _, d := range s.Plan.Devices {
		prec[d.Name] = d.Precision
	}
	for _, d := range s.Plan.Device {
		if prec[d] == "f16" {
			g.fp16++
		}
	}
	logits, err := s.Exec.Prefill(ids, 0)
	if err != nil {
		return nil, err
	}
	g.first = slices.Clone(logits)
	for pos := len(ids); len(g.tokens) < n; pos++ {
		id := runtime.Greedy(logits)
		g.margins = append(g.margins, margin(logits, id))
		if m.Tokenizer.IsEOG(id) {
			break
		}
		g.tokens = append(g.tokens, id)
		if len(g.tokens) == n {
			break
		}
		if logits, err = s.Exec.Forward([]int32{id}, pos); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// margin is the top logit minus the best other one.
func margin(logits []float32, top int32) float64 {
	second := math.Inf(-1)
	for i, l := range logits {
		if int32(i) != top {
			second = max(second, float64(l))
		}
	}
	return float64(logits[top]) - second
}

// logitError is max and mean |got - ref| / max|ref|.
func logitError(got, ref []float32) (maxRel, meanRel float64) {
	var scale, sum float64
	for _, r := range ref {
		scale = max(scale, math.Abs(float64(r)))
	}
	for i, r := range ref {
		d := math.Abs(float64(got[i]) - float64(r))
		maxRel = max(maxRel, d)
		sum += d
	}
	return maxRel / scale, sum / float64(len(ref)) / scale
}

// compare fills a Run from a policy's generation and cpu-only's.
func compare(got, ref *generation) Run {
	r := Run{FP16Ops: got.fp16, Ops: got.ops, Placement: got.place, Generated: len(ref.tokens), Diverge: -1}
	r.MaxRel, r.MeanRel = logitError(got.first, ref.first)
	for r.Same < min(len(got.tokens), len(ref.tokens)) && got.tokens[r.Same] == ref.tokens[r.Same] {
		r.Same++
	}
	if r.Same < max(len(got.tokens), len(ref.tokens)) {
		r.Diverge = r.Same
		if r.Same < len(ref.margins) {
			r.Margin = ref.margins[r.Same]
		}
	}
	return r
}

// Measure compares every policy with cpu-only on model (a path, or "" for
// the built-in model) for each prompt.
func Measure(model string, prompts, policies []string, hardware string, n, threads int) ([]Run, error) {
	m, err := runtime.LoadModel(model, nil)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	name := filepath.Base(m.Path)
	var out []Run
	for _, p := range prompts {
		ref, err := generate(m, p, "cpu-only", "", n, threads)
		if err != nil {
			return nil, fmt.Errorf("%s, cpu-only: %w", name, err)
		}
		for _, pol := range policies {
			g, err := generate(m, p, pol, hardware, n, threads)
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", name, pol, err)
			}
			r := compare(g, ref)
			r.Model, r.Prompt, r.Policy = name, p, pol
			out = append(out, r)
		}
	}
	return out, nil
}

// referencePrompts reads the prompts of the references for model in dir
// (reference/<model>.p*.json).
func referencePrompts(dir, model string) ([]string, error) {
	base := strings.TrimSuffix(filepath.Base(model), ".gguf")
	files, err := filepath.Glob(filepath.Join(dir, "reference", base+".p*.json"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no reference prompts for %s in %s/reference", base, dir)
	}
	slices.Sort(files)
	var ps []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var ref struct {
			Prompt string `json:"prompt"`
		}
		if err := json.Unmarshal(b, &ref); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if ref.Prompt == "" {
			return nil, fmt.Errorf("%s: no prompt", f)
		}
		ps = append(ps, ref.Prompt)
	}
	return ps, nil
}

// render writes runs as a markdown table.
func render(w io.Writer, runs []Run) {
	t := table.NewWriter()
	t.AppendHeader(table.Row{"model", "prompt", "policy", "fp16 ops/step", "max rel. logit error", "mean rel. logit error",
		"tokens identical", "first divergence (cpu-only margin)"})
	for _, r := range runs {
		div := "none"
		if r.Diverge >= 0 {
			div = fmt.Sprintf("token %d (%.3g)", r.Diverge, r.Margin)
		}
		t.AppendRow(table.Row{r.Model, r.Prompt, r.Policy, fmt.Sprintf("%d of %d", r.FP16Ops, r.Ops),
			fmt.Sprintf("%.2e", r.MaxRel), fmt.Sprintf("%.2e", r.MeanRel), fmt.Sprintf("%d/%d", r.Same, r.Generated), div})
	}
	fmt.Fprintln(w, t.RenderMarkdown())
}

// writeAtomic writes b to path with internal/atomicfile: through a temporary
// file beside it, renamed into place.
func writeAtomic(path string, b []byte) error {
	return atomicfile.Write(path, b, 0o644)
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "accuracy:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("accuracy", flag.ContinueOnError)
	models := fs.String("models", "", "folder of GGUF models with reference/<model>.p*.json prompts (../shared/models); empty: the built-in stories260K")
	n := fs.Int("n", 32, "tokens to generate")
	policies := fs.String("policies", "metal-only,mac-hybrid", "policies (names or files) to compare with cpu-only, comma-separated")
	hardware := fs.String("hardware", "m4-pro", "hardware profile whose devices the policies run on, simulated")
	threads := fs.Int("threads", 2, "CPU threads")
	out := fs.String("json", "", "also write the runs as JSON to this `file`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *n <= 0 {
		return fmt.Errorf("-n %d: want at least one token", *n)
	}
	var pols []string
	for _, p := range strings.Split(*policies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			pols = append(pols, p)
		}
	}
	if len(pols) == 0 {
		return fmt.Errorf("-policies names no policy")
	}
	type job struct {
		model   string
		prompts []string
	}
	jobs := []job{{"", defaultPrompts}}
	if *models != "" {
		files, err := filepath.Glob(filepath.Join(*models, "*.gguf"))
		if err != nil || len(files) == 0 {
			return fmt.Errorf("no .gguf models in %s", *models)
		}
		slices.Sort(files)
		jobs = nil
		for _, f := range files {
			ps, err := referencePrompts(*models, f)
			if err != nil {
				return err
			}
			jobs = append(jobs, job{f, ps})
		}
	}
	var runs []Run
	for _, j := range jobs {
		rs, err := Measure(j.model, j.prompts, pols, *hardware, *n, *threads)
		if err != nil {
			return err
		}
		runs = append(runs, rs...)
	}
	render(stdout, runs)
	if *out != "" {
		b, err := json.MarshalIndent(struct {
			Hardware string `json:"hardware"`
			Tokens   int    `json:"n"`
			Runs     []Run  `json:"runs"`
		}{*hardware, *n, runs}, "", "  ")
		if err != nil {
			return err
		}
		return writeAtomic(*out, append(b, '\n'))
	}
	return nil
}
