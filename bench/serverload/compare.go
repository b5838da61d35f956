package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
)

// resultName is a result file of bench/server.sh: the server, the number of
// streams and the repetition (1 where there is none).
var resultName = regexp.MustCompile(`^(hybrid|llama)\.s([0-9]+)(?:\.r([0-9]+))?\.json$`)

// runs are one server's results at one number of streams, by repetition.
type runs map[int]*Result

// compareDir prints the Markdown table of hybrid's results in dir against
// llama-server's, a row per number of streams: the aggregate rate's median
// over the repetitions (with their range), the median of the repetitions'
// ratios, and the time to first token and per output token over every
// request of them. The texts are compared
// within a repetition: hybrid's against llama-server's, and each server's
// against its own at 1 stream. A server whose runs at a number of streams
// are not all there, or had a failed request, gets no ratio, and
// compareDir returns an error naming it after printing.
func compareDir(dir string, w io.Writer) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	hybrid, llama := map[int]runs{}, map[int]runs{}
	reps := 0
	var errs []error
	for _, e := range entries {
		m := resultName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		rep := 1
		if m[3] != "" {
			rep, _ = strconv.Atoi(m[3])
		}
		r, err := readResult(filepath.Join(dir, e.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		side := hybrid
		if m[1] == "llama" {
			side = llama
		}
		if side[n] == nil {
			side[n] = runs{}
		}
		side[n][rep] = r
		reps = max(reps, rep)
	}
	if reps == 0 {
		return errors.Join(append(errs, fmt.Errorf("--compare %s: no hybrid.sN.json or llama.sN.json there", dir))...)
	}
	// complete says whether all reps of rs are there without a failure.
	complete := func(rs runs) bool {
		if len(rs) != reps {
			return false
		}
		for _, r := range rs {
			if r.Failed > 0 {
				return false
			}
		}
		return true
	}
	h1, l1 := hybrid[1], llama[1]
	if !complete(h1) {
		h1 = nil
	}
	if !complete(l1) {
		l1 = nil
	}
	// against1 is a side's cell against its own single stream: f of its
	// runs and its one-stream runs, or "–" without either.
	against1 := func(rs, one runs, ok bool, f func(rs, one runs) string) string {
		if !ok || one == nil {
			return "–"
		}
		return f(rs, one)
	}
	scaleOf := func(rs, one runs) string { return f2(median(rs) / median(one)) }

	t := table.NewWriter()
	t.SetOutputMirror(w)
	t.AppendHeader(table.Row{"streams", "requests", "hybrid tok/s", "llama-server tok/s", "hybrid / llama-server",
		"× 1 stream, hybrid / llama-server", "TTFT mean (p90) ms, hybrid", "TTFT mean (p90) ms, llama-server",
		"ms/token after the first, hybrid / llama-server", "same text, hybrid as llama-server",
		"same text as at 1 stream, hybrid / llama-server"})
	var cols []table.ColumnConfig
	for i := 2; i <= 11; i++ {
		cols = append(cols, table.ColumnConfig{Number: i, Align: text.AlignRight, AlignHeader: text.AlignLeft})
	}
	t.SetColumnConfigs(cols)
	streams := slices.Sorted(maps.Keys(hybrid))
	for n := range llama {
		if hybrid[n] == nil {
			streams = append(streams, n)
		}
	}
	slices.Sort(streams)
	for _, n := range streams {
		h, l := hybrid[n], llama[n]
		hOK, lOK := complete(h), complete(l)
		for _, s := range []struct {
			name string
			ok   bool
			rs   runs
		}{{"hybrid", hOK, h}, {"llama-server", lOK, l}} {
			if !s.ok {
				errs = append(errs, fmt.Errorf("%s at %d stream(s): %s", s.name, n, status(s.rs, reps)))
			}
		}
		cell := func(rs runs, ok bool, f func(runs) string) string {
			if !ok {
				return status(rs, reps)
			}
			return f(rs)
		}
		ratio, scale, tpot, same, single := "–", "–", "–", "–", "–"
		if hOK && lOK {
			ratio = ratioCell(h, l)
			tpot = fmt.Sprintf("%s / %s", f1(pooled(h, tpotOf).Mean), f1(pooled(l, tpotOf).Mean))
			same = sameText(h, l)
		}
		if hOK && h1 != nil || lOK && l1 != nil {
			scale = against1(h, h1, hOK, scaleOf) + " / " + against1(l, l1, lOK, scaleOf)
			if n != 1 {
				single = against1(h, h1, hOK, sameText) + " / " + against1(l, l1, lOK, sameText)
			}
		}
		requests := "–"
		for _, rs := range []runs{h, l} {
			if r := rs[1]; r != nil {
				requests = strconv.Itoa(len(r.Requests))
			}
		}
		t.AppendRow(table.Row{n, requests, cell(h, hOK, rateCell), cell(l, lOK, rateCell), ratio, scale,
			cell(h, hOK, ttftCell), cell(l, lOK, ttftCell), tpot, same, single})
	}
	t.RenderMarkdown()
	// Runs beside another busy process, whose numbers are suspect.
	var busy []string
	for _, n := range streams {
		for _, s := range []struct {
			name string
			rs   runs
		}{{"hybrid", hybrid[n]}, {"llama-server", llama[n]}} {
			for _, rep := range slices.Sorted(maps.Keys(s.rs)) {
				if c := s.rs[rep].CPU; c != nil && c.Other > busyOther {
					busy = append(busy, fmt.Sprintf("%s at %d stream(s), run %d: %s", s.name, n, rep, f2(c.Other)))
				}
			}
		}
	}
	if len(busy) > 0 {
		fmt.Fprintf(w, "\nOther processes were busy beside the server (cores, over the run): %s.\n", strings.Join(busy, "; "))
	}
	return errors.Join(errs...)
}

// busyOther is the CPU use of other processes, in cores, over which a run
// is noted as disturbed: more than loopback HTTP's and the kernel's share
// (bench/server.sh repeats such a run).
const busyOther = 0.1

// status says what is missing from rs.
func status(rs runs, reps int) string {
	bad := reps - len(rs)
	for _, r := range rs {
		if r.Failed > 0 {
			bad++
		}
	}
	if reps == 1 {
		if len(rs) == 0 {
			return "no result"
		}
		r := rs[1]
		return fmt.Sprintf("%d of %d requests failed", r.Failed, len(r.Requests))
	}
	return fmt.Sprintf("%d of %d runs failed", bad, reps)
}

// ratioCell is hybrid's rate over llama-server's: the median of each
// repetition's ratio (its two runs were next to each other, under the same
// drift of the machine's speed), and their range where there are several;
// bold where hybrid is as fast or faster.
func ratioCell(h, l runs) string {
	var xs []float64
	for rep, r := range h {
		xs = append(xs, r.TokensPerS/l[rep].TokensPerS)
	}
	slices.Sort(xs)
	k := len(xs) / 2
	m := xs[k]
	if len(xs)%2 == 0 {
		m = (xs[k-1] + xs[k]) / 2
	}
	c := f2(m)
	if m >= 1 {
		c = "**" + c + "**"
	}
	if len(xs) > 1 {
		c += fmt.Sprintf(" (%s–%s)", f2(xs[0]), f2(xs[len(xs)-1]))
	}
	return c
}

// rates are the aggregate rates of rs, sorted.
func rates(rs runs) []float64 {
	var xs []float64
	for _, r := range rs {
		xs = append(xs, r.TokensPerS)
	}
	slices.Sort(xs)
	return xs
}

func median(rs runs) float64 {
	xs := rates(rs)
	k := len(xs) / 2
	if len(xs)%2 == 0 {
		return (xs[k-1] + xs[k]) / 2
	}
	return xs[k]
}

// rateCell is the median rate, and the range where there are several.
func rateCell(rs runs) string {
	xs := rates(rs)
	if len(xs) == 1 {
		return f2(xs[0])
	}
	return fmt.Sprintf("%s (%s–%s)", f2(median(rs)), f2(xs[0]), f2(xs[len(xs)-1]))
}

// pooled summarizes f over the requests of every run of rs (f returns
// false for a request it does not apply to).
func pooled(rs runs, f func(Request) (float64, bool)) Stats {
	var xs []float64
	for _, r := range rs {
		for _, q := range r.Requests {
			if x, ok := f(q); ok && q.Err == "" {
				xs = append(xs, x)
			}
		}
	}
	return summary(xs)
}

func ttftOf(q Request) (float64, bool) { return q.TTFTMs, q.CompletionTokens > 0 }

func tpotOf(q Request) (float64, bool) {
	return (q.TotalMs - q.TTFTMs) / float64(q.CompletionTokens-1), q.CompletionTokens > 1
}

func ttftCell(rs runs) string {
	s := pooled(rs, ttftOf)
	return fmt.Sprintf("%s (%s)", f1(s.Mean), f1(s.P90))
}

// sameText counts the requests whose generated text is the same in a and
// b, prompt i against prompt i within a repetition, of those both have.
func sameText(a, b runs) string {
	same, all := 0, 0
	for rep, ra := range a {
		rb := b[rep]
		if rb == nil {
			continue
		}
		n := min(len(ra.Requests), len(rb.Requests))
		for i := range n {
			if ra.Requests[i].Text == rb.Requests[i].Text {
				same++
			}
		}
		all += n
	}
	return fmt.Sprintf("%d of %d", same, all)
}

func readResult(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}
