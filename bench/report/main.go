// Command report turns the JSON that bench/run.sh collects (hybrid bench
// --json, llama-bench -o json, and the peak RSS of each) into the Markdown
// table of bench/RESULTS.md.
//
//	go run ./bench/report DIR
//
// DIR holds, per run K (a model type, with ".tN" for N threads where
// bench/cpu-host.sh measures several): K.hybrid.json, K.llama.json,
// K.hybrid.rss and K.llama.rss (kilobytes, from /usr/bin/time -f %M), K.size
// (file bytes) and K.kv (KV cache bytes); optionally K.hybrid.loaded.json and
// K.llama.loaded.json (decode under a competing load) and membw.json or
// membw.tN.json (`hybrid membw --json`), for decode's weight traffic as a
// fraction of the machine's read bandwidth; and K.hybrid.depth.json and
// K.llama.depth.json (decode at a depth of the KV cache, -d).
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
	Threads     int       `json:"threads"`
	NPrompt     int       `json:"n_prompt"`
	NGen        int       `json:"n_gen"`
	NDepth      int       `json:"n_depth"`
	Prefill     []float64 `json:"prefill_tokens_per_s"`
	Decode      []float64 `json:"decode_tokens_per_s"`
	WeightBytes int64     `json:"decode_weight_bytes"`
}

type membw struct {
	Bytes float64 `json:"read_bytes_per_s"`
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
	fmt.Println("| model | test | hybrid tok/s | llama.cpp tok/s | hybrid / llama.cpp | decode weights GB/s, hybrid / llama.cpp (% of read bandwidth) | hybrid peak RSS | llama.cpp peak RSS | file + KV + 25% |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|---:|")
	var loaded, depth []string
	for _, f := range files {
		key := strings.TrimSuffix(filepath.Base(f), ".hybrid.json")
		if strings.HasSuffix(key, ".loaded") || strings.HasSuffix(key, ".depth") {
			continue
		}
		var h hybridRun
		var l []llamaRun
		if err := readJSON(f, &h); err != nil {
			fail(err)
		}
		if err := readJSON(filepath.Join(dir, key+".llama.json"), &l); err != nil {
			fail(err)
		}
		hr, err1 := readInt(filepath.Join(dir, key+".hybrid.rss"))
		lr, err2 := readInt(filepath.Join(dir, key+".llama.rss"))
		size, err3 := readInt(filepath.Join(dir, key+".size"))
		kv, err4 := readInt(filepath.Join(dir, key+".kv"))
		for _, err := range []error{err1, err2, err3, err4} {
			if err != nil {
				fail(err)
			}
		}
		bw := math.NaN()
		mf := "membw.json"
		if i := strings.LastIndex(key, ".t"); i >= 0 {
			mf = "membw" + key[i:] + ".json"
		}
		var m membw
		if readJSON(filepath.Join(dir, mf), &m) == nil && m.Bytes > 0 {
			bw = m.Bytes
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
			om, os_ := meanSD(test.ours)
			tm, ts := meanSD(samples(l, test.n))
			traffic := "–"
			if test.name[:2] == "tg" && h.WeightBytes > 0 {
				var parts []string
				for _, v := range []float64{om, tm} {
					gbs := v * float64(h.WeightBytes) / 1e9
					p := fmt.Sprintf("%.1f", gbs)
					if !math.IsNaN(bw) {
						p += fmt.Sprintf(" (%.0f%%)", 100*gbs*1e9/bw)
					}
					parts = append(parts, p)
				}
				traffic = strings.Join(parts, " / ")
				if !math.IsNaN(bw) {
					traffic += fmt.Sprintf(" of %.1f", bw/1e9)
				}
			}
			fmt.Printf("| %s | %s | %.2f ± %.2f | %.2f ± %.2f | %.2f | %s | %.0f MiB | %.0f MiB | %.0f MiB |\n",
				key, test.name, om, os_, tm, ts, om/tm, traffic, float64(hr)/1024, float64(lr)/1024, budget/(1<<20))
		}
		if _, err := os.Stat(filepath.Join(dir, key+".hybrid.loaded.json")); err == nil {
			loaded = append(loaded, key)
		}
		if _, err := os.Stat(filepath.Join(dir, key+".hybrid.depth.json")); err == nil {
			depth = append(depth, key)
		}
	}
	if len(depth) > 0 {
		fmt.Println()
		fmt.Println("Decode at a depth of the KV cache (llama-bench's -d; llama.cpp with flash attention on):")
		fmt.Println()
		fmt.Println("| model | test | hybrid tok/s | llama.cpp tok/s | hybrid / llama.cpp |")
		fmt.Println("|---|---|---:|---:|---:|")
		for _, key := range depth {
			var h hybridRun
			var l []llamaRun
			if err := readJSON(filepath.Join(dir, key+".hybrid.depth.json"), &h); err != nil {
				fail(err)
			}
			if err := readJSON(filepath.Join(dir, key+".llama.depth.json"), &l); err != nil {
				fail(err)
			}
			om, os_ := meanSD(h.Decode)
			tm, ts := meanSD(samples(l, func(r llamaRun) bool { return r.NGen > 0 }))
			fmt.Printf("| %s | tg%d @ d%d | %.2f ± %.2f | %.2f ± %.2f | %.2f |\n", key, h.NGen, h.NDepth, om, os_, tm, ts, om/tm)
		}
	}
	if len(loaded) == 0 {
		return
	}
	fmt.Println()
	fmt.Println("Decode under a competing load (a busy process on every core):")
	fmt.Println()
	fmt.Println("| model | test | hybrid tok/s | llama.cpp tok/s | hybrid / llama.cpp |")
	fmt.Println("|---|---|---:|---:|---:|")
	for _, key := range loaded {
		var h hybridRun
		var l []llamaRun
		if err := readJSON(filepath.Join(dir, key+".hybrid.loaded.json"), &h); err != nil {
			fail(err)
		}
		_ = readJSON(filepath.Join(dir, key+".llama.loaded.json"), &l) // empty when it timed out
		om, os_ := meanSD(h.Decode)
		tm, ts := meanSD(samples(l, func(r llamaRun) bool { return r.NGen > 0 }))
		fmt.Printf("| %s | tg%d | %.2f ± %.2f | %.2f ± %.2f | %.2f |\n", key, h.NGen, om, os_, tm, ts, om/tm)
	}
}

// samples returns the samples of the llama-bench run that match.
func samples(l []llamaRun, match func(llamaRun) bool) []float64 {
	for _, r := range l {
		if match(r) {
			return r.Samples
		}
	}
	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "report:", err)
	os.Exit(1)
}
