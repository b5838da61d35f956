package server

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"hybrid/models/chat"
	"hybrid/runtime"
)

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if e := s.decode(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	j, e := s.check(&req.params)
	if e == nil && req.TopLogprobs != nil && *req.TopLogprobs != 0 {
		e = badField("top_logprobs", "log probabilities are not supported")
	}
	var msgs []chat.Message
	if e == nil {
		msgs, e = req.messages()
	}
	if e != nil {
		writeError(w, e)
		return
	}
	if s.tmplErr != nil {
		writeError(w, &apiError{status: http.StatusInternalServerError, code: "template_error",
			msg: "the model's chat template cannot be used: " + s.tmplErr.Error()})
		return
	}
	ids, _, err := chat.Prompt(s.tmpl, s.model.Tokenizer, msgs, chat.Options{AddGenerationPrompt: true, Extra: req.ChatTemplateKwargs})
	if err != nil {
		// A template that raises refuses this conversation (roles out of
		// order, say): the client's to fix. So is special-token text the
		// template moves around. Anything else is the template's fault.
		var re *chat.RaiseError
		status := http.StatusInternalServerError
		if errors.As(err, &re) || errors.Is(err, chat.ErrChangedContent) {
			status = http.StatusBadRequest
		}
		writeError(w, &apiError{status: status, param: "messages", code: "template_error", msg: err.Error()})
		return
	}
	s.generate(w, r, j, ids, true)
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if e := s.decode(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	j, e := s.check(&req.params)
	if e == nil {
		e = req.check()
	}
	var prompt string
	if e == nil {
		prompt, e = req.prompt()
	}
	if e != nil {
		writeError(w, e)
		return
	}
	s.generate(w, r, j, s.model.Tokenizer.Encode(prompt, true), false)
}

// generate runs a job on the engine and answers it, as one JSON object or
// as a stream of events.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, j *job, prompt []int32, isChat bool) {
	field := "prompt"
	if isChat {
		field = "messages"
	}
	if len(prompt) == 0 {
		writeError(w, badField(field, "the prompt is empty (and the model adds no BOS token)"))
		return
	}
	if n := s.engine.Context(); len(prompt) > n {
		writeError(w, contextExceeded(field, len(prompt), n))
		return
	}
	ctx := r.Context()
	a := &answer{id: newID(isChat), created: time.Now().Unix(), model: s.id, chat: isChat}
	out := &output{stops: j.stops}
	var ev *events
	if j.stream {
		ev = &events{w: w, rc: http.NewResponseController(w), timeout: s.opts.WriteTimeout}
		out.send = func(text string) error { return ev.send(a.chunk(text, "")) }
	}
	start := func() {
		ev.start()
		if isChat {
			ev.send(a.roleChunk())
		}
	}
	tok := s.model.Tokenizer
	text := tok.NewStream(false)
	generated := 0
	emit := func(id int32) bool {
		if ctx.Err() != nil {
			return false
		}
		generated++
		if ev != nil && !ev.started {
			start()
		}
		return out.add(text.Add(id))
	}
	fin, err := s.engine.Generate(ctx, runtime.Request{Prompt: prompt, MaxTokens: j.maxTokens, Sampler: j.sampler}, emit)
	if err != nil {
		e := engineError(err, field)
		if ev != nil && ev.started {
			ev.fail(e)
			return
		}
		writeError(w, e)
		return
	}
	if fin.Reason != runtime.FinishCancelled {
		out.finish(text.Flush())
	}
	var reason string
	switch {
	case out.stopped, fin.Reason == runtime.FinishStop:
		reason = "stop"
	case fin.Reason == runtime.FinishLength, fin.Reason == runtime.FinishContext:
		reason = "length"
	}
	if s.onFinish != nil {
		s.onFinish(fin, reason)
	}
	use := usage{PromptTokens: len(prompt), CompletionTokens: generated, TotalTokens: len(prompt) + generated}
	logged := reason
	if logged == "" {
		logged = fin.Reason
	}
	note(w, " prompt=%d completion=%d finish=%s queue=%.0fms", use.PromptTokens, use.CompletionTokens, logged, fin.QueueMs)
	if reason == "" {
		// Cancelled: the client went away or stopped reading, or the
		// engine was shut down under it.
		if ctx.Err() != nil || out.err != nil {
			note(w, " (the client went away)")
			return
		}
		e := &apiError{status: http.StatusServiceUnavailable, code: "shutting_down", msg: "the server shut down before the generation finished"}
		if ev != nil && ev.started {
			ev.fail(e)
			return
		}
		writeError(w, e)
		return
	}
	if ev == nil {
		writeJSON(w, http.StatusOK, a.whole(out.text.String(), reason, use))
		return
	}
	if !ev.started {
		start()
	}
	ev.send(a.chunk("", reason))
	if j.includeUsage {
		ev.send(a.usageChunk(use))
	}
	ev.write([]byte("data: [DONE]\n\n"))
}

func contextExceeded(field string, tokens, context int) *apiError {
	return &apiError{status: http.StatusBadRequest, param: field, code: "context_length_exceeded",
		msg: fmt.Sprintf("the prompt is %d tokens, more than the context of %d tokens", tokens, context)}
}

// engineError is the answer to an error of Engine.Generate.
func engineError(err error, field string) *apiError {
	var ce *runtime.ContextError
	switch {
	case errors.Is(err, runtime.ErrBusy):
		return &apiError{status: http.StatusTooManyRequests, typ: "rate_limit_error", code: "queue_full", retryAfter: 1,
			msg: "every slot is busy and the queue is full: retry later"}
	case errors.Is(err, runtime.ErrClosed):
		return &apiError{status: http.StatusServiceUnavailable, code: "shutting_down", msg: "the server is shutting down"}
	case errors.As(err, &ce):
		return contextExceeded(field, ce.Tokens, ce.Context)
	}
	return &apiError{status: http.StatusInternalServerError, msg: "generation failed: " + err.Error()}
}

// note adds to the request's log line.
func note(w http.ResponseWriter, format string, args ...any) {
	if sw, ok := w.(*statusWriter); ok {
		sw.note += fmt.Sprintf(format, args...)
	}
}

// output releases generated text, holding back what might be the start of
// a stop string and ending at the first stop string (which is not
// released).
type output struct {
	stops   []string
	pending string          // generated, not yet released
	text    strings.Builder // released
	stopped bool            // a stop string was found
	send    func(string) error
	err     error // of send
}

// add takes the next generated text and reports whether to go on.
func (o *output) add(s string) bool {
	if o.stopped || o.err != nil {
		return false
	}
	o.pending += s
	if i := firstStop(o.pending, o.stops); i >= 0 {
		o.release(o.pending[:i])
		o.pending = ""
		o.stopped = true
		return false
	}
	keep := partialStop(o.pending, o.stops)
	o.release(o.pending[:len(o.pending)-keep])
	o.pending = o.pending[len(o.pending)-keep:]
	return o.err == nil
}

// finish takes the last text of a generation that ended and releases
// what was held back.
func (o *output) finish(s string) {
	if o.add(s) {
		o.release(o.pending)
		o.pending = ""
	}
}

func (o *output) release(s string) {
	if s == "" || o.err != nil {
		return
	}
	o.text.WriteString(s)
	if o.send != nil {
		o.err = o.send(s)
	}
}

// firstStop returns where the first stop string in s begins, or -1.
func firstStop(s string, stops []string) int {
	first := -1
	for _, st := range stops {
		if i := strings.Index(s, st); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	return first
}

// partialStop returns the length of the longest end of s that is the
// beginning of a stop string (shorter than it: firstStop found none whole).
func partialStop(s string, stops []string) int {
	keep := 0
	for _, st := range stops {
		for i := max(len(s)-len(st)+1, 0); i < len(s) && len(s)-i > keep; i++ {
			if s[i] == st[0] && strings.HasPrefix(st, s[i:]) {
				keep = len(s) - i
				break
			}
		}
	}
	return keep
}

// events writes server-sent events, each with its own write deadline, so
// that a stream may last as long as it generates while a client that stops
// reading is dropped.
type events struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	started bool
	err     error
}

func (e *events) start() {
	h := e.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	e.w.WriteHeader(http.StatusOK)
	e.started = true
}

func (e *events) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("server: encode event: %v", err)) // only this package's values: a bug
	}
	return e.write(append(append([]byte("data: "), b...), '\n', '\n'))
}

func (e *events) write(p []byte) error {
	if e.err != nil {
		return e.err
	}
	// Not every writer has deadlines (httptest's recorder has none).
	if err := e.rc.SetWriteDeadline(time.Now().Add(e.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		e.err = err
		return err
	}
	if _, err := e.w.Write(p); err != nil {
		e.err = err
		return err
	}
	if err := e.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		e.err = err
	}
	return e.err
}

// fail ends a started stream with an error event.
func (e *events) fail(err *apiError) {
	note(e.w, " error: %s", err.msg)
	e.send(err.body())
}

// answer builds the JSON of one request's responses.
type answer struct {
	id      string
	created int64
	model   string
	chat    bool
}

type responseJSON struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []choiceJSON `json:"choices"`
	Usage   *usage       `json:"usage,omitempty"`
}

type choiceJSON struct {
	Index        int          `json:"index"`
	Message      *messageJSON `json:"message,omitempty"`
	Delta        *messageJSON `json:"delta,omitempty"`
	Text         *string      `json:"text,omitempty"`
	Logprobs     *struct{}    `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
}

type messageJSON struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func (a *answer) head(object string) responseJSON {
	return responseJSON{ID: a.id, Object: object, Created: a.created, Model: a.model}
}

// chunk is a stream event with text, or with the finish reason when it
// is not "".
func (a *answer) chunk(text, reason string) responseJSON {
	c := choiceJSON{}
	if reason != "" {
		c.FinishReason = &reason
	}
	if !a.chat {
		c.Text = &text
		r := a.head("text_completion")
		r.Choices = []choiceJSON{c}
		return r
	}
	c.Delta = &messageJSON{}
	if text != "" {
		c.Delta.Content = &text
	}
	r := a.head("chat.completion.chunk")
	r.Choices = []choiceJSON{c}
	return r
}

// roleChunk is a chat stream's first event, as OpenAI sends it.
func (a *answer) roleChunk() responseJSON {
	empty := ""
	r := a.head("chat.completion.chunk")
	r.Choices = []choiceJSON{{Delta: &messageJSON{Role: "assistant", Content: &empty}}}
	return r
}

func (a *answer) usageChunk(u usage) responseJSON {
	object := "text_completion"
	if a.chat {
		object = "chat.completion.chunk"
	}
	r := a.head(object)
	r.Choices = []choiceJSON{}
	r.Usage = &u
	return r
}

func (a *answer) whole(text, reason string, u usage) responseJSON {
	c := choiceJSON{FinishReason: &reason}
	object := "text_completion"
	if a.chat {
		object = "chat.completion"
		c.Message = &messageJSON{Role: "assistant", Content: &text}
	} else {
		c.Text = &text
	}
	r := a.head(object)
	r.Choices = []choiceJSON{c}
	r.Usage = &u
	return r
}

// newID returns a response id: "chatcmpl-" or "cmpl-" and 24 random
// letters and digits, as OpenAI's look.
func newID(isChat bool) string {
	prefix := "cmpl-"
	if isChat {
		prefix = "chatcmpl-"
	}
	return prefix + rand.Text()[:24]
}
