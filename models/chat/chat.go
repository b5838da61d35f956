// Package chat renders a model's chat template: the Jinja template stored in
// GGUF metadata under tokenizer.chat_template (Hugging Face's
// tokenizer_config.json "chat_template"), which turns a conversation into the
// prompt text the model was trained on.
//
// Templates run on github.com/nikolalohinski/gonja/v2, a Go implementation of
// Jinja2, configured as Hugging Face transformers configures Jinja2 for chat
// templates (trim_blocks and lstrip_blocks on, loop controls on) and given
// the helpers transformers provides: raise_exception, strftime_now and a
// Python-style tojson. A few Python string methods that gonja gets wrong are
// replaced (see env.go).
//
// Untrusted templates (a GGUF file is input) are bounded where gonja lets us:
// the source size (MaxTemplateSize), bracket nesting (MaxNesting), the output
// size (MaxOutput), the time spent while writing output (RenderTimeout),
// range() lengths (MaxRange) and macro recursion (MaxMacroDepth); includes,
// imports and extends read nothing; a panic inside gonja becomes an error.
// See Template.Render for what is not bounded.
package chat

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// Limits on untrusted templates and on what they may produce.
const (
	// MaxTemplateSize is the largest template source Parse accepts, in bytes.
	MaxTemplateSize = 1 << 20
	// MaxNesting is the deepest nesting of ( [ { Parse accepts; gonja's
	// parser recurses on it.
	MaxNesting = 200
	// MaxOutput is the largest prompt Render produces, in bytes.
	MaxOutput = 64 << 20
	// RenderTimeout bounds a render's time, checked each time it writes output.
	RenderTimeout = 10 * time.Second
	// MaxRange is the longest list range() makes (Jinja2's sandbox uses the same).
	MaxRange = 100000
	// MaxMacroDepth bounds the recursion of one macro.
	MaxMacroDepth = 100
)

// Message is one turn of a conversation.
type Message struct {
	Role    string // "system", "user", "assistant", "tool", ...
	Content string
}

// Options are the variables a render sees beside messages.
type Options struct {
	// AddGenerationPrompt ends the prompt with the opening of an assistant
	// turn, for the model to complete.
	AddGenerationPrompt bool
	// BOSToken and EOSToken are the text of the model's BOS and EOS tokens
	// (templates print bos_token themselves).
	BOSToken, EOSToken string
	// Now is the clock strftime_now reads; nil is time.Now.
	Now func() time.Time
	// Extra holds further template variables, as transformers'
	// apply_chat_template passes its **kwargs: tools, documents,
	// enable_thinking, date_string, ... They override nothing above.
	Extra map[string]any
}

// Template is a parsed chat template. It is safe for concurrent use.
type Template struct {
	src  string
	tmpl *exec.Template

	probeOnce sync.Once
	system    bool // the template renders a system message (see SupportsSystemRole)
}

// RaiseError is the error of a template that called raise_exception(msg).
type RaiseError struct {
	Message string
}

func (e *RaiseError) Error() string { return "chat: template raised: " + e.Message }

// ErrTooLarge is wrapped by the error for a template or an output over a limit.
var ErrTooLarge = errors.New("over the size limit")

const rootName = "chat_template"

// Parse parses a Jinja chat template.
func Parse(src string) (t *Template, err error) {
	if len(src) > MaxTemplateSize {
		return nil, fmt.Errorf("chat: template of %d bytes: %w of %d bytes", len(src), ErrTooLarge, MaxTemplateSize)
	}
	if d := nesting(src); d > MaxNesting {
		return nil, fmt.Errorf("chat: template nests brackets %d deep, more than %d", d, MaxNesting)
	}
	defer func() {
		if p := recover(); p != nil {
			t, err = nil, fmt.Errorf("chat: parse template: internal error: %v", p)
		}
	}()
	tmpl, err := exec.NewTemplate(rootName, newConfig(), noFiles{src}, environment)
	if err != nil {
		// gonja's message quotes the whole source; keep only the parser's.
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		return nil, fmt.Errorf("chat: parse template: %w", err)
	}
	return &Template{src: src, tmpl: tmpl}, nil
}

// Source returns the template's source text.
func (t *Template) Source() string { return t.src }

// Render renders the conversation msgs.
//
// If the template cannot render a system message (SupportsSystemRole is
// false), a leading system message is merged into the next message as
// llama.cpp does: its content, "\n", then that message's content (or dropped
// when it is the only message).
//
// The error of a template that calls raise_exception is a *RaiseError with
// the template's message; any other failure names the failing line as gonja
// reports it. Render never panics. Not bounded: the time spent by loops that
// write nothing (nested for loops over long lists), memory of intermediate
// values (e.g. "x" * 10**9, or lists grown with a namespace), and the depth
// of self-referencing values passed to tojson.
func (t *Template) Render(msgs []Message, opts Options) (string, error) {
	if !t.SupportsSystemRole() && len(msgs) > 0 && msgs[0].Role == "system" {
		msgs = foldSystem(msgs)
	}
	return t.render(msgs, opts)
}

// SupportsSystemRole reports whether the template renders a leading system
// message's content, probed once by rendering one (the test llama.cpp makes:
// Gemma's templates, for one, raise an exception instead).
func (t *Template) SupportsSystemRole() bool {
	t.probeOnce.Do(func() {
		const probe = "<<chat system probe>>"
		out, err := t.render([]Message{{"system", probe}, {"user", "Hi"}}, Options{})
		t.system = err == nil && strings.Contains(out, probe)
	})
	return t.system
}

func foldSystem(msgs []Message) []Message {
	if len(msgs) == 1 {
		return nil
	}
	out := make([]Message, 0, len(msgs)-1)
	out = append(out, Message{Role: msgs[1].Role, Content: msgs[0].Content + "\n" + msgs[1].Content})
	return append(out, msgs[2:]...)
}

func (t *Template) render(msgs []Message, opts Options) (out string, err error) {
	st := &renderState{now: opts.Now}
	if st.now == nil {
		st.now = time.Now
	}
	vars := make(map[string]any, len(opts.Extra)+8)
	for k, v := range opts.Extra {
		vars[k] = v
	}
	list := make([]any, len(msgs))
	for i, m := range msgs {
		list[i] = map[string]any{"role": m.Role, "content": m.Content}
	}
	vars["messages"] = list
	vars["add_generation_prompt"] = opts.AddGenerationPrompt
	vars["bos_token"] = opts.BOSToken
	vars["eos_token"] = opts.EOSToken
	st.globals(vars)

	w := &limitWriter{max: MaxOutput, deadline: time.Now().Add(RenderTimeout)}
	defer func() {
		if p := recover(); p != nil {
			out, err = "", fmt.Errorf("chat: render template: internal error: %v", p)
		}
	}()
	err = t.tmpl.Execute(w, exec.NewContext(vars))
	switch {
	case st.raised != nil:
		return "", st.raised
	case w.err != nil:
		return "", w.err
	case err != nil:
		return "", fmt.Errorf("chat: render template: %w", shortError{err})
	}
	return w.b.String(), nil
}

// shortError cuts gonja's messages, which nest one level per call (a deep
// macro recursion makes kilobytes), to their start and their innermost end.
type shortError struct{ err error }

func (e shortError) Error() string {
	const keep = 400
	s := e.err.Error()
	if len(s) <= 2*keep {
		return s
	}
	return s[:keep] + " ... " + s[len(s)-keep:]
}

func (e shortError) Unwrap() error { return e.err }

// limitWriter collects the output, failing past max bytes or the deadline.
type limitWriter struct {
	b        strings.Builder
	max      int
	deadline time.Time
	err      error
}

func (w *limitWriter) Write(p []byte) (int, error) {
	switch {
	case w.err != nil:
	case w.b.Len()+len(p) > w.max:
		w.err = fmt.Errorf("chat: rendered prompt: %w of %d bytes", ErrTooLarge, w.max)
	case time.Now().After(w.deadline):
		w.err = fmt.Errorf("chat: render took more than %v", RenderTimeout)
	}
	if w.err != nil {
		return 0, w.err
	}
	return w.b.Write(p)
}

// noFiles is the loader of one template: include, import and extends fail.
type noFiles struct{ src string }

func (l noFiles) Read(name string) (io.Reader, error) {
	if name != rootName {
		return nil, fmt.Errorf("chat templates cannot read other templates (%q)", name)
	}
	return strings.NewReader(l.src), nil
}

func (l noFiles) Resolve(name string) (string, error) { return name, nil }

func (l noFiles) Inherit(string) (loaders.Loader, error) { return l, nil }

// nesting returns the deepest nesting of ( [ { in src.
func nesting(src string) int {
	depth, most := 0, 0
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '(', '[', '{':
			depth++
			most = max(most, depth)
		case ')', ']', '}':
			depth = max(depth-1, 0)
		}
	}
	return most
}
