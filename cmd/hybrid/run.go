package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"time"
	"unicode/utf8"

	"hybrid/devices"
	"hybrid/internal/filekind"
	"hybrid/models/llama"
	"hybrid/runtime"
)

func runCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", stderr)
	model := fs.String("model", "", "GGUF model `file` (default: the built-in stories260K)")
	prompt := fs.String("prompt", "Once upon a time", "prompt `text`")
	file := fs.String("file", "", "read the prompt from this `file` (- for standard input) instead of --prompt: a regular file of at most 16 MiB of UTF-8")
	n := fs.Int("n", 128, "tokens to generate at most")
	def := runtime.DefaultSampler()
	temp := fs.Float64("temp", float64(def.Temp), "sampling temperature; 0 is greedy")
	topK := fs.Int("top-k", def.TopK, "keep the k most likely tokens; 0 keeps all")
	topP := fs.Float64("top-p", float64(def.TopP), "keep the smallest set of tokens whose probability reaches p")
	rp := fs.Float64("repeat-penalty", float64(def.RepeatPenalty), "penalty for repeating the last 64 tokens; 1 is off")
	seed := fs.Int64("seed", -1, "sampling seed; -1 picks one from the clock")
	threads := fs.Int("threads", 0, "CPU threads; 0 uses every core")
	ctx := fs.Int("ctx", 0, "context size in tokens; 0 uses the model's, at most 4096; more than the model's needs --ctx-override")
	override := fs.Bool("ctx-override", false, ctxOverrideUsage)
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
		return badFlag(fs, "--logits needs --json")
	}
	if *transfers != "boundary" && *transfers != "per-op" {
		return badFlag(fs, "--transfers is %q: want boundary or per-op", *transfers)
	}
	if *file != "" && isSet(fs, "prompt") {
		return badFlag(fs, "--prompt and --file both give the prompt: use one")
	}
	if *n < 0 {
		return badFlag(fs, "-n %d: want 0 or more tokens", *n)
	}
	if err := checkDeviceFlags(fs, *threads, *cpus); err != nil {
		return err
	}
	if err := checkContextFlag(fs, *ctx); err != nil {
		return err
	}
	if *file != "" {
		text, err := readPrompt(*file)
		if err != nil {
			return err
		}
		*prompt = text
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
	m, c, err := loadModel(fs, stderr, *model, *ctx, *override)
	if err != nil {
		return err
	}
	defer m.Close()
	sess, err := runtime.NewSession(m, runtime.SessionOptions{Policy: *policy, Hardware: *hardware, Profile: *profile,
		Threads: *threads, CPUs: *cpus, Context: c, ContextOverride: *override, PerOp: *transfers == "per-op"})
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
			printStepSummary(stderr, sess, res)
			printRunSummary(stderr, sess)
		}
		printMemoryPeaks(stderr, ex.Devices())
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
	out.MemoryPeaks = runtime.MemoryPeaks(ex.Devices())
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
	// MemoryPeaks is what each device that keeps it (a GPU) held at its
	// peak, by device name.
	MemoryPeaks map[string]devices.MemoryPeak `json:"memory_peaks,omitempty"`
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

// badFlag reports a flag whose value is out of range or that does not go
// with another: a usage error (exit 2). Main prints nothing for errUsage, so
// the line is printed here: "hybrid run: --threads -5: want ...".
func badFlag(fs *flag.FlagSet, format string, args ...any) error {
	fmt.Fprintf(fs.Output(), "%s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	return errUsage
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// checkDeviceFlags checks --threads and --cpus before any device is made
// from them (the runtime checks them again).
func checkDeviceFlags(fs *flag.FlagSet, threads, cpus int) error {
	if threads < 0 || threads > runtime.MaxThreads {
		return badFlag(fs, "--threads %d: want 0 (every core) or 1..%d", threads, runtime.MaxThreads)
	}
	if cpus < 0 || cpus > runtime.MaxCPUs {
		return badFlag(fs, "--cpus %d: want 0..%d separate CPU devices", cpus, runtime.MaxCPUs)
	}
	return nil
}

// ctxOverrideUsage is the usage of every command's --ctx-override.
var ctxOverrideUsage = fmt.Sprintf("allow a --ctx past the model's context length, up to %d positions and a KV cache of half this machine's memory", runtime.MaxContext)

// defaultContext is the most positions --ctx 0 gives: the model's context
// length, cut to this, keeps the KV cache of a long-context model small.
const defaultContext = 4096

// checkContextFlag checks what --ctx can be checked against before the model
// is loaded.
func checkContextFlag(fs *flag.FlagSet, ctx int) error {
	if ctx < 0 || ctx > runtime.MaxContext {
		return badFlag(fs, "--ctx %d: want 0 (the model's context, at most %d) or 1..%d positions", ctx, defaultContext, runtime.MaxContext)
	}
	return nil
}

// contextSize is the context --ctx gives the model of config c: 0 is the
// model's context length, at most defaultContext; a size given is checked
// against the model's context length (more needs --ctx-override) and against
// the memory its KV cache takes (runtime.CheckContext), and one that fails is
// a usage error naming the flag. A default that does not fit this machine is
// an error of the model (exit 1).
func contextSize(fs *flag.FlagSet, c llama.Config, ctx int, override bool) (int, error) {
	if ctx == 0 {
		ctx = min(c.Context, defaultContext)
		if err := runtime.CheckContext(c, ctx, false); err != nil {
			return 0, fmt.Errorf("the default context of %d positions does not fit (give a smaller --ctx): %w", ctx, err)
		}
		return ctx, nil
	}
	if ctx > c.Context && !override {
		return 0, badFlag(fs, "--ctx %d is more than the model's context length of %d positions; --ctx-override allows up to %d", ctx, c.Context, runtime.MaxContext)
	}
	if err := runtime.CheckContext(c, ctx, override); err != nil {
		return 0, badFlag(fs, "--ctx %d: %v", ctx, err)
	}
	return ctx, nil
}

// maxPromptBytes bounds a prompt read with --file. 16 MiB is four times the
// text of the longest context hybrid allows (runtime.MaxContext positions of
// about 4 bytes of English a token), so no larger prompt could fit.
const maxPromptBytes = 16 << 20

// stdin is what --file - reads; a test replaces it.
var stdin io.Reader = os.Stdin

// readPrompt reads the prompt of --file path: a regular file, or standard
// input for "-", of at most maxPromptBytes of UTF-8. Its errors name the
// file: they are bad input (exit 1).
// loadModel loads the model at path (the built-in one when empty) behind a
// progress bar on stderr, and sizes its context from the --ctx flag.
func loadModel(fs *flag.FlagSet, stderr io.Writer, path string, ctx int, override bool) (*llama.Model, int, error) {
	prog, done := bar(stderr, "loading "+path)
	m, err := runtime.LoadModel(path, prog)
	done()
	if err != nil {
		return nil, 0, err
	}
	c, err := contextSize(fs, m.Config, ctx, override)
	if err != nil {
		m.Close()
		return nil, 0, err
	}
	return m, c, nil
}

func readPrompt(path string) (string, error) {
	name, r := "standard input", stdin
	if path != "-" {
		name = path
		// Stat before opening: opening a named pipe would wait for a writer.
		st, err := os.Stat(path)
		if err != nil {
			return "", fmt.Errorf("--file: %w", err)
		}
		if !st.Mode().IsRegular() {
			return "", fmt.Errorf("--file %s: %s, not a regular file (use --file - to read standard input)", path, filekind.Of(st.Mode()))
		}
		if st.Size() > maxPromptBytes {
			return "", fmt.Errorf("--file %s: %d bytes, more than the %d (16 MiB) a prompt may have", path, st.Size(), maxPromptBytes)
		}
		f, err := os.Open(path)
		if err != nil {
			return "", fmt.Errorf("--file: %w", err)
		}
		defer f.Close()
		r = f
	}
	// One byte past the limit tells a file that grew, or a longer input,
	// from one that fits.
	b, err := io.ReadAll(io.LimitReader(r, maxPromptBytes+1))
	if err != nil {
		return "", fmt.Errorf("--file %s: %w", name, err)
	}
	if len(b) > maxPromptBytes {
		return "", fmt.Errorf("--file %s: more than the %d bytes (16 MiB) a prompt may have", name, maxPromptBytes)
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("--file %s: not valid UTF-8 (at byte %d)", name, invalidUTF8(b))
	}
	return string(b), nil
}

// invalidUTF8 is the offset of the first byte of b that does not begin a
// valid UTF-8 sequence, or -1.
func invalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return -1
}
