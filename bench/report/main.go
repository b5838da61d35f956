// Command report turns the JSON that bench/run.sh collects (hybrid bench
// --json, llama-bench -o json, and the peak RSS of each) into the Markdown
// table of bench/RESULTS.md.
//
//	go run ./bench/report DIR
//
// DIR holds, per model type T: T.hybrid.json, T.llama.json, T.hybrid.rss and
// T.llama.rss (kilobytes, from /usr/bin/time -f %M), and T.size (file bytes).
package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

type hybridRun struct {
	Threads int       `json:"threads"`
	NPrompt int       `json:"n_prompt"`
	NGen    int       `json:"n_gen"`
	Prefill []float64 `json:"prefill_tokens_per_s"`
	Decode  []float64 `json:"decode_tokens_per_s"`
}

type llamaRun struct {
	NPrompt int       `json:"n_prompt"`
	NGen    int       `json:"n_gen"`
	Samples []float64 `json:"samples_ts"`
}

func meanSD(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	var m float64
	for _, x := range xs {
		m += x
	}
	m /= float64(len(xs))
	var v float64
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	if len(xs) > 1 {
		v /= float64(len(xs) - 1)
	}
	return m, math.Sqrt(v)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: report DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	files, _ := filepath.Glob(filepath.Join(dir, "*.hybrid.json"))
	sort.Strings(files)
	if len(files) == 0 {
		fmt.Fprintf(os.Stderr, "report: no *.hybrid.json in %s\n", dir)
		os.Exit(1)
	}
	fmt.Println("| model | test | hybrid tok/s | llama.cpp tok/s | hybrid / llama.cpp | hybrid peak RSS | llama.cpp peak RSS | file + KV + 25% |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|")
	for _, f := range files {
		typ := strings.TrimSuffix(filepath.Base(f), ".hybrid.json")
		var h hybridRun
		var l []llamaRun
		if err := readJSON(f, &h); err != nil {
			fail(err)
		}
		if err := readJSON(filepath.Join(dir, typ+".llama.json"), &l); err != nil {
			fail(err)
		}
		hr, err1 := readInt(filepath.Join(dir, typ+".hybrid.rss"))
		lr, err2 := readInt(filepath.Join(dir, typ+".llama.rss"))
		size, err3 := readInt(filepath.Join(dir, typ+".size"))
		kv, err4 := readInt(filepath.Join(dir, typ+".kv"))
		for _, err := range []error{err1, err2, err3, err4} {
			if err != nil {
				fail(err)
			}
		}
		budget := float64(size+kv) * 1.25
		for _, test := range []struct {
			name string
			ours []float64
			n    func(llamaRun) bool
		}{
			{fmt.Sprintf("pp%d", h.NPrompt), h.Prefill, func(r llamaRun) bool { return r.NPrompt > 0 && r.NGen == 0 }},
			{fmt.Sprintf("tg%d", h.NGen), h.Decode, func(r llamaRun) bool { return r.NGen > 0 && r.NPrompt == 0 }},
		} {
			var theirs []float64
			for _, r := range l {
				if test.n(r) {
					theirs = r.Samples
				}
			}
			om, os_ := meanSD(test.ours)
			tm, ts := meanSD(theirs)
			fmt.Printf("| %s | %s | %.2f ± %.2f | %.2f ± %.2f | %.2f | %.0f MiB | %.0f MiB | %.0f MiB |\n",
				typ, test.name, om, os_, tm, ts, om/tm, float64(hr)/1024, float64(lr)/1024, budget/(1<<20))
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "report:", err)
	os.Exit(1)
}
