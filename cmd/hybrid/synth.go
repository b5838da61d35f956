package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"hybrid/models/gguf"
	"hybrid/models/synth"
	"hybrid/runtime"
)

func synthCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("synth", stderr)
	preset := fs.String("preset", "", "model shape: "+strings.Join(synth.PresetNames(), ", "))
	typ := fs.String("type", "Q4_K_M", "weight type or mix: "+strings.Join(synth.FileTypeNames(), ", "))
	seed := fs.Uint64("seed", 1, "random seed; the same seed gives the same weights in every type")
	out := fs.String("o", "", "output GGUF `file` (written atomically)")
	threads := fs.Int("threads", 0, "threads that quantize; 0 uses every core")
	vocab := fs.String("vocab", "", "GGUF `file` whose tokenizer.* keys the model gets (a llama.cpp vocabulary file); its token count must be the preset's")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *preset == "" || *out == "" {
		fmt.Fprintln(stderr, "hybrid synth: --preset and -o are required")
		fs.Usage()
		return errUsage
	}
	// The writer makes a slot per thread before it starts any.
	if *threads < 0 || *threads > runtime.MaxThreads {
		return badFlag(fs, "--threads %d: want 0 (every core) or 1..%d", *threads, runtime.MaxThreads)
	}
	p, err := synth.LookupPreset(*preset)
	if err != nil {
		return err
	}
	ft, err := synth.LookupFileType(*typ)
	if err != nil {
		return err
	}
	var vkv []gguf.KV
	if *vocab != "" {
		f, err := gguf.Open(*vocab)
		if err != nil {
			return err
		}
		// The keys' values are copied out of the mapping when parsed, so
		// the file may close before they are written.
		vkv, err = synth.VocabKVs(f, *vocab)
		f.Close()
		if err != nil {
			return err
		}
	}
	prog, done := bar(stderr, "writing "+*out)
	start := time.Now()
	err = synth.Write(*out, synth.Options{Preset: p, Type: ft, Seed: *seed, Threads: *threads, Progress: prog, Vocab: vkv})
	done()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s %s, %.2fB parameters, seed %d, in %.1fs\n",
		*out, p.Name, ft.Name, float64(p.Params())/1e9, *seed, time.Since(start).Seconds())
	return nil
}
