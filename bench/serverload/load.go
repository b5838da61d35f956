package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config is one load run against a server.
type Config struct {
	URL          string // the API's base, such as http://127.0.0.1:8080/v1
	Model        string // "" leaves the request's model out
	Streams      int    // clients sending at once
	Requests     int    // requests in all, shared by the clients
	MaxTokens    int
	PromptTokens int     // about how long each prompt is
	Temperature  float64 // each request's; the servers' own defaults for the other sampling settings
	Seed         int64
	Timeout      time.Duration // for one request
	// CharsPerToken sizes the prompts; 0 measures it with the warm-up
	// request (see Run).
	CharsPerToken float64
	// Warmup sends the warm-up request where CharsPerToken is given too.
	Warmup bool
	// ServerPID, if not 0, is the server's process: its CPU time is told
	// apart from other processes' (Result.CPU).
	ServerPID int
	// Pause is an idle time between the warm-up and the measured requests.
	Pause time.Duration
}

// Request is what one completion request measured.
type Request struct {
	Index            int     `json:"index"`  // which prompt (prompt i is the same on every server)
	Client           int     `json:"client"` // which of the concurrent clients sent it
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	Counted          bool    `json:"counted,omitempty"` // completion tokens counted from text events: the server sent no usage
	StartMs          float64 `json:"start_ms"`          // since the run's start
	TTFTMs           float64 `json:"ttft_ms"`           // request sent to the first event with text
	TotalMs          float64 `json:"total_ms"`          // request sent to the end of the stream
	FinishReason     string  `json:"finish_reason"`
	Text             string  `json:"text"`
	Err              string  `json:"error,omitempty"`
}

// Stats summarizes a sample.
type Stats struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	Max  float64 `json:"max"`
}

// Result is one run: the aggregate and every request.
type Result struct {
	URL              string  `json:"url"`
	Model            string  `json:"model,omitempty"`
	Streams          int     `json:"streams"`
	MaxTokens        int     `json:"max_tokens"`
	Temperature      float64 `json:"temperature"`
	PromptTarget     int     `json:"prompt_tokens_target"`
	CharsPerToken    float64 `json:"chars_per_token"`
	WallS            float64 `json:"wall_s"` // the first request sent to the last one done
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	// TokensPerS is the aggregate generation rate: completion tokens of
	// every request over WallS.
	TokensPerS float64 `json:"tokens_per_s"`
	TTFTMs     Stats   `json:"ttft_ms"`
	// TPOTMs is each request's time per output token after its first:
	// (total - TTFT) / (completion tokens - 1).
	TPOTMs Stats `json:"tpot_ms"`
	// CPU is the machine's CPU use during the run (Linux), nil where it
	// was not measured.
	CPU      *CPUUse   `json:"cpu,omitempty"`
	Failed   int       `json:"failed"`
	Requests []Request `json:"requests"`
}

// CPUUse is CPU time over the run's wall time, in cores. On a machine of
// few cores, another process busy beside the server (Other) slows it down
// by more than its share: a server's threads wait for each other at every
// step, and for the one that was descheduled.
type CPUUse struct {
	Server float64 `json:"server_cores"` // 0 where Config.ServerPID was not given
	Client float64 `json:"client_cores"` // this process
	Other  float64 `json:"other_cores"`  // the rest: other processes, and the kernel's interrupts
}

// completionBody is the request: streamed, greedy, with a fixed seed.
type completionBody struct {
	Model         string         `json:"model,omitempty"`
	Prompt        string         `json:"prompt"`
	MaxTokens     int            `json:"max_tokens"`
	Temperature   float64        `json:"temperature"`
	Seed          int64          `json:"seed"`
	Stream        bool           `json:"stream"`
	StreamOptions map[string]any `json:"stream_options"`
}

// chunk is the part of a stream event (hybrid's and llama-server's alike)
// that the measurement reads. llama-server puts usage on its last event
// whether or not stream_options.include_usage asks for it.
type chunk struct {
	Choices []struct {
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// stream is what parseStream read from one response body.
type stream struct {
	text         strings.Builder
	textEvents   int
	ttft         time.Duration // 0: no text came
	usage        bool
	prompt       int
	completion   int
	finishReason string
	done         bool // the [DONE] event came
}

// parseStream reads server-sent events from body until [DONE] or its end,
// timing the first event with text from sent.
func parseStream(body io.Reader, sent time.Time) (*stream, error) {
	s := &stream{}
	r := bufio.NewReaderSize(body, 64<<10)
	var data []string
	dispatch := func() error {
		if len(data) == 0 {
			return nil
		}
		d := strings.Join(data, "\n")
		data = data[:0]
		if strings.TrimSpace(d) == "[DONE]" {
			s.done = true
			return nil
		}
		var c chunk
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			return fmt.Errorf("event %q: %w", clip(d), err)
		}
		if len(c.Error) > 0 && string(c.Error) != "null" {
			return fmt.Errorf("error event: %s", clip(string(c.Error)))
		}
		for _, ch := range c.Choices {
			if ch.Text != nil && *ch.Text != "" {
				if s.ttft == 0 {
					s.ttft = time.Since(sent)
				}
				s.text.WriteString(*ch.Text)
				s.textEvents++
			}
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				s.finishReason = *ch.FinishReason
			}
		}
		if c.Usage != nil {
			s.usage = true
			s.prompt, s.completion = c.Usage.PromptTokens, c.Usage.CompletionTokens
		}
		return nil
	}
	for !s.done {
		line, err := r.ReadString('\n')
		if line = strings.TrimRight(line, "\r\n"); line == "" {
			if derr := dispatch(); derr != nil {
				return s, derr
			}
		} else if after, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(after, " "))
		} else if after, ok := strings.CutPrefix(line, "error:"); ok {
			// llama-server's way of failing a stream that has begun.
			return s, fmt.Errorf("error event: %s", clip(strings.TrimSpace(after)))
		}
		// Comments (":") and other fields (event:, id:, retry:) carry
		// nothing measured.
		if errors.Is(err, io.EOF) {
			if derr := dispatch(); derr != nil {
				return s, derr
			}
			if !s.done {
				return s, errors.New("the stream ended without [DONE]")
			}
		} else if err != nil {
			return s, err
		}
	}
	return s, nil
}

// clip shortens a server's text for an error message.
func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// client sends completion requests to one server.
type client struct {
	cfg  Config
	http *http.Client
}

func newClient(cfg Config) *client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// A connection per request: llama-server closes a connection after a
	// stream, and a POST sent on it meanwhile fails ("server closed idle
	// connection"; Go retries no POST). A loopback connect costs tens of
	// microseconds, the same on both servers.
	tr.DisableKeepAlives = true
	return &client{cfg: cfg, http: &http.Client{Transport: tr}}
}

// complete sends one streamed completion of prompt and measures it.
func (c *client) complete(ctx context.Context, prompt string, maxTokens int) (*stream, time.Duration, error) {
	body, err := json.Marshal(completionBody{
		Model: c.cfg.Model, Prompt: prompt, MaxTokens: maxTokens, Temperature: c.cfg.Temperature, Seed: c.cfg.Seed,
		Stream: true, StreamOptions: map[string]any{"include_usage": true},
	})
	if err != nil {
		return nil, 0, err
	}
	if c.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.Timeout)
		defer cancel()
	}
	url := strings.TrimSuffix(c.cfg.URL, "/") + "/completions"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	sent := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, 0, fmt.Errorf("POST %s: %s: %s", url, resp.Status, clip(strings.TrimSpace(string(b))))
	}
	s, err := parseStream(resp.Body, sent)
	total := time.Since(sent)
	if err != nil {
		return s, total, fmt.Errorf("POST %s: %w", url, err)
	}
	return s, total, nil
}

// warmupTokens bounds the warm-up request's generation: enough to run
// decode steps (and whatever a server sets up on its first) without
// doubling the run's time.
const warmupTokens = 16

// Run warms the server with one request, not measured, then has
// cfg.Streams clients send cfg.Requests requests in all, each client one
// after another, prompt i to the i-th request taken. Where
// cfg.CharsPerToken is 0, the warm-up's usage measures it.
//
// The warm-up's text is the same in every run, whatever the characters a
// token: a server's first request may leave state behind that changes later
// results (in November 2026 hybrid serve's greedy text depended on whether
// its first prompt had 64 tokens or more), so every run starts the same
// way. It is about cfg.PromptTokens long at 4 characters a token (English
// in a Llama vocabulary). After it, Run idles for cfg.Pause.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	c := newClient(cfg)
	cpt := cfg.CharsPerToken
	if cfg.Warmup || cpt == 0 {
		p := Prompt(-1, cfg.PromptTokens, 4)
		s, _, err := c.complete(ctx, p, min(cfg.MaxTokens, warmupTokens))
		if err != nil {
			return nil, fmt.Errorf("warm-up request: %w", err)
		}
		if cpt == 0 {
			cpt = 4
			if s.usage && s.prompt > 1 {
				// Less one for the BOS token the server adds.
				cpt = float64(len(p)) / float64(s.prompt-1)
			}
		}
	}
	select {
	case <-time.After(cfg.Pause):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	res := &Result{URL: cfg.URL, Model: cfg.Model, Streams: cfg.Streams, MaxTokens: cfg.MaxTokens, Temperature: cfg.Temperature,
		PromptTarget: cfg.PromptTokens, CharsPerToken: cpt, Requests: make([]Request, cfg.Requests)}
	prompts := make([]string, cfg.Requests)
	for i := range prompts {
		prompts[i] = Prompt(i, cfg.PromptTokens, cpt)
	}
	next := make(chan int, cfg.Requests)
	for i := range cfg.Requests {
		next <- i
	}
	close(next)
	cpu0, cpuErr := sampleCPU(cfg.ServerPID)
	if cpuErr != nil && cfg.ServerPID > 0 {
		return nil, fmt.Errorf("--server-pid %d: %w", cfg.ServerPID, cpuErr)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for k := range cfg.Streams {
		wg.Go(func() {
			for i := range next {
				r := Request{Index: i, Client: k, StartMs: ms(time.Since(start))}
				s, total, err := c.complete(ctx, prompts[i], c.cfg.MaxTokens)
				r.TotalMs = ms(total)
				if s != nil {
					r.Text = s.text.String()
					r.TTFTMs = ms(s.ttft)
					r.FinishReason = s.finishReason
					r.PromptTokens, r.CompletionTokens = s.prompt, s.completion
					if !s.usage {
						r.Counted, r.CompletionTokens = true, s.textEvents
					}
				}
				if err == nil && s.ttft == 0 && r.CompletionTokens > 0 {
					err = fmt.Errorf("%d tokens generated and no text", r.CompletionTokens)
				}
				if err != nil {
					r.Err = err.Error()
				}
				res.Requests[i] = r
			}
		})
	}
	wg.Wait()
	res.WallS = time.Since(start).Seconds()
	if cpu1, err := sampleCPU(cfg.ServerPID); cpuErr == nil && err == nil {
		server, self := cpu1.server-cpu0.server, cpu1.self-cpu0.self
		res.CPU = &CPUUse{Server: server / res.WallS, Client: self / res.WallS,
			Other: max(cpu1.busy-cpu0.busy-server-self, 0) / res.WallS}
	} else if cfg.ServerPID > 0 {
		return nil, fmt.Errorf("--server-pid %d: %w", cfg.ServerPID, errors.Join(cpuErr, err))
	}
	summarize(res)
	return res, nil
}

// summarize fills the aggregate fields from res.Requests: failed requests
// count in the wall time only.
func summarize(res *Result) {
	var ttft, tpot []float64
	res.PromptTokens, res.CompletionTokens, res.Failed = 0, 0, 0
	for _, r := range res.Requests {
		if r.Err != "" {
			res.Failed++
			continue
		}
		res.PromptTokens += r.PromptTokens
		res.CompletionTokens += r.CompletionTokens
		if r.CompletionTokens > 0 {
			ttft = append(ttft, r.TTFTMs)
		}
		if r.CompletionTokens > 1 {
			tpot = append(tpot, (r.TotalMs-r.TTFTMs)/float64(r.CompletionTokens-1))
		}
	}
	if res.WallS > 0 {
		res.TokensPerS = float64(res.CompletionTokens) / res.WallS
	}
	res.TTFTMs, res.TPOTMs = summary(ttft), summary(tpot)
}

// summary is the mean, the nearest-rank 50th and 90th percentiles and the
// largest of xs; zeros for an empty sample (JSON has no NaN).
func summary(xs []float64) Stats {
	if len(xs) == 0 {
		return Stats{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(i, 0)]
	}
	return Stats{Mean: sum / float64(len(s)), P50: rank(0.5), P90: rank(0.9), Max: s[len(s)-1]}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
