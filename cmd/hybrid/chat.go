package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"golang.org/x/term"

	"hybrid/models/chat"
	"hybrid/models/tokenizer"
	"hybrid/runtime"
)

// chatCmd is an interactive chat: each line read from standard input is a
// user message, sent with the conversation so far through the model's chat
// template; the answer streams to standard output as it is generated and
// joins the conversation. Notices (help, dropped turns, errors that do not
// end the chat, --verbose statistics) go to standard error.
//
// Keys and commands: /reset forgets the conversation (the --system message
// stays), /exit, /quit and end of input (Ctrl-D) quit with exit code 0,
// /help or any other /command prints the commands, and a line starting with
// // sends the rest of it from its second slash. Ctrl-C while an answer
// streams stops that answer, which stays in the conversation as far as it
// was printed (what is on the screen is what the model said); Ctrl-C while
// waiting for a line asks for a second Ctrl-C, which quits (exit code 0), so
// that a Ctrl-C meant for an answer that ended just before cannot end the
// whole chat.
func chatCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("chat", stderr)
	model := fs.String("model", "", "GGUF model `file` (default: the built-in stories260K)")
	system := fs.String("system", "", "system message `text` that opens the conversation")
	n := fs.Int("n", 512, "tokens per answer at most; 0 runs to the end of the model's turn or of the context")
	sf := addSamplerFlags(fs)
	threads := fs.Int("threads", 0, "CPU threads; 0 uses every core")
	ctx := fs.Int("ctx", 0, "context size in tokens; 0 uses the model's, at most 4096; more than the model's needs --ctx-override")
	override := fs.Bool("ctx-override", false, ctxOverrideUsage)
	policy := fs.String("policy", "auto", "placement policy: a name in configs/policies (auto, cpu-only, cpu-split, mac-hybrid, ...) or a YAML `file`")
	profile := fs.String("profile", "", "measured cost profile `file` from `hybrid profile`")
	cpus := fs.Int("cpus", 0, "separate CPU devices (cpu, cpu:1, ...), each with its own buffers and threads")
	verbose := fs.Bool("verbose", false, "after each answer, print its prompt and answer tokens, why it ended and its speed on standard error")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *n < 0 {
		return badFlag(fs, "-n %d: want 0 or more tokens", *n)
	}
	if err := checkDeviceFlags(fs, *threads, *cpus); err != nil {
		return err
	}
	if err := checkContextFlag(fs, *ctx); err != nil {
		return err
	}
	sc, err := sf.config(fs)
	if err != nil {
		return err
	}

	m, c, err := loadModel(fs, stderr, *model, *ctx, *override)
	if err != nil {
		return err
	}
	defer m.Close()
	tmpl, isDefault, err := chat.FromGGUF(m.File)
	if err != nil {
		return err
	}
	sess, err := runtime.NewSession(m, runtime.SessionOptions{Policy: *policy, Profile: *profile,
		Threads: *threads, CPUs: *cpus, Context: c, ContextOverride: *override})
	if err != nil {
		return err
	}
	defer sess.Close()
	eng, err := runtime.NewEngine(sess.Exec, runtime.EngineOptions{Slots: 1})
	if err != nil {
		return err
	}
	defer eng.Close(context.Background())

	interactive := isTerminal(stdin)
	if isDefault {
		fmt.Fprintf(stderr, "hybrid chat: %s has no chat template; using ChatML\n", m.Path)
	}
	if interactive {
		fmt.Fprintf(stderr, "hybrid chat: %s on %s, a context of %d tokens. /reset forgets the conversation, /exit or Ctrl-D quits, Ctrl-C stops an answer.\n",
			m.Path, sess.Exec.DeviceList(), c)
	}

	sigs, release := takeInterrupt()
	defer release()
	quit := make(chan struct{})
	defer close(quit)
	ch := &chatter{
		conv: &conversation{tmpl: tmpl, tok: m.Tokenizer, system: *system,
			context: c, room: answerRoom(*n, c)},
		eng: eng, tok: m.Tokenizer, sampler: sc, maxTokens: *n,
		stdout: stdout, stderr: stderr, interactive: interactive, verbose: *verbose,
	}
	return ch.run(readLines(stdin, quit), sigs)
}

// samplerFlags are the sampling flags chat shares with run's.
type samplerFlags struct {
	temp, topP, repeatPenalty *float64
	topK                      *int
	seed                      *int64
}

func addSamplerFlags(fs *flag.FlagSet) *samplerFlags {
	def := runtime.DefaultSampler()
	return &samplerFlags{
		temp:          fs.Float64("temp", float64(def.Temp), "sampling temperature; 0 is greedy"),
		topK:          fs.Int("top-k", def.TopK, "keep the k most likely tokens; 0 keeps all"),
		topP:          fs.Float64("top-p", float64(def.TopP), "keep the smallest set of tokens whose probability reaches p"),
		repeatPenalty: fs.Float64("repeat-penalty", float64(def.RepeatPenalty), "penalty for repeating the last 64 tokens; 1 is off"),
		seed:          fs.Int64("seed", -1, "sampling seed (answer i of the session uses seed+i); -1 picks one from the clock"),
	}
}

// config is the sampler the parsed flags give; a value out of range is a
// usage error naming it.
func (f *samplerFlags) config(fs *flag.FlagSet) (runtime.SamplerConfig, error) {
	sc := runtime.SamplerConfig{
		Temp: float32(*f.temp), TopK: *f.topK, TopP: float32(*f.topP),
		RepeatPenalty: float32(*f.repeatPenalty), RepeatLastN: runtime.DefaultSampler().RepeatLastN, Seed: uint64(*f.seed),
	}
	if *f.seed < 0 {
		sc.Seed = uint64(time.Now().UnixNano())
	}
	if err := sc.Validate(); err != nil {
		return sc, badFlag(fs, "%v", err)
	}
	return sc, nil
}

// answerRoom is how many tokens of the context a prompt leaves for the
// answer: -n, but at most half the context so that a long -n still leaves
// the conversation some, and half when -n is 0 (no limit).
func answerRoom(n, context int) int {
	half := max(context/2, 1)
	if n == 0 || n > half {
		return half
	}
	return n
}

// isTerminal reports whether r is a terminal, where a prompt is shown.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// takeInterrupt makes SIGINT come to the returned channel instead of ending
// the process, until release. signal.Ignore takes SIGINT away from every
// channel that had it (exitOnInterrupt's among them; SIGTERM stays with
// it) with no moment of the default action, and Notify then gives it to
// this channel alone. After release SIGINT has its default action again,
// not exitOnInterrupt's: chat returns to exit right after.
func takeInterrupt() (<-chan os.Signal, func()) {
	c := make(chan os.Signal, 1)
	signal.Ignore(os.Interrupt)
	signal.Notify(c, os.Interrupt)
	return c, func() { signal.Stop(c) }
}

// chatter runs the loop of a chat: read a line, answer it.
type chatter struct {
	conv           *conversation
	eng            *runtime.Engine
	tok            *tokenizer.Tokenizer
	sampler        runtime.SamplerConfig
	maxTokens      int
	stdout, stderr io.Writer
	interactive    bool // standard input is a terminal: show a prompt
	verbose        bool
	answers        int // answers begun, for their seeds
}

const chatHelp = `commands:
  /reset   forget the conversation (the --system message stays)
  /exit    quit (so do /quit, Ctrl-D, and Ctrl-C twice at the prompt)
  /help    this list
Ctrl-C stops an answer. Start a line with // to send a message that begins with /.`

// run answers the lines until /exit, end of input or a second Ctrl-C at the
// prompt. Only a failed read of the input or a failed step of the model
// end it with an error.
func (c *chatter) run(lines <-chan inputLine, sigs <-chan os.Signal) error {
	armed := false // Ctrl-C was pressed at the prompt: another quits
	for {
		if c.interactive {
			fmt.Fprint(c.stdout, "> ")
		}
		var l inputLine
		select {
		case <-sigs:
			if armed {
				fmt.Fprintln(c.stdout)
				return nil
			}
			armed = true
			fmt.Fprintln(c.stderr, "\n(press Ctrl-C again to quit, or type /exit)")
			continue
		case l = <-lines:
		}
		switch {
		case errors.Is(l.err, io.EOF):
			if c.interactive {
				fmt.Fprintln(c.stdout)
			}
			return nil
		case errors.Is(l.err, errLineTooLong):
			fmt.Fprintf(c.stderr, "hybrid chat: %v; not sent\n", l.err)
			continue
		case l.err != nil:
			return fmt.Errorf("reading standard input: %w", l.err)
		}
		armed = false
		text := strings.TrimSpace(strings.ToValidUTF8(l.text, "\uFFFD"))
		switch {
		case text == "":
			continue
		case strings.HasPrefix(text, "//"):
			text = text[1:]
		case strings.HasPrefix(text, "/"):
			switch cmd := strings.Fields(text)[0]; cmd {
			case "/exit", "/quit":
				return nil
			case "/reset":
				c.conv.reset()
				fmt.Fprintln(c.stderr, "(the conversation is forgotten)")
			case "/help":
				fmt.Fprintln(c.stderr, chatHelp)
			default:
				fmt.Fprintf(c.stderr, "unknown command %s\n%s\n", cmd, chatHelp)
			}
			continue
		}
		if err := c.answer(text, sigs); err != nil {
			return err
		}
	}
}

// answer streams the answer to the user's message text and adds both to the
// conversation. A message that does not fit or that the template refuses is
// reported and dropped; the error is a failed step of the model.
func (c *chatter) answer(text string, sigs <-chan os.Signal) error {
	ids, drop, err := c.conv.fit(text)
	if err != nil {
		fmt.Fprintf(c.stderr, "hybrid chat: %v\n", err)
		return nil
	}
	if drop > 0 {
		fmt.Fprintf(c.stderr, "(the conversation outgrew the context of %d tokens with room for a %d-token answer: forgot its oldest %d exchange(s))\n",
			c.conv.context, c.conv.room, drop)
	}
	sc := c.sampler
	sc.Seed += uint64(c.answers)
	c.answers++

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := c.tok.NewStream(false)
	var out strings.Builder
	type result struct {
		fin runtime.Finish
		err error
	}
	done := make(chan result, 1)
	go func() {
		fin, err := c.eng.Generate(ctx, runtime.Request{Prompt: ids, MaxTokens: c.maxTokens, Sampler: sc}, func(id int32) bool {
			// The engine may have tokens in hand past a cancel: print none.
			if ctx.Err() != nil {
				return false
			}
			s := st.Add(id)
			out.WriteString(s)
			io.WriteString(c.stdout, s)
			return true
		})
		done <- result{fin, err}
	}()
	var r result
wait:
	for {
		select {
		case r = <-done:
			break wait
		case <-sigs:
			cancel()
		}
	}
	tail := st.Flush()
	out.WriteString(tail)
	fmt.Fprintln(c.stdout, tail)
	if r.err != nil {
		return r.err
	}
	c.conv.add(drop, text, out.String())
	if r.fin.Reason == runtime.FinishContext {
		fmt.Fprintf(c.stderr, "(the answer reached the end of the context of %d tokens)\n", c.conv.context)
	}
	if c.verbose {
		f := r.fin
		fmt.Fprintf(c.stderr, "[prompt %d tokens, answer %d tokens (%s); prefill %.1f tok/s, decode %.1f tok/s]\n",
			f.PromptTokens, f.Tokens, f.Reason, rate(f.PromptTokens, f.PrefillMs), rate(f.Tokens, f.DecodeMs))
	}
	return nil
}

func rate(tokens int, ms float64) float64 {
	if ms <= 0 {
		return 0
	}
	return float64(tokens) / ms * 1000
}

// conversation is the history of a chat and how it is made into a prompt
// that fits the context.
type conversation struct {
	tmpl   *chat.Template
	tok    *tokenizer.Tokenizer
	system string         // "" for none
	turns  []chat.Message // user and assistant, alternating
	// context is the sequence's positions; room is how many of them a
	// prompt leaves for the answer.
	context, room int
}

// messages is the conversation without its oldest drop exchanges, with the
// new user message text last.
func (c *conversation) messages(drop int, text string) []chat.Message {
	msgs := make([]chat.Message, 0, len(c.turns)+2)
	if c.system != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: c.system})
	}
	msgs = append(msgs, c.turns[2*drop:]...)
	return append(msgs, chat.Message{Role: "user", Content: text})
}

func (c *conversation) render(drop int, text string) ([]int32, error) {
	ids, _, err := chat.Prompt(c.tmpl, c.tok, c.messages(drop, text), chat.Options{AddGenerationPrompt: true})
	return ids, err
}

// fit returns the tokens of the conversation followed by the user's message
// text, without the fewest oldest exchanges (a user message and its answer)
// that leaves room for an answer, and that number, which add then drops for
// good. The system message is always kept. A message that does not fit
// even alone is a *tooLongError, and the conversation is left as it was.
func (c *conversation) fit(text string) (ids []int32, drop int, err error) {
	ids, err = c.render(0, text)
	if err != nil || c.fits(ids) {
		return ids, 0, err
	}
	// Fewer messages never render to more tokens, so the fewest exchanges
	// to drop are found by bisection: lo does not fit, hi does.
	lo, hi := 0, len(c.turns)/2
	best, err := c.render(hi, text)
	if err != nil {
		return nil, 0, err
	}
	if !c.fits(best) {
		return nil, 0, &tooLongError{tokens: len(best), room: c.room, context: c.context, system: c.system != ""}
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		ids, err := c.render(mid, text)
		if err != nil {
			return nil, 0, err
		}
		if c.fits(ids) {
			hi, best = mid, ids
		} else {
			lo = mid
		}
	}
	return best, hi, nil
}

func (c *conversation) fits(ids []int32) bool { return len(ids)+c.room <= c.context }

// add drops the oldest drop exchanges and appends the user's message and
// the answer.
func (c *conversation) add(drop int, user, answer string) {
	c.turns = append(c.turns[:0], c.turns[2*drop:]...)
	c.turns = append(c.turns, chat.Message{Role: "user", Content: user}, chat.Message{Role: "assistant", Content: answer})
}

// reset forgets every exchange; the system message stays.
func (c *conversation) reset() { c.turns = c.turns[:0] }

// tooLongError is a user message that leaves no room for an answer even
// with no history before it.
type tooLongError struct {
	tokens, room, context int
	system                bool
}

func (e *tooLongError) Error() string {
	with := "the message is"
	if e.system {
		with = "with the system message, the message is"
	}
	return fmt.Sprintf("%s %d tokens, which with room for a %d-token answer do not fit the context of %d tokens; not sent (send a shorter one, or give a larger --ctx or a smaller -n)",
		with, e.tokens, e.room, e.context)
}

// inputLine is a line of input without its end, or the error that ended
// the input (io.EOF at its end) or that line (errLineTooLong).
type inputLine struct {
	text string
	err  error
}

// errLineTooLong is a line of more than maxPromptBytes, whose bytes are
// skipped up to its end.
var errLineTooLong = fmt.Errorf("a line of more than %d bytes (16 MiB)", maxPromptBytes)

// readLines reads r line by line on its own goroutine, so that a chat can
// wait for a line and for Ctrl-C at once. The channel ends with an io.EOF
// or another read error; the goroutine also ends when quit is closed (if a
// read is not blocking it).
func readLines(r io.Reader, quit <-chan struct{}) <-chan inputLine {
	out := make(chan inputLine)
	go func() {
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			text, err := readLine(br, maxPromptBytes)
			select {
			case out <- inputLine{text, err}:
			case <-quit:
				return
			}
			if err != nil && !errors.Is(err, errLineTooLong) {
				return
			}
		}
	}()
	return out
}

// readLine reads one line of at most max bytes and returns it without its
// "\n" or "\r\n". A last line without an end is returned whole, and the
// next call returns io.EOF.
func readLine(br *bufio.Reader, max int) (string, error) {
	var b []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(b)+len(frag) > max {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			return "", errLineTooLong
		}
		b = append(b, frag...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(b) > 0:
			return string(b), nil
		case err != nil:
			return "", err
		}
		b = b[:len(b)-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
		return string(b), nil
	}
}
