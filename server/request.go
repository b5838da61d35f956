package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"unicode/utf8"

	"hybrid/models/chat"
	"hybrid/runtime"
)

// params are the fields chat and completions requests share.
type params struct {
	Model               *string         `json:"model"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *int            `json:"top_k"`
	Seed                *int64          `json:"seed"`
	Stop                json.RawMessage `json:"stop"`
	RepeatPenalty       *float64        `json:"repeat_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	N                   *int            `json:"n"`
	Logprobs            json.RawMessage `json:"logprobs"`
	Tools               json.RawMessage `json:"tools"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatRequest struct {
	params
	Messages           []chatMessage  `json:"messages"`
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs"`
	TopLogprobs        *int           `json:"top_logprobs"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type completionRequest struct {
	params
	Prompt json.RawMessage `json:"prompt"`
	Echo   bool            `json:"echo"`
	Suffix *string         `json:"suffix"`
	BestOf *int            `json:"best_of"`
}

// job is a validated request: what to generate and how to answer.
type job struct {
	maxTokens    int // 0: to the end of the context
	sampler      runtime.SamplerConfig
	stops        []string
	stream       bool
	includeUsage bool
}

// badField is a 400 naming the field.
func badField(field, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, param: field, msg: field + ": " + fmt.Sprintf(format, args...)}
}

// decode reads the body, at most the server's limit, into v.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) *apiError {
	tooLarge := &apiError{status: http.StatusRequestEntityTooLarge, code: "request_too_large",
		msg: fmt.Sprintf("the request body is larger than the limit of %d bytes", s.opts.MaxBody)}
	if r.ContentLength > s.opts.MaxBody {
		return tooLarge
	}
	// Reading to the end (not only to the end of the JSON value) lets the
	// HTTP server watch the connection, and cancel the request's context
	// when the client goes away.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBody))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return tooLarge
	case err != nil:
		return &apiError{status: http.StatusBadRequest, msg: "reading the request body: " + err.Error()}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return &apiError{status: http.StatusBadRequest, msg: "the request body is empty: want a JSON object"}
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te) && te.Field == "":
			return &apiError{status: http.StatusBadRequest, msg: "the request body must be a JSON object, not " + te.Value}
		case errors.As(err, &te):
			// Fields of the embedded params come as "params.name".
			return badField(strings.TrimPrefix(te.Field, "params."), "want a %s, not a JSON %s", jsonKind(te.Type.Kind().String()), te.Value)
		case errors.As(err, &se):
			return &apiError{status: http.StatusBadRequest, msg: fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, err)}
		default:
			return &apiError{status: http.StatusBadRequest, msg: "malformed JSON: " + err.Error()}
		}
	}
	return nil
}

// jsonKind names a Go kind as the JSON it decodes from.
func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"), strings.HasPrefix(k, "float"):
		return "number"
	case k == "slice", k == "array":
		return "array"
	case k == "map", k == "struct":
		return "object"
	case k == "bool":
		return "boolean"
	}
	return k
}

// check validates the shared fields and returns the job they describe.
func (s *Server) check(p *params) (*job, *apiError) {
	if p.Model != nil && *p.Model != "" && *p.Model != s.id {
		return nil, s.unknownModel(*p.Model)
	}
	j := &job{stream: p.Stream, sampler: runtime.DefaultSampler()}
	if p.Stream && p.StreamOptions != nil {
		j.includeUsage = p.StreamOptions.IncludeUsage
	}
	if p.N != nil && *p.N != 1 {
		return nil, badField("n", "%d choices: only 1 is supported", *p.N)
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{{"frequency_penalty", p.FrequencyPenalty}, {"presence_penalty", p.PresencePenalty}} {
		if f.v != nil && *f.v != 0 {
			return nil, badField(f.name, "%g: only 0 is supported (use repeat_penalty)", *f.v)
		}
	}
	if isSet(p.Logprobs) && string(p.Logprobs) != "false" && string(p.Logprobs) != "0" {
		return nil, badField("logprobs", "log probabilities are not supported")
	}
	if isSet(p.Tools) && string(bytes.TrimSpace(p.Tools)) != "[]" {
		return nil, badField("tools", "tool calls are not supported")
	}
	switch {
	case p.MaxCompletionTokens != nil:
		if *p.MaxCompletionTokens < 1 {
			return nil, badField("max_completion_tokens", "%d: want 1 or more", *p.MaxCompletionTokens)
		}
		j.maxTokens = *p.MaxCompletionTokens
	case p.MaxTokens != nil:
		if *p.MaxTokens < 1 {
			return nil, badField("max_tokens", "%d: want 1 or more", *p.MaxTokens)
		}
		j.maxTokens = *p.MaxTokens
	}
	if v := p.Temperature; v != nil {
		if !(*v >= 0 && *v <= 2) {
			return nil, badField("temperature", "%g: want 0 (greedy) to 2", *v)
		}
		j.sampler.Temp = float32(*v)
	}
	if v := p.TopP; v != nil {
		if !(*v > 0 && *v <= 1) {
			return nil, badField("top_p", "%g: want more than 0, at most 1", *v)
		}
		j.sampler.TopP = float32(*v)
	}
	if v := p.TopK; v != nil {
		if *v < 0 {
			return nil, badField("top_k", "%d: want 0 (all tokens) or more", *v)
		}
		j.sampler.TopK = *v
	}
	if v := p.RepeatPenalty; v != nil {
		if !(*v > 0 && *v <= 100) {
			return nil, badField("repeat_penalty", "%g: want more than 0, at most 100 (1 is off)", *v)
		}
		j.sampler.RepeatPenalty = float32(*v)
	}
	if p.Seed != nil && *p.Seed >= 0 {
		j.sampler.Seed = uint64(*p.Seed)
	} else {
		j.sampler.Seed = rand.Uint64()
	}
	stops, err := parseStops(p.Stop)
	if err != nil {
		return nil, err
	}
	j.stops = stops
	return j, nil
}

// isSet reports whether a raw field was given with a value other than null.
func isSet(raw json.RawMessage) bool {
	s := string(bytes.TrimSpace(raw))
	return s != "" && s != "null"
}

// parseStops reads stop: null, a string, or an array of up to MaxStops
// strings, none empty.
func parseStops(raw json.RawMessage) ([]string, *apiError) {
	if !isSet(raw) {
		return nil, nil
	}
	var one string
	var list []string
	if err := json.Unmarshal(raw, &one); err == nil {
		list = []string{one}
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, badField("stop", "want a string or an array of strings")
	}
	if len(list) > MaxStops {
		return nil, badField("stop", "%d stop strings: at most %d", len(list), MaxStops)
	}
	for i, s := range list {
		switch {
		case s == "":
			return nil, badField("stop", "stop string %d is empty", i)
		case len(s) > MaxStopBytes:
			return nil, badField("stop", "stop string %d is %d bytes: at most %d", i, len(s), MaxStopBytes)
		case !utf8.ValidString(s):
			return nil, badField("stop", "stop string %d is not valid UTF-8", i)
		}
	}
	return list, nil
}

// messages reads the conversation: each content a string, null, or an
// array of text parts (joined with newlines).
func (r *chatRequest) messages() ([]chat.Message, *apiError) {
	if len(r.Messages) == 0 {
		return nil, badField("messages", "want at least one message")
	}
	out := make([]chat.Message, len(r.Messages))
	for i, m := range r.Messages {
		field := fmt.Sprintf("messages[%d]", i)
		if m.Role == "" {
			return nil, badField(field+".role", "missing")
		}
		out[i].Role = m.Role
		if !isSet(m.Content) {
			continue
		}
		if err := json.Unmarshal(m.Content, &out[i].Content); err == nil {
			continue
		}
		var parts []struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(m.Content, &parts); err != nil {
			return nil, badField(field+".content", "want a string or an array of content parts")
		}
		texts := make([]string, len(parts))
		for k, p := range parts {
			if p.Type != "text" || p.Text == nil {
				return nil, badField(fmt.Sprintf("%s.content[%d]", field, k), "part of type %q: only text parts (with text) are supported", p.Type)
			}
			texts[k] = *p.Text
		}
		out[i].Content = strings.Join(texts, "\n")
	}
	return out, nil
}

// prompt reads a completion's prompt: a string or an array of one string.
func (r *completionRequest) prompt() (string, *apiError) {
	if !isSet(r.Prompt) {
		return "", badField("prompt", "missing")
	}
	var s string
	if err := json.Unmarshal(r.Prompt, &s); err == nil {
		return s, nil
	}
	var list []string
	if err := json.Unmarshal(r.Prompt, &list); err != nil || len(list) != 1 {
		return "", badField("prompt", "want a string or an array of one string")
	}
	return list[0], nil
}

// checkCompletion refuses the completions fields that change the answer
// and are not supported.
func (r *completionRequest) check() *apiError {
	switch {
	case r.Echo:
		return badField("echo", "echoing the prompt is not supported")
	case r.Suffix != nil && *r.Suffix != "":
		return badField("suffix", "a suffix (insertion) is not supported")
	case r.BestOf != nil && *r.BestOf != 1:
		return badField("best_of", "%d: only 1 is supported", *r.BestOf)
	}
	return nil
}
