package main

import (
	"fmt"
	"io"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"

	"hybrid/devices"
	"hybrid/runtime"
)

// printRunSummary prints the plan's per-device summary with the measured
// time next to the predicted one, and the copies.
func printRunSummary(w io.Writer, s *runtime.Session) {
	st := s.Exec.Stats
	steps := max(st.Steps, 1)
	t := table.NewWriter()
	t.AppendHeader(table.Row{"device", "ops", "predicted ms/decode step", "measured ms/step (all steps)", "memory"})
	for _, d := range s.Plan.Summary() {
		name := d.Device
		meas := "-"
		if ds := st.Devices[d.Device]; ds != nil {
			meas = fmt.Sprintf("%.3f", float64(ds.Time)/float64(steps)/1e6)
			if ds.Simulated {
				name += " (simulated)"
				meas += " (simulated)"
			}
		}
		t.AppendRow(table.Row{name, d.Ops, fmt.Sprintf("%.3f", float64(d.Predicted)/1e6), meas, fmt.Sprintf("%.1f MiB", float64(d.Memory)/(1<<20))})
	}
	c := st.Copies
	t.AppendFooter(table.Row{"copies", fmt.Sprintf("%d/step", len(s.Plan.Transfers)),
		fmt.Sprintf("%.3f", float64(sumTransfers(s))/1e6),
		fmt.Sprintf("%d copies, %.1f KiB, %.3f ms", c.Count, float64(c.Bytes)/1024, float64(c.Time)/1e6), ""})
	fmt.Fprintln(w, t.Render())
}

// printStepSummary prints, for the prompt's prefill and for the decode
// steps, the plan's predicted time of one step next to the measured one:
// each is planned for its own shape (a prefill may stream weights).
func printStepSummary(w io.Writer, s *runtime.Session, res *runtime.Result) {
	wall := ""
	for _, d := range s.Exec.Devices() {
		if d.Info().Simulated {
			wall = " (wall time on this host: simulated devices compute on its CPU)"
		}
	}
	n := len(res.PromptTokens)
	if n > 1 {
		first := min(n, runtime.MaxBatch)
		steps := (n + runtime.MaxBatch - 1) / runtime.MaxBatch
		line := fmt.Sprintf("prefill: %d tokens in %d step(s)", n, steps)
		if p, err := s.PlanFor(first); err == nil {
			line += fmt.Sprintf("; the plan of a %d-token step predicts %.3f ms", first, float64(p.Predicted)/1e6)
		}
		line += fmt.Sprintf(", measured %.3f ms a step%s", res.Timings.PrefillMs/float64(steps), wall)
		if st := s.Exec.Stats.Streams; st.Count > 0 {
			line += fmt.Sprintf("; %d weights streamed in (%.1f MiB, %.3f ms)", st.Count, float64(st.Bytes)/(1<<20), float64(st.Time)/1e6)
		}
		if st := s.Exec.Stats.KVStreams; st.Count > 0 {
			line += fmt.Sprintf("; %d copies of KV cells for layers attending away from their cache (%.1f MiB, %.3f ms)", st.Count, float64(st.Bytes)/(1<<20), float64(st.Time)/1e6)
		}
		fmt.Fprintln(w, line)
	}
	if d := res.Timings.DecodedTokens; d > 0 {
		fmt.Fprintf(w, "decode: the plan predicts %.3f ms a token, measured %.3f ms over %d tokens%s\n",
			float64(s.Plan.Predicted)/1e6, res.Timings.DecodeMs/float64(d), d, wall)
	}
}

// printMemoryPeaks prints, for each device that keeps it, the most memory
// it held at once and what held it: the plan's memory column counts weights
// and caches, not activations, scratch or the driver's context.
func printMemoryPeaks(w io.Writer, ds []devices.Device) {
	peaks := runtime.MemoryPeaks(ds)
	for _, d := range ds {
		if m, ok := peaks[d.Name()]; ok {
			fmt.Fprintf(w, "%s %s\n", d.Name(), peakText(m))
		}
	}
}

// peakText says what a device held at its peak, by kind, and its driver's
// share.
func peakText(m devices.MemoryPeak) string {
	return fmt.Sprintf("held at most %.1f MiB (weights %.1f, KV caches %.1f, streaming slots %.1f, activations %.1f, scratch %.1f) and its driver %.1f MiB (context and kernels)",
		mib(m.Total), mib(m.Weights), mib(m.KVCache), mib(m.Streaming), mib(m.Buffers), mib(m.Scratch), mib(m.Runtime))
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func sumTransfers(s *runtime.Session) time.Duration {
	var d time.Duration
	for _, t := range s.Plan.Transfers {
		d += t.Time
	}
	return d
}
