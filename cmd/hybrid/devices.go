package main

import (
	"fmt"
	"io"

	"github.com/jedib0t/go-pretty/v6/table"

	"hybrid/runtime"
)

func devicesCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("devices", stderr)
	hardware := fs.String("hardware", "", "also list the simulated devices of this hardware profile (name or YAML `file`)")
	cpus := fs.Int("cpus", 0, "separate CPU devices to make")
	threads := fs.Int("threads", 0, "CPU threads per CPU device; 0 uses every core")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := checkDeviceFlags(fs, *threads, *cpus); err != nil {
		return err
	}
	devs, missing, _, err := runtime.Devices(runtime.SessionOptions{Hardware: *hardware, CPUs: *cpus, Threads: *threads})
	if err != nil {
		return err
	}
	t := table.NewWriter()
	t.AppendHeader(table.Row{"device", "kind", "simulated", "memory", "detail"})
	for _, d := range devs {
		in := d.Info()
		mem := "host"
		if in.Memory > 0 {
			mem = fmt.Sprintf("%.1f GiB", float64(in.Memory)/(1<<30))
		}
		t.AppendRow(table.Row{in.Name, in.Kind, in.Simulated, mem, in.Detail})
		d.Close()
	}
	fmt.Fprintln(stdout, t.Render())
	if len(missing) > 0 {
		m := table.NewWriter()
		m.AppendHeader(table.Row{"missing", "why"})
		for _, x := range missing {
			m.AppendRow(table.Row{x.Kind, x.Why})
		}
		fmt.Fprintln(stdout, m.Render())
	}
	return nil
}
