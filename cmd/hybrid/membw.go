package main

import (
	"encoding/json"
	"fmt"
	"io"
	goruntime "runtime"

	"hybrid/devices/cpu/kernels"
)

// maxMembwMiB bounds --size: the buffer is allocated whole.
const maxMembwMiB = 16 << 10

func membwCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("membw", stderr)
	threads := fs.Int("threads", 0, "CPU threads reading; 0 uses every core")
	size := fs.Int("size", 1024, "buffer `MiB`, far larger than the caches")
	reps := fs.Int("r", 5, "passes; the best is reported, 1..100")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := checkDeviceFlags(fs, *threads, 0); err != nil {
		return err
	}
	if *size < 64 || *size > maxMembwMiB {
		return badFlag(fs, "--size %d: want 64..%d MiB", *size, maxMembwMiB)
	}
	if *reps < 1 || *reps > 100 {
		return badFlag(fs, "-r %d: want 1..100 passes", *reps)
	}
	n := *threads
	if n == 0 {
		n = goruntime.NumCPU()
	}
	p := kernels.NewPool(n)
	defer p.Close()
	bw := kernels.ReadBandwidth(p, *size<<20, *reps)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"threads": n, "size_mib": *size, "read_bytes_per_s": bw})
	}
	_, err := fmt.Fprintf(stdout, "read bandwidth: %.1f GB/s (%d threads, %d MiB, best of %d)\n", bw/1e9, n, *size, *reps)
	return err
}
