package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"hybrid/devices/cpu"
	"hybrid/models/chat"
	"hybrid/models/llama"
	"hybrid/runtime"
)

// builtinModel is the built-in stories260K, loaded once.
var builtinModel = sync.OnceValues(func() (*llama.Model, error) { return runtime.LoadModel("", nil) })

// greedy is the sampler of a temperature-0 request, as Executor.Generate
// takes it.
var greedy = runtime.SamplerConfig{Temp: 0, TopP: 1, RepeatPenalty: 1}

type setup struct {
	slots, queue int
	ctx          int           // 0 is 256
	maxBody      int64         // 0 is the default
	writeDelay   time.Duration // sleep before each write to the client
	// httpWriteTimeout is the http.Server's WriteTimeout: 0 is none.
	httpWriteTimeout time.Duration
}

type fixture struct {
	s      *Server
	e      *runtime.Engine
	ts     *httptest.Server
	m      *llama.Model
	ctx    int
	finish chan finished // every generation's end, when watched
}

type finished struct {
	fin    runtime.Finish
	reason string
	at     time.Time
}

func newFixture(t *testing.T, o setup) *fixture {
	t.Helper()
	m, err := builtinModel()
	if err != nil {
		t.Fatal(err)
	}
	if o.slots == 0 {
		o.slots = 1
	}
	if o.ctx == 0 {
		o.ctx = 256
	}
	x, err := runtime.NewExecutor(m, cpu.New("cpu", 1), o.ctx)
	if err != nil {
		t.Fatal(err)
	}
	e, err := runtime.NewEngine(x, runtime.EngineOptions{Slots: o.slots, Queue: o.queue})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(e, m, Options{MaxBody: o.maxBody})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{s: s, e: e, m: m, ctx: o.ctx, finish: make(chan finished, 4096)}
	s.onFinish = func(fin runtime.Finish, reason string) {
		select {
		case f.finish <- finished{fin, reason, time.Now()}:
		default:
		}
	}
	var h http.Handler = s
	if o.writeDelay > 0 {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.ServeHTTP(slowWriter{w, o.writeDelay}, r)
		})
	}
	f.ts = httptest.NewUnstartedServer(h)
	f.ts.Config.WriteTimeout = o.httpWriteTimeout
	f.ts.Start()
	t.Cleanup(f.ts.Close)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		e.Close(ctx)
	})
	return f
}

// slowWriter makes each write of a response wait, so that a generation
// lasts long enough for a test to act during it.
type slowWriter struct {
	http.ResponseWriter
	delay time.Duration
}

func (w slowWriter) Write(b []byte) (int, error) {
	time.Sleep(w.delay)
	return w.ResponseWriter.Write(b)
}

func (w slowWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// do sends a request and returns the response with its whole body.
func (f *fixture) do(t *testing.T, method, path, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, f.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// completion is the JSON of a non-streamed answer (both routes).
type completion struct {
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Text    string `json:"text"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage usage `json:"usage"`
}

func (c *completion) text() string {
	if c.Object == "chat.completion" {
		return c.Choices[0].Message.Content
	}
	return c.Choices[0].Text
}

func (f *fixture) complete(t *testing.T, path, body string) completion {
	t.Helper()
	resp, b := f.do(t, "POST", path, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d: %s", path, resp.StatusCode, b)
	}
	var c completion
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v: %s", path, err, b)
	}
	if len(c.Choices) != 1 {
		t.Fatalf("%s: %d choices: %s", path, len(c.Choices), b)
	}
	return c
}

// event is one server-sent event of a stream.
type event struct {
	Object  string `json:"object"`
	Choices []struct {
		Text  string `json:"text"`
		Delta struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage     `json:"usage"`
	Error *errorBody `json:"error"`
}

// streamed is a whole stream, read.
type streamed struct {
	events []event
	pieces []string // text of each event that has some
	text   string
	reason string
	done   bool // ended with data: [DONE]
}

// readStream reads events from r until [DONE] or the end.
func readStream(t *testing.T, r io.Reader) streamed {
	t.Helper()
	var s streamed
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("a line that is not an event: %q", line)
		}
		if s.done {
			t.Fatalf("an event after [DONE]: %q", line)
		}
		if data == "[DONE]" {
			s.done = true
			continue
		}
		var ev event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		s.events = append(s.events, ev)
		for _, c := range ev.Choices {
			piece := c.Text
			if c.Delta.Content != nil {
				piece = *c.Delta.Content
			}
			if piece != "" {
				s.pieces = append(s.pieces, piece)
				s.text += piece
			}
			if c.FinishReason != nil {
				s.reason = *c.FinishReason
			}
		}
	}
	return s
}

func (f *fixture) stream(t *testing.T, path, body string) streamed {
	t.Helper()
	resp, err := f.ts.Client().Post(f.ts.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: status %d: %s", path, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	return readStream(t, resp.Body)
}

// reference is what Executor.Generate gives for prompt, greedily, on an
// executor of its own.
func reference(t *testing.T, m *llama.Model, ctx int, prompt string, n int) *runtime.Result {
	t.Helper()
	x, err := runtime.NewExecutor(m, cpu.New("cpu", 1), ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := x.Generate(runtime.GenerateOptions{Prompt: prompt, MaxTokens: n, Sampler: greedy})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestGreedyMatchesGenerate checks that a temperature-0 answer, streamed
// and not, through both routes, is what Executor.Generate gives for the
// same prompt, with the usage and finish reason to match.
func TestGreedyMatchesGenerate(t *testing.T) {
	f := newFixture(t, setup{queue: 4})
	const n = 40
	tmpl, _, err := chat.FromGGUF(f.m.File)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []chat.Message{{Role: "system", Content: "Tell a story."}, {Role: "user", Content: "Once upon a time"}}
	_, chatText, err := chat.Prompt(tmpl, f.m.Tokenizer, msgs, chat.Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path, body, prompt string
	}{
		{"completions", "/v1/completions", `"prompt":"Once upon a time"`, "Once upon a time"},
		{"completions-array", "/v1/completions", `"prompt":["Lily and Ben"]`, "Lily and Ben"},
		{"chat", "/v1/chat/completions", `"messages":[{"role":"system","content":"Tell a story."},{"role":"user","content":[{"type":"text","text":"Once upon a time"}]}]`, chatText},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := reference(t, f.m, f.ctx, c.prompt, n)
			if want.StopReason != "length" {
				t.Fatalf("the reference stopped early (%s): pick another prompt", want.StopReason)
			}
			body := fmt.Sprintf(`{"model":"stories260K",%s,"max_tokens":%d,"temperature":0}`, c.body, n)
			got := f.complete(t, c.path, body)
			if got.text() != want.Text {
				t.Errorf("text %q, want %q", got.text(), want.Text)
			}
			wantUsage := usage{len(want.PromptTokens), len(want.Tokens), len(want.PromptTokens) + len(want.Tokens)}
			if got.Usage != wantUsage || got.Choices[0].FinishReason != "length" || got.Model != "stories260K" {
				t.Errorf("usage %+v finish %q model %q, want %+v length stories260K", got.Usage, got.Choices[0].FinishReason, got.Model, wantUsage)
			}
			if c.path == "/v1/chat/completions" && got.Choices[0].Message.Role != "assistant" {
				t.Errorf("role %q", got.Choices[0].Message.Role)
			}

			body = fmt.Sprintf(`{%s,"max_completion_tokens":%d,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`, c.body, n)
			s := f.stream(t, c.path, body)
			if s.text != want.Text || s.reason != "length" || !s.done {
				t.Errorf("stream: text %q reason %q done %v, want %q length", s.text, s.reason, s.done, want.Text)
			}
			last := s.events[len(s.events)-1]
			if last.Usage == nil || *last.Usage != wantUsage || len(last.Choices) != 0 {
				t.Errorf("stream: last event %+v, want usage %+v and no choices", last, wantUsage)
			}
			if c.path == "/v1/chat/completions" && s.events[0].Choices[0].Delta.Role != "assistant" {
				t.Errorf("stream: the first event does not give the role: %+v", s.events[0])
			}
		})
	}
}

// TestStopSequences checks that generation ends at the first stop string,
// which is not returned, streamed or not, and that a stream never sends
// text that turns out to start a stop string.
func TestStopSequences(t *testing.T) {
	f := newFixture(t, setup{queue: 4})
	const n = 60
	want := reference(t, f.m, f.ctx, "Once upon a time", n).Text
	cut := func(stop string) string {
		i := strings.Index(want, stop)
		if i < 0 {
			t.Fatalf("%q is not in the reference text %q", stop, want)
		}
		return want[:i]
	}
	for _, c := range []struct {
		name, stop, text, reason string
	}{
		{"string", `"girl"`, cut("girl"), "stop"},
		{"array-first-wins", `["park","Lily"]`, cut("Lily"), "stop"},
		{"across-tokens", `"little g"`, cut("little g"), "stop"},
		{"never", `["zebra","\n\n\n"]`, want, "length"},
		{"null", `null`, want, "length"},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"prompt":"Once upon a time","max_tokens":%d,"temperature":0,"stop":%s}`, n, c.stop)
			got := f.complete(t, "/v1/completions", body)
			if got.text() != c.text || got.Choices[0].FinishReason != c.reason {
				t.Errorf("text %q (%s), want %q (%s)", got.text(), got.Choices[0].FinishReason, c.text, c.reason)
			}
			s := f.stream(t, "/v1/completions", strings.Replace(body, "{", `{"stream":true,`, 1))
			if s.text != c.text || s.reason != c.reason {
				t.Errorf("stream: text %q (%s), want %q (%s)", s.text, s.reason, c.text, c.reason)
			}
			chatBody := fmt.Sprintf(`{"messages":[{"role":"user","content":"Hi"}],"max_tokens":%d,"temperature":0,"stop":%s,"stream":true}`, n, c.stop)
			if s := f.stream(t, "/v1/chat/completions", chatBody); !s.done || s.reason == "" {
				t.Errorf("chat stream: reason %q done %v", s.reason, s.done)
			}
		})
	}
}

// TestOutputHoldsBack feeds output pieces and checks what it releases at
// each: nothing that may be the start of a stop string, and nothing from
// the first stop string on.
func TestOutputHoldsBack(t *testing.T) {
	for _, c := range []struct {
		name     string
		stops    []string
		pieces   []string
		released []string // after each piece
		final    string   // all released once finished (when not stopped)
		stopped  bool
	}{
		{"no-stops", nil, []string{"ab", "c"}, []string{"ab", "abc"}, "abc", false},
		{"held-then-released", []string{"abc"}, []string{"xa", "b", "d"}, []string{"x", "x", "xabd"}, "xabd", false},
		{"held-then-stopped", []string{"abc"}, []string{"xa", "b", "cdef"}, []string{"x", "x", "x"}, "x", true},
		{"held-at-the-end", []string{"abc"}, []string{"xyab"}, []string{"xy"}, "xyab", false},
		{"earliest-stop", []string{"cd", "b"}, []string{"abcd"}, []string{"a"}, "a", true},
		{"longer-partial", []string{"aab", "ab"}, []string{"xaa"}, []string{"x"}, "xaa", false},
		{"multibyte", []string{"é!"}, []string{"café", "?"}, []string{"caf", "café?"}, "café?", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := &output{stops: c.stops}
			for i, p := range c.pieces {
				o.add(p)
				if got := o.text.String(); got != c.released[i] {
					t.Fatalf("after %q: released %q, want %q", p, got, c.released[i])
				}
			}
			if !o.stopped {
				o.finish("")
			}
			if o.text.String() != c.final || o.stopped != c.stopped {
				t.Errorf("finally %q (stopped %v), want %q (%v)", o.text.String(), o.stopped, c.final, c.stopped)
			}
		})
	}
}

// TestErrors checks every error answer: status, OpenAI's error object with
// the field named, and the headers that go with it.
func TestErrors(t *testing.T) {
	f := newFixture(t, setup{queue: 4, ctx: 64, maxBody: 4096})
	long := strings.Repeat("Once upon a time there was a dog. ", 40)
	chatOK := `"messages":[{"role":"user","content":"Hi"}]`
	for _, c := range []struct {
		name, method, path, body string
		status                   int
		param, code, typ         string
		header                   [2]string // a header it must have
	}{
		{"malformed-json", "POST", "/v1/chat/completions", `{"messages":[`, 400, "", "", "invalid_request_error", [2]string{}},
		{"trailing-garbage", "POST", "/v1/completions", `{"prompt":"x"} x`, 400, "", "", "", [2]string{}},
		{"not-an-object", "POST", "/v1/completions", `["x"]`, 400, "", "", "", [2]string{}},
		{"empty-body", "POST", "/v1/completions", ``, 400, "", "", "", [2]string{}},
		{"wrong-type", "POST", "/v1/completions", `{"prompt":"x","temperature":"hot"}`, 400, "temperature", "", "", [2]string{}},
		{"wrong-type-nested", "POST", "/v1/chat/completions", `{"messages":[{"role":1,"content":"x"}]}`, 400, "messages.role", "", "", [2]string{}},
		{"temperature-range", "POST", "/v1/completions", `{"prompt":"x","temperature":3}`, 400, "temperature", "", "", [2]string{}},
		{"top-p-range", "POST", "/v1/completions", `{"prompt":"x","top_p":0}`, 400, "top_p", "", "", [2]string{}},
		{"top-k-range", "POST", "/v1/completions", `{"prompt":"x","top_k":-1}`, 400, "top_k", "", "", [2]string{}},
		{"repeat-penalty-range", "POST", "/v1/completions", `{"prompt":"x","repeat_penalty":0}`, 400, "repeat_penalty", "", "", [2]string{}},
		{"max-tokens-zero", "POST", "/v1/completions", `{"prompt":"x","max_tokens":0}`, 400, "max_tokens", "", "", [2]string{}},
		{"max-completion-tokens", "POST", "/v1/chat/completions", `{` + chatOK + `,"max_completion_tokens":-3}`, 400, "max_completion_tokens", "", "", [2]string{}},
		{"n", "POST", "/v1/chat/completions", `{` + chatOK + `,"n":2}`, 400, "n", "", "", [2]string{}},
		{"frequency-penalty", "POST", "/v1/chat/completions", `{` + chatOK + `,"frequency_penalty":0.5}`, 400, "frequency_penalty", "", "", [2]string{}},
		{"presence-penalty", "POST", "/v1/completions", `{"prompt":"x","presence_penalty":-1}`, 400, "presence_penalty", "", "", [2]string{}},
		{"logprobs", "POST", "/v1/chat/completions", `{` + chatOK + `,"logprobs":true}`, 400, "logprobs", "", "", [2]string{}},
		{"tools", "POST", "/v1/chat/completions", `{` + chatOK + `,"tools":[{"type":"function"}]}`, 400, "tools", "", "", [2]string{}},
		{"echo", "POST", "/v1/completions", `{"prompt":"x","echo":true}`, 400, "echo", "", "", [2]string{}},
		{"too-many-stops", "POST", "/v1/completions", `{"prompt":"x","stop":["a","b","c","d","e"]}`, 400, "stop", "", "", [2]string{}},
		{"empty-stop", "POST", "/v1/completions", `{"prompt":"x","stop":""}`, 400, "stop", "", "", [2]string{}},
		{"stop-type", "POST", "/v1/completions", `{"prompt":"x","stop":3}`, 400, "stop", "", "", [2]string{}},
		{"no-messages", "POST", "/v1/chat/completions", `{"messages":[]}`, 400, "messages", "", "", [2]string{}},
		{"no-role", "POST", "/v1/chat/completions", `{"messages":[{"content":"x"}]}`, 400, "messages[0].role", "", "", [2]string{}},
		{"image-part", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "messages[0].content[0]", "", "", [2]string{}},
		{"no-prompt", "POST", "/v1/completions", `{}`, 400, "prompt", "", "", [2]string{}},
		{"two-prompts", "POST", "/v1/completions", `{"prompt":["a","b"]}`, 400, "prompt", "", "", [2]string{}},
		{"unknown-model", "POST", "/v1/chat/completions", `{"model":"gpt-4o",` + chatOK + `}`, 404, "model", "model_not_found", "invalid_request_error", [2]string{}},
		{"unknown-model-get", "GET", "/v1/models/gpt-4o", ``, 404, "model", "model_not_found", "", [2]string{}},
		{"prompt-over-context", "POST", "/v1/completions", `{"prompt":"` + long + `"}`, 400, "prompt", "context_length_exceeded", "", [2]string{}},
		{"chat-over-context", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + long + `"}],"stream":true}`, 400, "messages", "context_length_exceeded", "", [2]string{}},
		{"body-over-limit", "POST", "/v1/completions", `{"prompt":"` + strings.Repeat("x", 5000) + `"}`, 413, "", "request_too_large", "", [2]string{}},
		{"wrong-method", "GET", "/v1/chat/completions", ``, 405, "", "", "", [2]string{"Allow", "POST"}},
		{"wrong-method-get-route", "POST", "/v1/models", `{}`, 405, "", "", "", [2]string{"Allow", "GET, HEAD"}},
		{"wrong-method-health", "DELETE", "/health", ``, 405, "", "", "", [2]string{"Allow", "GET, HEAD"}},
		{"unknown-route", "POST", "/v1/embeddings", `{}`, 404, "", "not_found", "", [2]string{}},
		{"unknown-route-root", "GET", "/", ``, 404, "", "not_found", "", [2]string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, b := f.do(t, c.method, c.path, c.body)
			checkError(t, resp, b, c.status, c.param, c.code, c.typ)
			if h := c.header; h[0] != "" && resp.Header.Get(h[0]) != h[1] {
				t.Errorf("%s: %q, want %q", h[0], resp.Header.Get(h[0]), h[1])
			}
		})
	}

	// A body over the limit without a Content-Length is cut off at the limit.
	t.Run("body-over-limit-chunked", func(t *testing.T) {
		pr, pw := io.Pipe()
		go func() {
			pw.Write([]byte(`{"prompt":"`))
			for range 100 {
				if _, err := pw.Write(bytes.Repeat([]byte("x"), 100)); err != nil {
					return
				}
			}
			pw.Write([]byte(`"}`))
			pw.Close()
		}()
		resp, err := f.ts.Client().Post(f.ts.URL+"/v1/completions", "application/json", pr)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		checkError(t, resp, b, 413, "", "request_too_large", "")
	})
}

// checkError checks an error answer. Empty param, code or typ are checked
// to be absent (typ: "invalid_request_error" below 500). The message of a
// bad field (a param without a code) must name it.
func checkError(t *testing.T, resp *http.Response, b []byte, status int, param, code, typ string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var e struct {
		Error *struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error == nil {
		t.Fatalf("not an error object (%v): %s", err, b)
	}
	if e.Error.Message == "" {
		t.Errorf("no message: %s", b)
	}
	if typ == "" {
		typ = "invalid_request_error"
		if status >= 500 {
			typ = "server_error"
		}
	}
	if e.Error.Type != typ {
		t.Errorf("type %q, want %q", e.Error.Type, typ)
	}
	if got := deref(e.Error.Param); got != param {
		t.Errorf("param %q, want %q: %s", got, param, b)
	}
	if got := deref(e.Error.Code); got != code {
		t.Errorf("code %q, want %q: %s", got, code, b)
	}
	if param != "" && code == "" && !strings.Contains(e.Error.Message, param) {
		t.Errorf("the message %q does not name %s", e.Error.Message, param)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestTemplateErrors checks that a template's raise_exception is the
// client's fault (400) and any other template failure the server's (500),
// both with the template's message.
func TestTemplateErrors(t *testing.T) {
	f := newFixture(t, setup{queue: 4})
	for _, c := range []struct {
		name, src string
		status    int
		message   string
	}{
		{"raise", "{{ raise_exception('Conversation roles must alternate') }}", 400, "Conversation roles must alternate"},
		{"fails", "{% for m in messages %}{{ m.content | no_such_filter }}{% endfor %}", 500, "no_such_filter"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmpl, err := chat.Parse(c.src)
			if err != nil {
				t.Fatal(err)
			}
			f.s.tmpl = tmpl
			resp, b := f.do(t, "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}]}`)
			checkError(t, resp, b, c.status, "messages", "template_error", "")
			if !strings.Contains(string(b), c.message) {
				t.Errorf("the error does not give the template's message %q: %s", c.message, b)
			}
		})
	}
}

// TestHealthAndModels checks the GET routes.
func TestHealthAndModels(t *testing.T) {
	f := newFixture(t, setup{})
	resp, b := f.do(t, "GET", "/health", "")
	if resp.StatusCode != 200 || strings.TrimSpace(string(b)) != `{"status":"ok"}` {
		t.Errorf("/health: %d %s", resp.StatusCode, b)
	}
	for _, path := range []string{"/v1/models", "/models"} {
		resp, b = f.do(t, "GET", path, "")
		var list struct {
			Object string      `json:"object"`
			Data   []modelJSON `json:"data"`
		}
		if err := json.Unmarshal(b, &list); err != nil || resp.StatusCode != 200 || list.Object != "list" ||
			len(list.Data) != 1 || list.Data[0].ID != "stories260K" || list.Data[0].Object != "model" {
			t.Errorf("%s: %d %s (%v)", path, resp.StatusCode, b, err)
		}
	}
	resp, b = f.do(t, "GET", "/v1/models/stories260K", "")
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"id":"stories260K"`) {
		t.Errorf("/v1/models/stories260K: %d %s", resp.StatusCode, b)
	}
}

// holdSlot starts a greedy stream that runs until the end of the
// context and returns once its first event has arrived: the engine's slot
// is then taken. stop closes the connection.
func (f *fixture) holdSlot(t *testing.T) (stop func()) {
	t.Helper()
	resp, err := f.ts.Client().Post(f.ts.URL+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"Once upon a time","temperature":0,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: {") {
		t.Fatalf("first line %q, %v", line, err)
	}
	return func() { resp.Body.Close() }
}

// TestQueueFull checks that a request that finds every slot busy and the
// queue full is refused at once with 429 and Retry-After, and that the
// slot serves again once free.
func TestQueueFull(t *testing.T) {
	f := newFixture(t, setup{queue: 0, ctx: 2048, writeDelay: 2 * time.Millisecond})
	stop := f.holdSlot(t)
	for _, c := range []struct{ path, body string }{
		{"/v1/completions", `{"prompt":"Hi","max_tokens":2}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"stream":true}`},
	} {
		resp, b := f.do(t, "POST", c.path, c.body)
		checkError(t, resp, b, http.StatusTooManyRequests, "", "queue_full", "rate_limit_error")
		if ra := resp.Header.Get("Retry-After"); ra != "1" {
			t.Errorf("Retry-After %q, want 1", ra)
		}
	}
	stop()
	waitFinish(t, f, 5*time.Second)
	f.complete(t, "/v1/completions", `{"prompt":"Hi","max_tokens":2}`)
}

// waitFinish waits for the next generation to end and returns how.
func waitFinish(t *testing.T, f *fixture, d time.Duration) finished {
	t.Helper()
	select {
	case fin := <-f.finish:
		return fin
	case <-time.After(d):
		t.Fatalf("no generation ended in %v", d)
	}
	return finished{}
}

// TestClientGoneCancels checks that a client that goes away mid-stream
// cancels its generation within a step or two: the engine reports it
// cancelled long before it could have run to the end of the context, and
// its slot (the only one, with no queue) takes the next request.
func TestClientGoneCancels(t *testing.T) {
	f := newFixture(t, setup{queue: 0, ctx: 2048, writeDelay: 2 * time.Millisecond})
	stop := f.holdSlot(t)
	gone := time.Now()
	stop()
	fin := waitFinish(t, f, 5*time.Second)
	if fin.fin.Reason != runtime.FinishCancelled || fin.reason != "" {
		t.Fatalf("the generation ended %+v (%q), want cancelled", fin.fin, fin.reason)
	}
	// Each token waits 2 ms to be written: 2048 of them would take 4 s.
	if d := fin.at.Sub(gone); d > time.Second || fin.fin.Tokens > 200 {
		t.Errorf("cancelled %v after the client left, after %d tokens", d, fin.fin.Tokens)
	}
	got := f.complete(t, "/v1/completions", `{"prompt":"Hi","max_tokens":2}`)
	if got.Usage.CompletionTokens != 2 {
		t.Errorf("the next request: %+v", got)
	}
}

// TestShutdownEndsStreams checks what a stream gets when the engine shuts
// down under it (hybrid serve's grace period over): an error event, not a
// cut; and that requests after it get 503.
func TestShutdownEndsStreams(t *testing.T) {
	f := newFixture(t, setup{queue: 0, ctx: 2048, writeDelay: 2 * time.Millisecond})
	resp, err := f.ts.Client().Post(f.ts.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"Once upon a time"}],"temperature":0,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: {") {
		t.Fatalf("first line %q, %v", line, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace
	f.e.Close(ctx)
	s := readStream(t, br)
	last := s.events[len(s.events)-1]
	if last.Error == nil || deref(last.Error.Code) != "shutting_down" || s.done {
		t.Errorf("the stream ended with %+v (done %v), want an error event", last, s.done)
	}
	r2, b := f.do(t, "POST", "/v1/completions", `{"prompt":"Hi"}`)
	checkError(t, r2, b, http.StatusServiceUnavailable, "", "shutting_down", "")
}

// TestLongStreamOutlivesWriteTimeout checks that a stream may last longer
// than the HTTP server's WriteTimeout, which is set once per request: each
// event gets a deadline of its own.
func TestLongStreamOutlivesWriteTimeout(t *testing.T) {
	f := newFixture(t, setup{queue: 1, ctx: 256, writeDelay: 2 * time.Millisecond, httpWriteTimeout: 150 * time.Millisecond})
	start := time.Now()
	s := f.stream(t, "/v1/completions", `{"prompt":"Once upon a time","temperature":0,"stream":true}`)
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("the stream took only %v: not longer than the write timeout", took)
	}
	if !s.done || s.reason != "length" || len(s.pieces) < 200 {
		t.Errorf("the stream was cut: done %v, reason %q, %d pieces", s.done, s.reason, len(s.pieces))
	}
}

// TestSpecialTextInMessages checks that a chat message's special-token
// text reaches the model as text: the prompt's token count is the one
// chat.Prompt gives, not Encode's.
func TestSpecialTextInMessages(t *testing.T) {
	f := newFixture(t, setup{queue: 4})
	got := f.complete(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi <s> there"}],"max_tokens":1}`)
	tmpl, _, err := chat.FromGGUF(f.m.File)
	if err != nil {
		t.Fatal(err)
	}
	ids, text, err := chat.Prompt(tmpl, f.m.Tokenizer, []chat.Message{{Role: "user", Content: "Hi <s> there"}}, chat.Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.Usage.PromptTokens != len(ids) {
		t.Errorf("prompt_tokens %d, want %d", got.Usage.PromptTokens, len(ids))
	}
	if n := len(f.m.Tokenizer.Encode(text, true)); n == len(ids) {
		t.Fatalf("the test needs a vocabulary where <s> is special: Encode gives %d tokens too", n)
	}
}
