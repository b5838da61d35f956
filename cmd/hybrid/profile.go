package main

import (
	"fmt"
	"io"

	"hybrid/runtime"
)

func profileCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("profile", stderr)
	model := fs.String("model", "", "GGUF model `file` whose ops to measure (default: the built-in stories260K)")
	out := fs.String("o", "profile.yaml", "output YAML `file` (written atomically)")
	cpus := fs.Int("cpus", 0, "separate CPU devices")
	threads := fs.Int("threads", 0, "CPU threads per CPU device")
	prefill := fs.Int("prefill", 64, "also measure a prefill step of this many tokens (0: decode only)")
	steps := fs.Int("steps", 5, "timed steps per measurement")
	ctx := fs.Int("ctx", 512, "context size")
	if err := parse(fs, args); err != nil {
		return err
	}
	m, err := runtime.LoadModel(*model, nil)
	if err != nil {
		return err
	}
	defer m.Close()
	devs, _, _, err := runtime.Devices(runtime.SessionOptions{CPUs: *cpus, Threads: *threads})
	if err != nil {
		return err
	}
	defer func() {
		for _, d := range devs {
			d.Close()
		}
	}()
	p, err := runtime.MeasureProfile(m, devs, min(*ctx, m.Config.Context), *prefill, *steps)
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
