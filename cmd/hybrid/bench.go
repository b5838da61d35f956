package main

import (
	"encoding/json"
	"fmt"
	"io"

	"hybrid/devices/cpu"
	"hybrid/runtime"
)

func benchCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", stderr)
	model := fs.String("model", "", "GGUF model `file` (default: the built-in stories260K)")
	nPrompt := fs.Int("p", 512, "prompt tokens to prefill")
	nGen := fs.Int("n", 128, "tokens to decode")
	reps := fs.Int("r", 3, "repetitions")
	threads := fs.Int("threads", 0, "CPU threads; 0 uses every core")
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
	dev := cpu.New("cpu", *threads)
	defer dev.Close()
	ex, err := runtime.NewExecutor(m, dev, max(*nPrompt, *nGen, 1))
	if err != nil {
		return err
	}
	res, err := ex.Bench(*nPrompt, *nGen, *reps, 42)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(struct {
			Model   string `json:"model"`
			Threads int    `json:"threads"`
			*runtime.BenchResult
		}{m.Path, dev.Threads(), res})
	}
	fmt.Fprintf(stdout, "%s, cpu, %d threads\n", m.Path, dev.Threads())
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
