// Command serverload measures an OpenAI-compatible server under concurrent
// streams: N clients send streamed /v1/completions requests (greedy, a
// fixed seed, no stop sequences), each one after another, until M requests
// are done in all. It reports the aggregate generation rate (completion
// tokens of every request over the time from the first request sent to the
// last one done), the time to first token (request sent to the first event
// with text: prompt processing plus the wait for a slot, if any) and the
// time per output token after the first. It works against hybrid serve and
// llama-server alike: completion tokens come from the usage of the
// stream's last event (stream_options.include_usage), counted from text
// events where a server sends none.
//
//	go run ./bench/serverload --url http://127.0.0.1:8080/v1 --streams 4 [--requests 8]
//	    [--max-tokens 64] [--prompt-tokens 64] [--model ID] [--server-pid PID] [--pause 20s] [--json]
//	go run ./bench/serverload --compare DIR
//
// Prompt i is the same text on every server (Prompt), about --prompt-tokens
// long. Its length in characters comes from the tokenizer's characters per
// token, which the warm-up request (not measured, the same text in every
// run) measures from its usage unless --chars-per-token gives it
// (bench/server.sh passes the first run's to the rest, so that both
// servers get the same prompts).
//
// With --json it writes the result, every request included, as JSON on
// standard output; otherwise a table. --compare reads the results that
// bench/server.sh keeps (compareDir) and prints the Markdown table of
// bench/RESULTS.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "serverload:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serverload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	fs.StringVar(&cfg.URL, "url", "http://127.0.0.1:8080/v1", "the API's base `URL` (requests go to URL/completions)")
	fs.StringVar(&cfg.Model, "model", "", "the requests' model `ID` (default: none sent, the server's own)")
	fs.IntVar(&cfg.Streams, "streams", 1, "concurrent clients")
	fs.IntVar(&cfg.Requests, "requests", 0, "requests in all (default: 2 × streams, at least 4)")
	fs.IntVar(&cfg.MaxTokens, "max-tokens", 64, "max_tokens of each request")
	fs.IntVar(&cfg.PromptTokens, "prompt-tokens", 64, "about how many tokens each prompt has")
	fs.Float64Var(&cfg.Temperature, "temperature", 0, "the requests' temperature (0: greedy; above 0, each server's defaults for top-k, top-p and the rest)")
	fs.Int64Var(&cfg.Seed, "seed", 42, "the requests' seed (at temperature 0 it changes nothing)")
	fs.DurationVar(&cfg.Timeout, "timeout", 10*time.Minute, "longest one request may take")
	fs.Float64Var(&cfg.CharsPerToken, "chars-per-token", 0, "size prompts at this many characters a token (default: measured by the warm-up request)")
	fs.IntVar(&cfg.ServerPID, "server-pid", 0, "the server's process `ID`, to tell its CPU time from other processes' (Linux)")
	fs.DurationVar(&cfg.Pause, "pause", 0, "idle time between the warm-up and the measured requests (a virtual machine that slows down under sustained load gets the same start for every run)")
	asJSON := fs.Bool("json", false, "write the result as JSON")
	compare := fs.String("compare", "", "print the table comparing the results in `DIR` (hybrid.sN.rK.json against llama.sN.rK.json) and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *compare != "" {
		return compareDir(*compare, stdout)
	}
	if cfg.Requests == 0 {
		cfg.Requests = max(2*cfg.Streams, 4)
	}
	switch {
	case cfg.Streams < 1:
		return fmt.Errorf("--streams %d: want 1 or more", cfg.Streams)
	case cfg.Requests < cfg.Streams:
		return fmt.Errorf("--requests %d: want at least --streams (%d)", cfg.Requests, cfg.Streams)
	case cfg.MaxTokens < 1:
		return fmt.Errorf("--max-tokens %d: want 1 or more", cfg.MaxTokens)
	case cfg.PromptTokens < 2:
		return fmt.Errorf("--prompt-tokens %d: want 2 or more", cfg.PromptTokens)
	case cfg.CharsPerToken < 0:
		return fmt.Errorf("--chars-per-token %g: want more than 0", cfg.CharsPerToken)
	case !(cfg.Temperature >= 0 && cfg.Temperature <= 100):
		return fmt.Errorf("--temperature %g: want 0 to 100", cfg.Temperature)
	case cfg.Pause < 0:
		return fmt.Errorf("--pause %v: want 0 or more", cfg.Pause)
	}
	cfg.Warmup = true
	res, err := Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if _, err := stdout.Write(append(b, '\n')); err != nil {
			return err
		}
	} else {
		printResult(stdout, res)
	}
	if res.Failed > 0 {
		for _, r := range res.Requests {
			if r.Err != "" {
				return fmt.Errorf("%d of %d requests failed; request %d: %s", res.Failed, len(res.Requests), r.Index, r.Err)
			}
		}
	}
	return nil
}

// printResult writes one run's table.
func printResult(w io.Writer, r *Result) {
	t := table.NewWriter()
	t.SetOutputMirror(w)
	t.SetTitle(fmt.Sprintf("%s: %d stream(s), %d requests, about %d prompt tokens, %d max tokens, temperature %g",
		r.URL, r.Streams, len(r.Requests), r.PromptTarget, r.MaxTokens, r.Temperature))
	t.AppendHeader(table.Row{"aggregate tok/s", "completion tokens", "wall s", "TTFT ms mean", "p50", "p90", "ms/token after the first", "prompt tokens/request", "failed"})
	perReq := 0.0
	if ok := len(r.Requests) - r.Failed; ok > 0 {
		perReq = float64(r.PromptTokens) / float64(ok)
	}
	t.AppendRow(table.Row{f2(r.TokensPerS), r.CompletionTokens, f2(r.WallS), f1(r.TTFTMs.Mean), f1(r.TTFTMs.P50), f1(r.TTFTMs.P90),
		f1(r.TPOTMs.Mean), f1(perReq), r.Failed})
	if c := r.CPU; c != nil {
		t.SetCaption("CPU in cores: server %s, this client %s, other processes %s", f2(c.Server), f2(c.Client), f2(c.Other))
	}
	t.Render()
}

func f1(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }
func f2(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }
