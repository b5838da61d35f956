package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"hybrid/runtime"
)

func runCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", stderr)
	model := fs.String("model", "", "GGUF model `file` (default: the built-in stories260K)")
	prompt := fs.String("prompt", "Once upon a time", "prompt `text`")
	n := fs.Int("n", 128, "tokens to generate at most")
	def := runtime.DefaultSampler()
	temp := fs.Float64("temp", float64(def.Temp), "sampling temperature; 0 is greedy")
	topK := fs.Int("top-k", def.TopK, "keep the k most likely tokens; 0 keeps all")
	topP := fs.Float64("top-p", float64(def.TopP), "keep the smallest set of tokens whose probability reaches p")
	rp := fs.Float64("repeat-penalty", float64(def.RepeatPenalty), "penalty for repeating the last 64 tokens; 1 is off")
	seed := fs.Int64("seed", -1, "sampling seed; -1 picks one from the clock")
	threads := fs.Int("threads", 0, "CPU threads; 0 uses every core")
	ctx := fs.Int("ctx", 0, "context size in tokens; 0 uses the model's, at most 4096")
	policy := fs.String("policy", "auto", "placement policy: a name in configs/policies (auto, cpu-only, cpu-split, mac-hybrid, ...) or a YAML `file`")
	hardware := fs.String("hardware", "", "hardware profile (name or YAML `file`) whose devices are added, simulated")
	profile := fs.String("profile", "", "measured cost profile `file` from `hybrid profile`")
	cpus := fs.Int("cpus", 0, "separate CPU devices (cpu, cpu:1, ...), each with its own buffers and threads")
	transfers := fs.String("transfers", "boundary", "boundary: copy values only where they cross devices; per-op: a host round trip around every op (the ablation)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of streaming text")
	logits := fs.Bool("logits", false, "with --json, add first_logits: the vocabulary's logits after the prompt")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *logits && !*asJSON {
		return fmt.Errorf("--logits needs --json")
	}
	if *transfers != "boundary" && *transfers != "per-op" {
		return fmt.Errorf("--transfers is %q: want boundary or per-op", *transfers)
	}
	sc := runtime.SamplerConfig{
		Temp: float32(*temp), TopK: *topK, TopP: float32(*topP),
		RepeatPenalty: float32(*rp), RepeatLastN: def.RepeatLastN, Seed: uint64(*seed),
	}
	if *seed < 0 {
		sc.Seed = uint64(time.Now().UnixNano())
	}
	if err := sc.Validate(); err != nil {
		return err
	}

	t0 := time.Now()
	prog, done := bar(stderr, "loading "+*model)
	m, err := runtime.LoadModel(*model, prog)
	done()
	if err != nil {
		return err
	}
	defer m.Close()
	c := *ctx
	if c == 0 {
		c = min(m.Config.Context, 4096)
	}
	sess, err := runtime.NewSession(m, runtime.SessionOptions{Policy: *policy, Hardware: *hardware, Profile: *profile,
		Threads: *threads, CPUs: *cpus, Context: c, PerOp: *transfers == "per-op"})
	if err != nil {
		return err
	}
	defer sess.Close()
	ex := sess.Exec
	loadMs := float64(time.Since(t0)) / float64(time.Millisecond)

	opts := runtime.GenerateOptions{Prompt: *prompt, MaxTokens: *n, Sampler: sc, KeepLogits: *logits}
	if !*asJSON {
		fmt.Fprint(stdout, *prompt)
		opts.OnText = func(s string) { fmt.Fprint(stdout, s) }
	}
	res, err := ex.Generate(opts)
	if err != nil {
		if !*asJSON {
			fmt.Fprintln(stdout)
		}
		return err
	}
	if !*asJSON {
		fmt.Fprintln(stdout)
		t := res.Timings
		fmt.Fprintf(stderr, "\n%s, policy %s on %s: load %.0f ms · prompt %d tokens at %.1f tok/s · generated %d tokens at %.1f tok/s (%s)\n",
			m.Path, sess.Policy.Name, ex.DeviceList(), loadMs, len(res.PromptTokens), t.PrefillTokS, len(res.Tokens), t.DecodeTokS, res.StopReason)
		if len(ex.Devices()) > 1 || *transfers != "boundary" {
			printRunSummary(stderr, sess)
		}
		return nil
	}
	out := runJSON{
		Model:           m.Path,
		Prompt:          *prompt,
		PromptTokens:    res.PromptTokens,
		GeneratedTokens: res.Tokens,
		Text:            res.Text,
		StopReason:      res.StopReason,
		Seed:            sc.Seed,
		Device:          ex.DeviceList(),
		Threads:         *threads,
		Context:         c,
		Policy:          sess.Policy.Name,
		Placement:       sess.Plan.Placement(),
		Transfers:       transfersJSON{Count: ex.Stats.Copies.Count, Bytes: ex.Stats.Copies.Bytes},
		Timings: timingsJSON{
			LoadMs: loadMs, PrefillMs: res.Timings.PrefillMs, PrefillTokS: res.Timings.PrefillTokS,
			DecodeMs: res.Timings.DecodeMs, DecodeTokS: res.Timings.DecodeTokS,
		},
	}
	if *logits {
		out.FirstLogits = make([]jsonFloat, len(res.FirstLogits))
		for i, l := range res.FirstLogits {
			out.FirstLogits[i] = jsonFloat(l)
		}
	}
	enc := json.NewEncoder(stdout)
	return enc.Encode(out)
}

type runJSON struct {
	Model           string         `json:"model"`
	Prompt          string         `json:"prompt"`
	PromptTokens    []int32        `json:"prompt_tokens"`
	GeneratedTokens []int32        `json:"generated_tokens"`
	Text            string         `json:"text"`
	StopReason      string         `json:"stop_reason"`
	Seed            uint64         `json:"seed"`
	Device          string         `json:"device"`
	Threads         int            `json:"threads"`
	Context         int            `json:"context"`
	Policy          string         `json:"policy"`
	Placement       map[string]int `json:"placement"`
	Transfers       transfersJSON  `json:"transfers"`
	Timings         timingsJSON    `json:"timings"`
	FirstLogits     []jsonFloat    `json:"first_logits,omitempty"`
}

type transfersJSON struct {
	Count int   `json:"count"`
	Bytes int64 `json:"bytes"`
}

type timingsJSON struct {
	LoadMs      float64 `json:"load_ms"`
	PrefillMs   float64 `json:"prefill_ms"`
	PrefillTokS float64 `json:"prefill_tokens_per_s"`
	DecodeMs    float64 `json:"decode_ms"`
	DecodeTokS  float64 `json:"decode_tokens_per_s"`
}

// jsonFloat is an f32 that encodes with the shortest decimal that round-trips
// as f32 (not f64), and NaN/Inf as null rather than failing the whole object.
type jsonFloat float32

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return []byte(fmt.Sprint(float32(f))), nil
}
