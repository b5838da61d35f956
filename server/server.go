// Package server is an OpenAI-compatible HTTP API over a runtime.Engine: what
// `hybrid serve` listens with. Its routes (each also without the /v1 prefix,
// as llama-server allows):
//
//	POST /v1/chat/completions   a conversation, rendered with the model's chat template
//	POST /v1/completions        a prompt string (or an array of one string)
//	GET  /v1/models             the one model served; /v1/models/{id} that model
//	GET  /health                {"status":"ok"}
//
// Both POST routes take stream (server-sent events, "data: {...}" and a last
// "data: [DONE]"; stream_options.include_usage adds a chunk with usage),
// max_tokens or max_completion_tokens, temperature, top_p, top_k, seed,
// stop (a string or up to 4), repeat_penalty (llama-server's),
// chat_template_kwargs (chat; llama-server's extra template variables) and
// n (1 only). frequency_penalty and presence_penalty are accepted only as 0,
// logprobs only as off, tools only as empty; other fields are ignored.
//
// Defaults are llama-server's, not OpenAI's: temperature 0.8, top_k 40,
// top_p 0.95, repeat_penalty 1 (off; it looks at the last 64 tokens when on),
// and no token limit: generation runs to an end-of-generation token, a stop
// string or the end of the context (finish_reason "length"), for both
// routes (OpenAI's legacy completions stop at 16 tokens). A request without
// a seed, or with a negative one, gets a random seed. temperature 0 is
// greedy. A prompt and its completion share the context: a prompt longer
// than it is refused, and a completion that reaches it ends with "length",
// as llama-server does, rather than being refused up front as OpenAI does.
//
// Prompts: a chat is rendered with the model's chat template (ChatML for a
// model without one) and tokenized by chat.Prompt, so text in messages is
// never read as special tokens; a completion's prompt is tokenized as
// llama-server does, special-token text parsed and a BOS added as the
// vocabulary asks. The "model" field, unless absent or empty, must be the
// served id: the model file's base name, or "stories260K" for the built-in
// model.
//
// Errors are OpenAI's error object, {"error":{"message","type","param",
// "code"}}: 400 for malformed JSON or a bad field (param names it), a prompt
// longer than the context (code context_length_exceeded) or a template
// that raised an exception (code template_error); 404 for an unknown route
// or model (code model_not_found); 405 for a wrong method (with Allow); 413
// for a body over the limit (code request_too_large); 429 with Retry-After
// when every slot is busy and the queue is full (code queue_full); 500 when
// a template fails otherwise or a step fails; 503 once the server shuts down.
// An error after a stream has started arrives as a last event
// "data: {"error":{...}}" instead of a finish reason.
//
// A request whose client goes away is cancelled (the engine checks the
// request's context before each step); a write that a client does not take
// within Options.WriteTimeout fails and cancels it too.
package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"hybrid/models/builtin"
	"hybrid/models/chat"
	"hybrid/models/llama"
	"hybrid/runtime"
)

// DefaultMaxBody is the request body limit when Options.MaxBody is 0: 8 MiB,
// twice the text of the longest context hybrid allows at about 4 bytes a
// token, plus room for JSON escapes.
const DefaultMaxBody = 8 << 20

// MaxBodyLimit bounds Options.MaxBody.
const MaxBodyLimit = 1 << 30

// DefaultWriteTimeout is Options.WriteTimeout's default.
const DefaultWriteTimeout = 30 * time.Second

// MaxStops is the most stop strings a request may give (OpenAI's limit).
const MaxStops = 4

// MaxStopBytes bounds each stop string.
const MaxStopBytes = 1024

// Options configure a Server.
type Options struct {
	// ModelID is the id the model is served as; "" is ModelID(m).
	ModelID string
	// MaxBody is the largest request body in bytes: 0 is DefaultMaxBody, at
	// most MaxBodyLimit.
	MaxBody int64
	// WriteTimeout bounds each write to a client (every event of a
	// stream): 0 is DefaultWriteTimeout.
	WriteTimeout time.Duration
	// Logf, if set, gets one line per request.
	Logf func(format string, args ...any)
}

// Server answers the OpenAI API for one model on one engine. It is an
// http.Handler, safe for concurrent use.
type Server struct {
	engine  *runtime.Engine
	model   *llama.Model
	tmpl    *chat.Template
	tmplErr error // why the model's chat template cannot be used
	id      string
	created int64
	opts    Options

	// onFinish, set by tests, sees how each generation ended.
	onFinish func(fin runtime.Finish, reason string)
}

// ModelID is the id a model is served as by default: its file's base name,
// or "stories260K" for the built-in model.
func ModelID(m *llama.Model) string {
	if m.Path == builtin.Name {
		return "stories260K"
	}
	return filepath.Base(m.Path)
}

// New returns a Server for model m generating on e (an engine over an
// executor of m). A chat template in the model that does not parse is not
// an error here: chat completions then fail with its error (TemplateError
// says so at start-up) while completions work.
func New(e *runtime.Engine, m *llama.Model, o Options) (*Server, error) {
	if o.MaxBody < 0 || o.MaxBody > MaxBodyLimit {
		return nil, fmt.Errorf("server: body limit %d bytes must be 0 (the default, %d) or 1..%d", o.MaxBody, DefaultMaxBody, MaxBodyLimit)
	}
	if o.MaxBody == 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.WriteTimeout < 0 {
		return nil, fmt.Errorf("server: write timeout %v must be >= 0", o.WriteTimeout)
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.ModelID == "" {
		o.ModelID = ModelID(m)
	}
	s := &Server{engine: e, model: m, id: o.ModelID, created: time.Now().Unix(), opts: o}
	s.tmpl, _, s.tmplErr = chat.FromGGUF(m.File)
	return s, nil
}

// TemplateError is why chat completions cannot render the model's chat
// template, or nil.
func (s *Server) TemplateError() error { return s.tmplErr }

// ID is the model id served.
func (s *Server) ID() string { return s.id }

// ServeHTTP answers one request of the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	s.route(sw, r)
	if s.opts.Logf != nil {
		s.opts.Logf("%s %s %d %s%s", r.Method, r.URL.Path, sw.status, time.Since(start).Round(time.Millisecond), sw.note)
	}
}

func (s *Server) route(w *statusWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	if !strings.HasPrefix(path, "/v1/") && path != "/health" {
		path = "/v1" + path
	}
	post := func(h func(http.ResponseWriter, *http.Request)) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, &apiError{status: http.StatusMethodNotAllowed, msg: fmt.Sprintf("%s %s: use POST", r.Method, r.URL.Path)})
			return
		}
		h(w, r)
	}
	get := func(h func(http.ResponseWriter, *http.Request)) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, &apiError{status: http.StatusMethodNotAllowed, msg: fmt.Sprintf("%s %s: use GET", r.Method, r.URL.Path)})
			return
		}
		h(w, r)
	}
	switch {
	case path == "/v1/chat/completions":
		post(s.chatCompletions)
	case path == "/v1/completions":
		post(s.completions)
	case path == "/v1/models":
		get(s.models)
	case strings.HasPrefix(path, "/v1/models/"):
		get(func(w http.ResponseWriter, r *http.Request) { s.modelByID(w, strings.TrimPrefix(path, "/v1/models/")) })
	case path == "/health":
		get(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		})
	default:
		writeError(w, &apiError{status: http.StatusNotFound, msg: fmt.Sprintf("no route %s %s", r.Method, r.URL.Path), code: "not_found"})
	}
}

type modelJSON struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *Server) modelJSON() modelJSON {
	return modelJSON{ID: s.id, Object: "model", Created: s.created, OwnedBy: "hybrid"}
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []modelJSON{s.modelJSON()}})
}

func (s *Server) modelByID(w http.ResponseWriter, id string) {
	if id != s.id {
		writeError(w, s.unknownModel(id))
		return
	}
	writeJSON(w, http.StatusOK, s.modelJSON())
}

func (s *Server) unknownModel(id string) *apiError {
	return &apiError{status: http.StatusNotFound, param: "model", code: "model_not_found",
		msg: fmt.Sprintf("the model %q does not exist: this server serves %q", id, s.id)}
}

// apiError is an error answered with OpenAI's error object.
type apiError struct {
	status     int
	msg        string
	typ        string // "" is invalid_request_error below 500, server_error above
	param      string
	code       string
	retryAfter int // seconds, for Retry-After; 0 for none
}

func (e *apiError) Error() string { return e.msg }

type errorJSON struct {
	Error errorBody `json:"error"`
}

type errorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) body() errorJSON {
	typ := e.typ
	if typ == "" {
		typ = "invalid_request_error"
		if e.status >= 500 {
			typ = "server_error"
		}
	}
	b := errorBody{Message: e.msg, Type: typ}
	if e.param != "" {
		b.Param = &e.param
	}
	if e.code != "" {
		b.Code = &e.code
	}
	return errorJSON{b}
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	if sw, ok := w.(*statusWriter); ok {
		sw.note = " " + e.msg
	}
	writeJSON(w, e.status, e.body())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only values of this package are written: a failure is a bug.
		panic(fmt.Sprintf("server: encode response: %v", err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// statusWriter remembers the status written, for the log line.
type statusWriter struct {
	http.ResponseWriter
	status int
	note   string
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
