package main

import (
	"fmt"
	"io"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"

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

func sumTransfers(s *runtime.Session) time.Duration {
	var d time.Duration
	for _, t := range s.Plan.Transfers {
		d += t.Time
	}
	return d
}
