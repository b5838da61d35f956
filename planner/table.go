package planner

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"

	"hybrid/ops"
)

// Formats are the output formats of Render.
var Formats = []string{"table", "json", "csv", "markdown"}

// JSONPlan is the machine-readable form of a plan.
type JSONPlan struct {
	Policy      string           `json:"policy"`
	Step        string           `json:"step"`
	Tokens      int              `json:"tokens"`
	PredictedMS float64          `json:"predicted_ms"`
	Simulated   bool             `json:"simulated"`
	Devices     []JSONDevice     `json:"devices"`
	Ops         []JSONOp         `json:"ops"`
	Transfers   []JSONTransfer   `json:"transfers"`
	Boundaries  JSONBoundaryStat `json:"boundaries"`
	Notes       []string         `json:"notes,omitempty"`
}

// JSONDevice is one device's summary.
type JSONDevice struct {
	Name        string  `json:"name"`
	Kind        string  `json:"kind"`
	Simulated   bool    `json:"simulated"`
	Precision   string  `json:"precision"` // f32, or f16 for devices that round to fp16 (the Neural Engine)
	Ops         int     `json:"ops"`
	PredictedMS float64 `json:"predicted_ms"`
	MemoryBytes int64   `json:"memory_bytes"`
}

// JSONOp is one op's placement.
type JSONOp struct {
	ID          int                `json:"id"`
	Name        string             `json:"name"`
	Kind        string             `json:"kind"`
	Layer       int                `json:"layer"`
	Shape       [2]int             `json:"shape"`
	Device      string             `json:"device"`
	Inputs      []int              `json:"inputs"` // ids of the ops whose values it reads
	PredictedMS float64            `json:"predicted_ms"`
	Estimates   map[string]float64 `json:"estimates_ms"` // per candidate device
	Source      string             `json:"source"`
	// StreamedFrom names the device the op's weight is copied in from for
	// the step (MakeStep); StreamedBytes is its size. For an attention op
	// run away from its KV cache, StreamedFrom is the cache's device and
	// StreamedBytes the cells copied in from it and back.
	StreamedFrom  string `json:"streamed_from,omitempty"`
	StreamedBytes int64  `json:"streamed_bytes,omitempty"`
}

// JSONTransfer is one copy.
type JSONTransfer struct {
	FromOp     int     `json:"from_op"`
	FromDevice string  `json:"from_device"`
	ToDevice   string  `json:"to_device"`
	ToOps      []int   `json:"to_ops,omitempty"`
	Bytes      int64   `json:"bytes"`
	MS         float64 `json:"ms"`
}

// JSONBoundaryStat sums the copies of one step.
type JSONBoundaryStat struct {
	Count int     `json:"count"`
	Bytes int64   `json:"bytes"`
	MS    float64 `json:"ms"`
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// JSON returns the plan's machine-readable form.
func (p *Plan) JSON() JSONPlan {
	g := p.Graph
	producer := g.Producers()
	step := "decode"
	if g.Tokens > 1 {
		step = "prefill"
	}
	out := JSONPlan{Policy: p.Policy, Step: step, Tokens: g.Tokens, PredictedMS: ms(p.Predicted), Notes: p.Notes}
	for _, s := range p.Summary() {
		j := p.DeviceIndex(s.Device)
		prec := p.Devices[j].Precision
		if prec == "" {
			prec = "f32"
		}
		out.Devices = append(out.Devices, JSONDevice{Name: s.Device, Kind: p.Devices[j].Kind, Simulated: s.Simulated,
			Precision: prec, Ops: s.Ops, PredictedMS: ms(s.Predicted), MemoryBytes: s.Memory})
		out.Simulated = out.Simulated || s.Simulated
	}
	for i, op := range g.Ops {
		jo := JSONOp{ID: op.ID, Name: op.Name, Kind: op.Kind.String(), Layer: op.Layer,
			Shape: [2]int{g.Values[op.Out].Rows, g.Values[op.Out].Cols}, Device: p.Device[i],
			Inputs: []int{}, PredictedMS: ms(p.OpTime(i)), Estimates: map[string]float64{}}
		for _, in := range op.In {
			jo.Inputs = append(jo.Inputs, producer[in])
		}
		for j, d := range p.Devices {
			jo.Estimates[d.Name] = ms(p.Estimates[i][j])
		}
		if j := p.DeviceIndex(p.Device[i]); j >= 0 {
			jo.Source = p.Source[i][j]
		}
		if p.Streamed != nil && p.Streamed[i] != "" {
			jo.StreamedFrom, jo.StreamedBytes = p.Streamed[i], p.streamedBytes(i)
		}
		out.Ops = append(out.Ops, jo)
	}
	out.Transfers = []JSONTransfer{}
	for _, t := range p.Transfers {
		out.Transfers = append(out.Transfers, JSONTransfer{FromOp: t.FromOp, FromDevice: t.FromDevice, ToDevice: t.ToDevice,
			ToOps: t.ToOps, Bytes: t.Bytes, MS: ms(t.Time)})
		out.Boundaries.Count++
		out.Boundaries.Bytes += t.Bytes
		out.Boundaries.MS += ms(t.Time)
	}
	return out
}

// Render writes the plan: the per-op table, the per-device summary and the
// boundaries, in format "table", "csv" or "markdown"; or the JSON object.
func (p *Plan) Render(w io.Writer, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(p.JSON())
	}
	out := func(t table.Writer) {
		switch format {
		case "csv":
			fmt.Fprintln(w, t.RenderCSV())
		case "markdown":
			fmt.Fprintln(w, t.RenderMarkdown())
		default:
			fmt.Fprintln(w, t.Render())
		}
	}
	switch format {
	case "table", "csv", "markdown":
	default:
		return fmt.Errorf("planner: unknown format %q (have %s)", format, strings.Join(Formats, ", "))
	}
	jp := p.JSON()
	sim := ""
	if jp.Simulated {
		sim = " — SIMULATED: times of simulated devices come from a hardware profile, not from running on that hardware"
	}
	fmt.Fprintf(w, "plan %q, %s step of %d token(s): predicted %.3f ms%s\n", p.Policy, jp.Step, jp.Tokens, jp.PredictedMS, sim)

	t := table.NewWriter()
	hdr := table.Row{"op", "kind", "layer", "shape", "device"}
	for _, d := range p.Devices {
		name := d.Name
		if d.Simulated {
			name += " (sim)"
		}
		hdr = append(hdr, name+" ms")
	}
	hdr = append(hdr, "copies in", "copies out")
	t.AppendHeader(hdr)
	in := map[int][]string{}
	outc := map[int][]string{}
	for _, tr := range p.Transfers {
		s := fmt.Sprintf("%s→%s %s", tr.FromDevice, tr.ToDevice, bytesStr(tr.Bytes))
		outc[tr.FromOp] = append(outc[tr.FromOp], s)
		for _, o := range tr.ToOps {
			in[o] = append(in[o], s)
		}
	}
	for i, o := range jp.Ops {
		switch {
		case o.StreamedFrom == "":
		case p.Graph.Ops[i].Kind == ops.Attention:
			outc[i] = append(outc[i], fmt.Sprintf("KV cache on %s: cells in and back, %s", o.StreamedFrom, bytesStr(o.StreamedBytes)))
		default:
			in[i] = append(in[i], fmt.Sprintf("weight streamed from %s, %s", o.StreamedFrom, bytesStr(o.StreamedBytes)))
		}
	}
	for i, op := range p.Graph.Ops {
		layer := ""
		if op.Layer >= 0 {
			layer = fmt.Sprint(op.Layer)
		}
		row := table.Row{op.Name, op.Kind.String(), layer, fmt.Sprintf("%d×%d", jp.Ops[i].Shape[0], jp.Ops[i].Shape[1]), p.Device[i]}
		for j := range p.Devices {
			e := fmt.Sprintf("%.4f", ms(p.Estimates[i][j]))
			if p.Device[i] == p.Devices[j].Name {
				e = "*" + e
			}
			row = append(row, e)
		}
		row = append(row, strings.Join(in[i], ", "), strings.Join(outc[i], ", "))
		t.AppendRow(row)
	}
	out(t)

	s := table.NewWriter()
	s.AppendHeader(table.Row{"device", "kind", "simulated", "precision", "ops", "predicted ms/step", "memory"})
	for _, d := range jp.Devices {
		s.AppendRow(table.Row{d.Name, d.Kind, d.Simulated, d.Precision, d.Ops, fmt.Sprintf("%.3f", d.PredictedMS), bytesStr(d.MemoryBytes)})
	}
	s.AppendFooter(table.Row{"boundaries", "", "", "", jp.Boundaries.Count, fmt.Sprintf("%.3f", jp.Boundaries.MS), bytesStr(jp.Boundaries.Bytes) + "/step"})
	out(s)
	for _, n := range p.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	return nil
}

func bytesStr(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}
