package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// firstDelay is how long the fake servers wait before their first text
// event: the measured time to first token must be at least this.
const firstDelay = 30 * time.Millisecond

// fakeServer answers /v1/completions with the events of style ("hybrid":
// usage only when asked for, in its own event; "llama": usage on the
// finishing event always, CRLF line ends and a comment; "nousage": none;
// "error": an error event after one token; "status": a 503), generating
// the prompt's first max_tokens words, one event each.
func fakeServer(t *testing.T, style string) (*httptest.Server, *atomic.Int32) {
	var busy, most atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Busy until the last event is sent: the client sends its next
		// request as soon as it reads [DONE], maybe before this returns.
		now := busy.Add(1)
		for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
		}
		left := false
		leave := func() {
			if !left {
				busy.Add(-1)
				left = true
			}
		}
		defer leave()
		var req completionBody
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/v1/completions" || !req.Stream || req.Temperature != 0 {
			http.Error(w, fmt.Sprintf("bad request %s: %v %+v", r.URL.Path, err, req), http.StatusBadRequest)
			return
		}
		if style == "status" {
			http.Error(w, `{"error":{"message":"loading"}}`, http.StatusServiceUnavailable)
			return
		}
		eol := "\n"
		if style == "llama" {
			eol = "\r\n"
		}
		send := func(v string) {
			fmt.Fprintf(w, "data: %s%s%s", v, eol, eol)
			w.(http.Flusher).Flush()
		}
		w.Header().Set("Content-Type", "text/event-stream")
		if style == "llama" {
			fmt.Fprintf(w, ": keep-alive%s%s", eol, eol)
		}
		words := strings.Fields(req.Prompt)
		n := min(req.MaxTokens, len(words))
		time.Sleep(firstDelay)
		for i := range n {
			b, _ := json.Marshal(" " + words[i])
			send(fmt.Sprintf(`{"choices":[{"text":%s,"index":0,"finish_reason":null}]}`, b))
			if style == "error" {
				send(`{"error":{"message":"generation failed","type":"server_error"}}`)
				return
			}
		}
		// The prompt's tokens: a BOS and one per 4 characters.
		usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d}`, 1+len(req.Prompt)/4, n)
		switch style {
		case "hybrid":
			send(`{"choices":[{"text":"","index":0,"finish_reason":"length"}]}`)
			if opts, _ := req.StreamOptions["include_usage"].(bool); opts {
				send(`{"choices":[],"usage":` + usage + `}`)
			}
		case "llama":
			send(`{"choices":[{"text":"","index":0,"finish_reason":"length"}],"usage":` + usage + `}`)
		case "nousage":
			send(`{"choices":[{"text":"","index":0,"finish_reason":"length"}]}`)
		}
		leave()
		send("[DONE]")
	}))
	t.Cleanup(srv.Close)
	return srv, &most
}

func TestRun(t *testing.T) {
	cases := []struct {
		style   string
		streams int
		counted bool
	}{
		{"hybrid", 1, false},
		{"hybrid", 4, false},
		{"llama", 3, false},
		{"nousage", 2, true},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%d", c.style, c.streams), func(t *testing.T) {
			srv, most := fakeServer(t, c.style)
			cfg := Config{URL: srv.URL + "/v1/", Streams: c.streams, Requests: 2 * c.streams, MaxTokens: 5, PromptTokens: 40, Warmup: true}
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Failed != 0 {
				t.Fatalf("%d failed: %+v", res.Failed, res.Requests)
			}
			if got := int(most.Load()); got != c.streams {
				t.Errorf("%d requests at once, want %d", got, c.streams)
			}
			// The fake's tokens are 4 characters (when it reports usage;
			// rounded down), so the prompts come out at about 40 of them.
			if !c.counted && (res.CharsPerToken < 4 || res.CharsPerToken > 4.2) {
				t.Errorf("chars per token %g, want about 4 (measured by the warm-up)", res.CharsPerToken)
			}
			for i, r := range res.Requests {
				if r.Index != i || r.CompletionTokens != 5 || r.Counted != c.counted || r.FinishReason != "length" {
					t.Errorf("request %d: %+v", i, r)
				}
				if want := " " + strings.Join(strings.Fields(Prompt(i, 40, res.CharsPerToken))[:5], " "); r.Text != want {
					t.Errorf("request %d: text %q, want %q", i, r.Text, want)
				}
				if r.TTFTMs < ms(firstDelay) || r.TotalMs < r.TTFTMs {
					t.Errorf("request %d: TTFT %.1f ms, total %.1f ms: want TTFT ≥ %v, total ≥ TTFT", i, r.TTFTMs, r.TotalMs, firstDelay)
				}
				if !c.counted && (r.PromptTokens < 36 || r.PromptTokens > 44) {
					t.Errorf("request %d: %d prompt tokens, want about 40", i, r.PromptTokens)
				}
			}
			if res.CompletionTokens != 5*cfg.Requests {
				t.Errorf("%d completion tokens, want %d", res.CompletionTokens, 5*cfg.Requests)
			}
			if want := float64(res.CompletionTokens) / res.WallS; res.TokensPerS != want {
				t.Errorf("%g tok/s, want %g", res.TokensPerS, want)
			}
			if res.TTFTMs.Mean < ms(firstDelay) || res.TTFTMs.P90 < res.TTFTMs.P50 || res.TTFTMs.Max < res.TTFTMs.P90 {
				t.Errorf("TTFT %+v", res.TTFTMs)
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	cases := []struct {
		style, want string
	}{
		{"error", "error event: {\"message\":\"generation failed\""},
		{"status", "503 Service Unavailable"},
	}
	for _, c := range cases {
		t.Run(c.style, func(t *testing.T) {
			srv, _ := fakeServer(t, c.style)
			// Without the warm-up (which would fail first) and with the
			// prompts' size given.
			res, err := Run(context.Background(), Config{URL: srv.URL + "/v1", Streams: 2, Requests: 4, MaxTokens: 3, PromptTokens: 10, CharsPerToken: 4})
			if err != nil {
				t.Fatal(err)
			}
			if res.Failed != 4 {
				t.Fatalf("%d failed, want 4", res.Failed)
			}
			for _, r := range res.Requests {
				if !strings.Contains(r.Err, c.want) {
					t.Errorf("request %d: error %q, want it to contain %q", r.Index, r.Err, c.want)
				}
			}
			if res.CompletionTokens != 0 || res.TokensPerS != 0 {
				t.Errorf("failed requests counted: %d tokens, %g tok/s", res.CompletionTokens, res.TokensPerS)
			}
			if _, err := Run(context.Background(), Config{URL: srv.URL + "/v1", Streams: 1, Requests: 1, MaxTokens: 3, PromptTokens: 10, Warmup: true}); err == nil || !strings.Contains(err.Error(), "warm-up request") {
				t.Errorf("a failed warm-up: %v", err)
			}
		})
	}
}

func TestParseStream(t *testing.T) {
	cases := []struct {
		name, body, text, err string
		done                  bool
	}{
		{name: "multi-line data", body: "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":\ndata: [{\"text\":\"b\"}]}\n\ndata: [DONE]\n\n", text: "ab", done: true},
		{name: "no space after the colon", body: "data:{\"choices\":[{\"text\":\"x\"}]}\n\ndata:[DONE]\n\n", text: "x", done: true},
		{name: "no blank line at the end", body: "data: {\"choices\":[{\"text\":\"x\"}]}\n\ndata: [DONE]", text: "x", done: true},
		{name: "cut short", body: "data: {\"choices\":[{\"text\":\"x\"}]}\n\n", text: "x", err: "without [DONE]"},
		{name: "llama-server's error line", body: "error: {\"message\":\"boom\"}\n\n", err: "error event: {\"message\":\"boom\"}"},
		{name: "bad JSON", body: "data: {\"choices\n\n", err: "event \"{\\\"choices\""},
		{name: "null error field", body: "data: {\"choices\":[{\"text\":\"y\"}],\"error\":null}\n\ndata: [DONE]\n\n", text: "y", done: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := parseStream(strings.NewReader(c.body), time.Now())
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if s.text.String() != c.text || s.done != c.done {
				t.Errorf("text %q, done %v; want %q, %v", s.text.String(), s.done, c.text, c.done)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	cases := []struct {
		name string
		xs   []float64
		want Stats
	}{
		{"empty", nil, Stats{}},
		{"one", []float64{7}, Stats{7, 7, 7, 7}},
		{"ten", []float64{10, 1, 9, 2, 8, 3, 7, 4, 6, 5}, Stats{Mean: 5.5, P50: 5, P90: 9, Max: 10}},
		{"four", []float64{4, 1, 3, 2}, Stats{Mean: 2.5, P50: 2, P90: 4, Max: 4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := summary(c.xs); got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestPrompt(t *testing.T) {
	seen := map[string]bool{}
	for i := -1; i < 2*len(sentences); i++ {
		p := Prompt(i, 64, 4)
		if seen[p] {
			t.Errorf("prompt %d repeats an earlier one", i)
		}
		seen[p] = true
		if n := len(p); n < 63*4 || n > 63*4+20 {
			t.Errorf("prompt %d: %d characters, want about %d", i, n, 63*4)
		}
		if Prompt(i, 64, 4) != p {
			t.Errorf("prompt %d differs between calls", i)
		}
	}
	if p := Prompt(3, 64, 4); !strings.HasPrefix(p, sentences[3]) {
		t.Errorf("prompt 3 starts %q, want sentence 3", p[:40])
	}
	// Long prompts go round the sentences again.
	if n := len(Prompt(0, 2000, 4)); n < 1999*4 {
		t.Errorf("a 2000-token prompt has %d characters", n)
	}
}

func TestCompare(t *testing.T) {
	req := func(text string, ttft float64) Request {
		return Request{Text: text, CompletionTokens: 3, TTFTMs: ttft, TotalMs: ttft + 20}
	}
	cases := []struct {
		name  string
		files map[string]Result
		rows  []string // lines of the table, whole
		note  string   // "" for none
		err   string   // "" for none
	}{
		{
			name: "one repetition",
			files: map[string]Result{
				"hybrid.s1.json":  {TokensPerS: 10, Requests: []Request{req("a", 100), req("b", 120)}},
				"llama.s1.json":   {TokensPerS: 8, Requests: []Request{req("a", 90), req("c", 95)}},
				"hybrid.s4.json":  {TokensPerS: 20, Requests: []Request{req("a", 10), req("x", 10)}},
				"llama.s4.json":   {TokensPerS: 40, Requests: []Request{req("c", 10), req("x", 30)}},
				"hybrid.s16.json": {Failed: 1, Requests: []Request{{Err: "boom"}}},
				"other.json":      {},
			},
			rows: []string{
				"| 1 | 2 | 10.00 | 8.00 | **1.25** | 1.00 / 1.00 | 110.0 (120.0) | 92.5 (95.0) | 10.0 / 10.0 | 1 of 2 | – |",
				// Text: hybrid's x as llama-server's; hybrid's a as at 1
				// stream, llama-server's c and x not.
				"| 4 | 2 | 20.00 | 40.00 | 0.50 | 2.00 / 5.00 | 10.0 (10.0) | 20.0 (30.0) | 10.0 / 10.0 | 1 of 2 | 1 of 2 / 0 of 2 |",
				"| 16 | 1 | 1 of 1 requests failed | no result | – | – | 1 of 1 requests failed | no result | – | – | – |",
			},
			err: "hybrid at 16 stream(s): 1 of 1 requests failed\nllama-server at 16 stream(s): no result",
		},
		{
			name: "repetitions",
			files: map[string]Result{
				"hybrid.s1.r1.json": {TokensPerS: 10, Requests: []Request{req("a", 100)}},
				"hybrid.s1.r2.json": {TokensPerS: 30, Requests: []Request{req("b", 200)}},
				"hybrid.s1.r3.json": {TokensPerS: 20, Requests: []Request{req("a", 300)}, CPU: &CPUUse{Other: 0.25}},
				"llama.s1.r1.json":  {TokensPerS: 10, Requests: []Request{req("a", 100)}, CPU: &CPUUse{Other: 0.05}},
				"llama.s1.r2.json":  {TokensPerS: 10, Requests: []Request{req("a", 100)}},
				"llama.s1.r3.json":  {TokensPerS: 10, Requests: []Request{req("a", 100)}},
				"hybrid.s2.r1.json": {TokensPerS: 40, Requests: []Request{req("a", 1)}},
				"hybrid.s2.r2.json": {TokensPerS: 40, Requests: []Request{req("a", 1)}},
				"hybrid.s2.r3.json": {TokensPerS: 40, Requests: []Request{req("a", 1)}},
				"llama.s2.r1.json":  {TokensPerS: 40, Requests: []Request{req("a", 1)}},
				"llama.s2.r3.json":  {TokensPerS: 40, Requests: []Request{req("a", 1)}},
			},
			rows: []string{
				// The median of 10, 30 and 20; the TTFT of all three runs;
				// hybrid's text as llama-server's in runs 1 and 3.
				"| 1 | 1 | 20.00 (10.00–30.00) | 10.00 (10.00–10.00) | **2.00** (1.00–3.00) | 1.00 / 1.00 | 200.0 (300.0) | 100.0 (100.0) | 10.0 / 10.0 | 2 of 3 | – |",
				// hybrid's own columns against its single stream stay
				// where llama-server's runs failed.
				"| 2 | 1 | 40.00 (40.00–40.00) | 1 of 3 runs failed | – | 2.00 / – | 1.0 (1.0) | 1 of 3 runs failed | – | – | 2 of 3 / – |",
			},
			note: "Other processes were busy beside the server (cores, over the run): hybrid at 1 stream(s), run 3: 0.25.",
			err:  "llama-server at 2 stream(s): 1 of 3 runs failed",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, r := range c.files {
				b, _ := json.Marshal(r)
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var out strings.Builder
			err := compareDir(dir, &out)
			if got := fmt.Sprint(err); c.err != "" && got != c.err {
				t.Errorf("error %q, want %q", got, c.err)
			}
			table, note, _ := strings.Cut(strings.TrimSpace(out.String()), "\n\n")
			if note != c.note {
				t.Errorf("note %q, want %q", note, c.note)
			}
			lines := strings.Split(table, "\n")
			if len(lines) != 2+len(c.rows) {
				t.Fatalf("%d lines, want a header, a rule and %d rows:\n%s", len(lines), len(c.rows), out.String())
			}
			for i, want := range c.rows {
				if lines[2+i] != want {
					t.Errorf("row %d:\n got %s\nwant %s", i, lines[2+i], want)
				}
			}
		})
	}
	if err := compareDir(t.TempDir(), io.Discard); err == nil || !strings.Contains(err.Error(), "no hybrid.sN.json or llama.sN.json") {
		t.Errorf("an empty folder: %v", err)
	}
}

func TestSampleCPU(t *testing.T) {
	a, err := sampleCPU(os.Getpid())
	if err != nil {
		t.Skip(err) // not Linux
	}
	// Spin until this process has used 200 ms more CPU by getrusage (other
	// tests may share the cores, so wall time says little): its time by
	// sampleCPU and the machine's busy time grow by about that (ticks of
	// 10 ms).
	used := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	u0 := used()
	for start := time.Now(); used()-u0 < 200*time.Millisecond; {
		if time.Since(start) > 20*time.Second {
			t.Fatal("200 ms of CPU not used in 20 s")
		}
	}
	b, err := sampleCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := b.self - a.self; d < 0.15 || d > 5 {
		t.Errorf("this process used %.2f s of CPU by sampleCPU spinning 0.2 s by getrusage", d)
	}
	// Read one after the other: a tick apart at most.
	if d := (b.server - a.server) - (b.self - a.self); d < -0.011 || d > 0.011 {
		t.Errorf("the server (this process) %.2f s, this process %.2f s", b.server-a.server, b.self-a.self)
	}
	if d := b.busy - a.busy; d < 0.1 {
		t.Errorf("the machine was busy %.2f s", d)
	}
	if _, err := sampleCPU(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}
