package main

import (
	"fmt"
	"io"

	"hybrid/internal/atomicfile"
	"hybrid/runtime"
)

// maxProfileSteps bounds --steps: each is a whole forward step per op shape
// and device, and the default of 5 already averages out timer noise.
const maxProfileSteps = 1000

func profileCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("profile", stderr)
	model := fs.String("model", "", "GGUF model `file` whose ops to measure (default: the built-in stories260K)")
	out := fs.String("o", "profile.yaml", "output YAML `file` (written atomically)")
	cpus := fs.Int("cpus", 0, "separate CPU devices")
	threads := fs.Int("threads", 0, "CPU threads per CPU device")
	prefill := fs.Int("prefill", 64, "also measure a prefill step of this many tokens (0: decode only), at most 512")
	steps := fs.Int("steps", 5, "timed steps per measurement, 1..1000")
	ctx := fs.Int("ctx", 512, "context size, at most the model's (0: the model's, at most 4096); more needs --ctx-override")
	override := fs.Bool("ctx-override", false, ctxOverrideUsage)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := checkDeviceFlags(fs, *threads, *cpus); err != nil {
		return err
	}
	if err := checkContextFlag(fs, *ctx); err != nil {
		return err
	}
	// Each measurement divides by the steps it timed.
	if *steps < 1 || *steps > maxProfileSteps {
		return badFlag(fs, "--steps %d: want 1..%d timed steps", *steps, maxProfileSteps)
	}
	if *prefill < 0 || *prefill > runtime.MaxBatch {
		return badFlag(fs, "--prefill %d: want 0 (decode only) or 1..%d tokens", *prefill, runtime.MaxBatch)
	}
	if err := atomicfile.Check(*out); err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	m, err := runtime.LoadModel(*model, nil)
	if err != nil {
		return err
	}
	defer m.Close()
	c := *ctx
	if !isSet(fs, "ctx") {
		// The default is cut to a model of a shorter context.
		c = min(c, m.Config.Context)
	}
	if c, err = contextSize(fs, m.Config, c, *override); err != nil {
		return err
	}
	devs, _, _, err := runtime.Devices(runtime.SessionOptions{CPUs: *cpus, Threads: *threads})
	if err != nil {
		return err
	}
	defer func() {
		for _, d := range devs {
			d.Close()
		}
	}()
	p, err := runtime.MeasureProfile(m, devs, c, *prefill, *steps)
	if err != nil {
		return err
	}
	if err := p.Save(*out); err != nil {
		return err
	}
	n := 0
	for _, d := range p.Devices {
		n += len(d.Ops)
	}
	fmt.Fprintf(stdout, "wrote %s: %d op shapes on %d device(s)\n", *out, n, len(p.Devices))
	return nil
}
