package runtime

import (
	"fmt"
	"time"

	"hybrid/devices"
	"hybrid/models/llama"
	"hybrid/planner"
)

// MeasureProfile measures every op of m's decode step (and of a prefill step
// of prefill tokens, if > 1) on each device, by running the whole model on
// that device alone for steps steps and averaging each op kind and shape, and
// the copies between every ordered pair of devices, fitted as a fixed latency
// plus bytes over bandwidth. Simulated devices are skipped: their costs are
// their hardware profile's.
func MeasureProfile(m *llama.Model, devs []devices.Device, ctx, prefill, steps int) (*planner.Profile, error) {
	if steps < 1 {
		return nil, fmt.Errorf("runtime: a profile needs at least one timed step, got %d", steps)
	}
	if prefill < 0 || ctx < 1 {
		return nil, fmt.Errorf("runtime: profile of prefill %d tokens in a context of %d", prefill, ctx)
	}
	p := &planner.Profile{Model: m.Path, Taken: time.Now().UTC().Format(time.RFC3339), Devices: map[string]*planner.DeviceProfile{}}
	var real []devices.Device
	for _, d := range devs {
		if !d.Info().Simulated {
			real = append(real, d)
		}
	}
	for _, d := range real {
		dp := &planner.DeviceProfile{Ops: map[string]float64{}, Copies: map[string]planner.CopyFit{}}
		p.Devices[planner.Identity(d.Info())] = dp
		ex, err := NewPlanExecutor(m, []devices.Device{d}, ctx, Options{SyncEachOp: true})
		if err != nil {
			return nil, err
		}
		shapes := []int{1}
		if prefill > 1 {
			shapes = append(shapes, min(prefill, ctx, MaxBatch))
		}
		for _, n := range shapes {
			toks := make([]int32, n)
			for i := range toks {
				toks[i] = int32(1 + i%(m.Config.Vocab-1))
			}
			if _, err := ex.Forward(toks, 0); err != nil { // warm-up
				return nil, err
			}
			ex.ResetStats()
			for s := 0; s < steps; s++ {
				if _, err := ex.Forward(toks, 0); err != nil {
					return nil, err
				}
			}
			g, err := m.Graph(n, 0, ctx)
			if err != nil {
				return nil, err
			}
			sum := map[string]time.Duration{}
			cnt := map[string]int{}
			for _, op := range g.Ops {
				k := planner.OpKey(op, n)
				sum[k] += ex.Stats.Ops[op.Name]
				cnt[k] += ex.Stats.Steps
			}
			// The step as it really runs, ops queued and one wait at the
			// end: on a device whose ops run asynchronously (a GPU that
			// batches a step into one graph) waiting after every op costs
			// far more than the op. The per-op times keep their
			// proportions and are scaled down to sum to this.
			var perOp time.Duration
			for _, t := range sum {
				perOp += t
			}
			perOp /= time.Duration(ex.Stats.Steps)
			step, err := timeStep(ex, toks, steps)
			if err != nil {
				return nil, err
			}
			scale := 1.0
			if perOp > 0 && step < perOp {
				scale = float64(step) / float64(perOp)
			}
			for k, t := range sum {
				dp.Ops[k] = scale * float64(t) / float64(cnt[k]) / 1e3
			}
		}
	}
	for _, a := range real {
		for _, b := range real {
			if a == b {
				continue
			}
			f, err := measureCopy(a, b)
			if err != nil {
				return nil, err
			}
			p.Devices[planner.Identity(a.Info())].Copies[planner.Identity(b.Info())] = f
		}
	}
	return p, nil
}

// timeStep is the wall time of one step of toks run as the executor runs it
// (no wait after each op), the mean of steps after one untimed step.
func timeStep(ex *Executor, toks []int32, steps int) (time.Duration, error) {
	ex.opts.SyncEachOp = false
	defer func() { ex.opts.SyncEachOp = true }()
	if _, err := ex.Forward(toks, 0); err != nil {
		return 0, err
	}
	start := time.Now()
	for s := 0; s < steps; s++ {
		if _, err := ex.Forward(toks, 0); err != nil {
			return 0, err
		}
	}
	return time.Since(start) / time.Duration(steps), nil
}

// measureCopy times copies of 1 Ki and 1 Mi floats from a to b as the
// executor makes them (wait for a, then peer to peer where a can, else read
// from a and write to b through host memory),
// and fits latency + bytes/bandwidth through the two points.
func measureCopy(a, b devices.Device) (planner.CopyFit, error) {
	sizes := []int{1 << 10, 1 << 20}
	var t [2]float64
	for i, n := range sizes {
		src, err := a.Alloc(n)
		if err != nil {
			return planner.CopyFit{}, err
		}
		dst, err := b.Alloc(n)
		if err != nil {
			return planner.CopyFit{}, err
		}
		var h []float32
		reps := max(3, (64<<20)/(4*n))
		start := time.Now()
		for r := 0; r < reps; r++ {
			if err := a.Sync(); err != nil {
				return planner.CopyFit{}, err
			}
			if err := transfer(a, b, dst, src, n, &h); err != nil {
				return planner.CopyFit{}, err
			}
		}
		if err := b.Sync(); err != nil {
			return planner.CopyFit{}, err
		}
		t[i] = time.Since(start).Seconds() / float64(reps)
	}
	b0, b1 := float64(4*sizes[0]), float64(4*sizes[1])
	bw := (b1 - b0) / max(t[1]-t[0], 1e-12)
	lat := max(t[0]-b0/bw, 0)
	if bw <= 0 {
		return planner.CopyFit{}, fmt.Errorf("runtime: copy %s -> %s: no bandwidth measured", a.Name(), b.Name())
	}
	return planner.CopyFit{LatencyUS: lat * 1e6, BandwidthGBs: bw / 1e9}, nil
}
