//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"hybrid/models/chat"
	"hybrid/models/llama"
	"hybrid/runtime"
)

// The chat tests run the real command (this test binary running main, with
// its signal handling; see TestMain) with greedy sampling on the built-in
// model, and compare what it prints with answers computed here through an
// Engine of the same settings from the same conversations.

// chatArgs are the flags every chat under test gets: greedy, one thread on
// the CPU device alone, statistics after each answer.
var chatArgs = []string{"chat", "--temp", "0", "--policy", "cpu-only", "--threads", "1", "--verbose"}

// chatDeadline bounds each wait for the chat under test; the waits end as
// soon as what they wait for comes, so it is never slept through.
const chatDeadline = 20 * time.Second

// chatReference answers conversations as the chat under test should.
type chatReference struct {
	t    *testing.T
	m    *llama.Model
	tmpl *chat.Template
	eng  *runtime.Engine
}

func newReference(t *testing.T, positions int) *chatReference {
	t.Helper()
	m, err := runtime.LoadModel("", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	tmpl, _, err := chat.FromGGUF(m.File)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := runtime.NewSession(m, runtime.SessionOptions{Policy: "cpu-only", Threads: 1, Context: positions})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	eng, err := runtime.NewEngine(sess.Exec, runtime.EngineOptions{Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(context.Background()) })
	return &chatReference{t: t, m: m, tmpl: tmpl, eng: eng}
}

// prompt is the prompt of msgs with the opening of the answer.
func (r *chatReference) prompt(msgs ...chat.Message) []int32 {
	r.t.Helper()
	ids, _, err := chat.Prompt(r.tmpl, r.m.Tokenizer, msgs, chat.Options{AddGenerationPrompt: true})
	if err != nil {
		r.t.Fatal(err)
	}
	return ids
}

// answer is the greedy answer of at most n tokens to msgs, as text.
func (r *chatReference) answer(n int, msgs ...chat.Message) string {
	r.t.Helper()
	greedy := runtime.DefaultSampler()
	greedy.Temp = 0
	st := r.m.Tokenizer.NewStream(false)
	var sb strings.Builder
	_, err := r.eng.Generate(context.Background(), runtime.Request{Prompt: r.prompt(msgs...), MaxTokens: n, Sampler: greedy},
		func(id int32) bool { sb.WriteString(st.Add(id)); return true })
	if err != nil {
		r.t.Fatal(err)
	}
	return sb.String() + st.Flush()
}

func user(s string) chat.Message      { return chat.Message{Role: "user", Content: s} }
func assistant(s string) chat.Message { return chat.Message{Role: "assistant", Content: s} }

// stats is the --verbose line after an answer.
type stats struct {
	prompt, tokens int
	reason         string
}

var statsLine = regexp.MustCompile(`^\[prompt (\d+) tokens, answer (\d+) tokens \((\w+)\);`)

func parseStats(line string) (stats, bool) {
	m := statsLine.FindStringSubmatch(line)
	if m == nil {
		return stats{}, false
	}
	p, _ := strconv.Atoi(m[1])
	n, _ := strconv.Atoi(m[2])
	return stats{p, n, m[3]}, true
}

// ptyChat is a chat under test whose standard input and output are a
// pseudo-terminal, as when a person runs it, and whose standard error is a
// pipe read line by line.
type ptyChat struct {
	t      *testing.T
	master *os.File
	cmd    *exec.Cmd
	exited chan error

	mu     sync.Mutex
	out    []byte        // everything read from the terminal
	more   chan struct{} // signalled when out grows
	cursor int           // where the next expectation starts
	errs   chan string   // standard error, a line at a time
	notes  []string      // standard error lines other than statistics
}

func startPTYChat(t *testing.T, args ...string) *ptyChat {
	t.Helper()
	master, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	// Without noflsh the terminal drops the output not yet read when it
	// turns Ctrl-C into SIGINT, and the test would not see all that the
	// chat printed before it stopped.
	stty := exec.Command("stty", "noflsh")
	stty.Stdin = tty
	if out, err := stty.CombinedOutput(); err != nil {
		t.Fatalf("stty noflsh: %v: %s", err, out)
	}
	er, ew, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], append(append([]string(nil), chatArgs...), args...)...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, ew
	// Its own session with the terminal as its controlling terminal, so
	// that Ctrl-C typed there signals it (and only it).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ew.Close()
	c := &ptyChat{t: t, master: master, cmd: cmd, exited: make(chan error, 1), more: make(chan struct{}, 1), errs: make(chan string, 64)}
	go func() { c.exited <- cmd.Wait() }()
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			c.mu.Lock()
			c.out = append(c.out, b[:n]...)
			c.mu.Unlock()
			select {
			case c.more <- struct{}{}:
			default:
			}
			if err != nil {
				return // EIO once the chat has exited and closed the terminal
			}
		}
	}()
	go func() {
		sc := bufio.NewScanner(er)
		for sc.Scan() {
			c.errs <- sc.Text()
		}
		close(c.errs)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-c.exited
		master.Close()
		er.Close()
	})
	return c
}

// send types s on the terminal.
func (c *ptyChat) send(s string) {
	c.t.Helper()
	if _, err := c.master.WriteString(s); err != nil {
		c.t.Fatal(err)
	}
}

// await waits until what the terminal showed since the cursor satisfies
// done, and returns it.
func (c *ptyChat) await(what string, done func(seen string) bool) string {
	c.t.Helper()
	deadline := time.After(chatDeadline)
	for {
		c.mu.Lock()
		seen := string(c.out[c.cursor:])
		c.mu.Unlock()
		if done(seen) {
			return seen
		}
		select {
		case <-c.more:
		case <-deadline:
			c.t.Fatalf("waited %v for %s; the terminal showed %q after %q", chatDeadline, what, seen, c.shown())
		}
	}
}

// shown is the terminal's output before the cursor, for failure messages.
func (c *ptyChat) shown() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.out[:c.cursor])
}

// expect checks that the terminal shows exactly want next, and moves the
// cursor past it.
func (c *ptyChat) expect(want string) {
	c.t.Helper()
	// Done once want is there or once what came cannot begin it.
	seen := c.await(fmt.Sprintf("%q", want), func(seen string) bool {
		return len(seen) >= len(want) || !strings.HasPrefix(want, seen)
	})
	if !strings.HasPrefix(seen, want) {
		c.t.Fatalf("the terminal showed %q, want %q (after %q)", seen, want, c.shown())
	}
	c.cursor += len(want)
}

// untilPrompt waits for the chat to show its prompt again after an answer
// and returns what it showed before, moving the cursor past the prompt.
//
// The terminal echoes a Ctrl-C typed during the answer as ^C, wherever in
// the output it is when the terminal takes it; the text returned is without
// it.
func (c *ptyChat) untilPrompt() string {
	c.t.Helper()
	noEcho := func(s string) string { return strings.Replace(s, "^C", "", 1) }
	seen := c.await("the prompt", func(seen string) bool { return strings.HasSuffix(noEcho(seen), "\r\n> ") })
	c.cursor += len(seen)
	return strings.TrimSuffix(noEcho(seen), "> ")
}

// stats returns the next --verbose line, keeping the other lines of
// standard error in notes.
func (c *ptyChat) stats() stats {
	c.t.Helper()
	deadline := time.After(chatDeadline)
	for {
		select {
		case line, ok := <-c.errs:
			if !ok {
				c.t.Fatalf("standard error ended with no statistics line; it had %q", c.notes)
			}
			if s, ok := parseStats(line); ok {
				return s
			}
			c.notes = append(c.notes, line)
		case <-deadline:
			c.t.Fatalf("no statistics line in %v; standard error had %q", chatDeadline, c.notes)
		}
	}
}

// note waits for a line of standard error that contains want.
func (c *ptyChat) note(want string) {
	c.t.Helper()
	deadline := time.After(chatDeadline)
	for {
		select {
		case line, ok := <-c.errs:
			if !ok {
				c.t.Fatalf("standard error ended with no line containing %q; it had %q", want, c.notes)
			}
			c.notes = append(c.notes, line)
			if strings.Contains(line, want) {
				return
			}
		case <-deadline:
			c.t.Fatalf("no line containing %q on standard error in %v; it had %q", want, chatDeadline, c.notes)
		}
	}
}

// exit waits for the chat to exit and checks its exit code is 0.
func (c *ptyChat) exit() {
	c.t.Helper()
	select {
	case err := <-c.exited:
		c.exited <- err // for the cleanup
		if err != nil {
			c.t.Fatalf("the chat ended with %v, want exit code 0; standard error had %q", err, c.notes)
		}
	case <-time.After(chatDeadline):
		c.t.Fatalf("the chat did not exit in %v; the terminal showed %q", chatDeadline, c.shown())
	}
}

// crlf is s as a terminal shows it: each "\n" written becomes "\r\n".
func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

// TestChatPTY drives a chat through a terminal: answers stream as the
// greedy answers to the conversation so far, the second turn's prompt holds
// the first exchange, /reset forgets it, an unknown command prints the
// help, and /exit quits with exit code 0.
func TestChatPTY(t *testing.T) {
	const n = 24
	ref := newReference(t, 2048) // the model's context: --ctx 0
	hi := ref.answer(n, user("Hi"))
	more := ref.answer(n, user("Hi"), assistant(hi), user("Tell me more"))
	if hi == more {
		t.Fatalf("the second turn's reference answer is the first's (%q): the test could not tell whether the chat kept the history", hi)
	}

	c := startPTYChat(t, "-n", strconv.Itoa(n))
	c.expect("> ")

	c.send("Hi\r")
	c.expect("Hi\r\n" + crlf(hi) + "\r\n> ")
	first := c.stats()
	if want := (stats{len(ref.prompt(user("Hi"))), n, runtime.FinishLength}); first != want {
		t.Fatalf("first answer: %+v, want %+v", first, want)
	}

	c.send("Tell me more\r")
	c.expect("Tell me more\r\n" + crlf(more) + "\r\n> ")
	second := c.stats()
	if want := len(ref.prompt(user("Hi"), assistant(hi), user("Tell me more"))); second.prompt != want || second.prompt <= first.prompt+n {
		t.Fatalf("second answer's prompt: %d tokens, want %d (more than the first's %d plus its answer's %d)", second.prompt, want, first.prompt, n)
	}

	c.send("/reset\r")
	c.expect("/reset\r\n> ")
	c.note("forgotten")
	c.send("Hi\r")
	c.expect("Hi\r\n" + crlf(hi) + "\r\n> ")
	if again := c.stats(); again != first {
		t.Fatalf("after /reset: %+v, want the first answer's %+v", again, first)
	}

	c.send("/bogus\r")
	c.expect("/bogus\r\n> ")
	c.note("unknown command /bogus")
	c.note("/reset")

	c.send("/exit\r")
	c.expect("/exit\r\n")
	c.exit()
}

// TestChatPTYInterrupt checks Ctrl-C: during an answer it stops that answer
// (what was printed stays in the conversation, as the next answer's prompt
// shows) and the chat goes on; at the prompt it asks for another, which
// quits with exit code 0.
func TestChatPTYInterrupt(t *testing.T) {
	// Answers that would run for seconds unless stopped.
	const n = 1500
	ref := newReference(t, 2048)
	c := startPTYChat(t, "-n", strconv.Itoa(n))
	c.expect("> ")

	// interrupt sends line, waits for some of the answer, types Ctrl-C,
	// and returns the part of the answer printed, which it checks is the
	// start of the greedy answer to msgs.
	interrupt := func(line string, msgs ...chat.Message) string {
		t.Helper()
		c.send(line + "\r")
		c.expect(line + "\r\n")
		c.await("the start of the answer", func(seen string) bool { return len(seen) >= 20 })
		c.send("\x03")
		s := c.stats()
		if s.reason != runtime.FinishCancelled || s.tokens == 0 || s.tokens >= n {
			t.Fatalf("after Ctrl-C the answer to %q ended %+v, want %s after some of its %d tokens", line, s, runtime.FinishCancelled, n)
		}
		if want := len(ref.prompt(msgs...)); s.prompt != want {
			t.Fatalf("the prompt of %q was %d tokens, want %d", line, s.prompt, want)
		}
		seen := c.untilPrompt()
		partial := ref.answer(s.tokens, msgs...)
		if want := crlf(partial) + "\r\n"; seen != want {
			t.Fatalf("the stopped answer to %q showed %q, want the %d tokens of the greedy answer %q", line, seen, s.tokens, want)
		}
		return partial
	}
	partial := interrupt("Hi", user("Hi"))
	interrupt("Tell me more", user("Hi"), assistant(partial), user("Tell me more"))

	c.send("\x03")
	c.note("press Ctrl-C again")
	c.await("the prompt", func(seen string) bool { return strings.HasSuffix(seen, "> ") })
	c.send("\x03")
	c.exit()
}

// TestChatPTYEndOfInput checks that Ctrl-D at the prompt quits with exit
// code 0, ending the line.
func TestChatPTYEndOfInput(t *testing.T) {
	c := startPTYChat(t)
	c.expect("> ")
	c.send("\x04")
	c.await("the line ended", func(seen string) bool { return strings.HasSuffix(seen, "\n") })
	c.exit()
}

// TestChatPipe runs a chat on a pipe of lines, without a terminal: no
// prompt is shown; the system message opens every prompt, /reset included;
// a conversation that outgrows the context forgets its oldest exchanges and
// says so; a message too long for the context is refused with the chat
// going on and the conversation as it was; // sends a line that begins
// with /; and the end of the input, after a last line with no end, quits
// with exit code 0.
func TestChatPipe(t *testing.T) {
	const (
		n      = 16
		ctx    = 256
		system = "You tell stories."
	)
	long := strings.Repeat("tell me a story about a big red dog ", 40)
	lines := []string{"Hi", "Tell me more", "And then?", "Where did they go?", long, "//reset is not a command",
		"Why?", "/reset", "Who was there?", "The end."}
	ref := newReference(t, ctx)

	// The conversation the chat should keep: each message with the fewest
	// oldest exchanges dropped that leaves n tokens for the answer, worked
	// out here by trying each number in turn.
	room := answerRoom(n, ctx)
	var want strings.Builder
	var hist []chat.Message // exchanges, without the system message
	var wantDrops, wantPrompts []int
	refused, kept := 0, false // kept: some exchanges stayed when older ones were dropped
	prompt := func(drop int, msg string) []chat.Message {
		msgs := []chat.Message{{Role: "system", Content: system}}
		msgs = append(msgs, hist[2*drop:]...)
		return append(msgs, user(msg))
	}
	for _, line := range lines {
		if line == "/reset" {
			hist = nil
			continue
		}
		msg := line
		if strings.HasPrefix(line, "//") {
			msg = line[1:]
		}
		drop := 0
		for ; 2*drop <= len(hist); drop++ {
			if len(ref.prompt(prompt(drop, msg)...))+room <= ctx {
				break
			}
		}
		if 2*drop > len(hist) {
			refused++
			continue
		}
		if drop > 0 {
			wantDrops = append(wantDrops, drop)
			kept = kept || 2*drop < len(hist)
		}
		a := ref.answer(n, prompt(drop, msg)...)
		wantPrompts = append(wantPrompts, len(ref.prompt(prompt(drop, msg)...)))
		hist = append(hist[2*drop:], user(msg), assistant(a))
		want.WriteString(a + "\n")
	}
	if refused != 1 || !kept {
		t.Fatalf("the test's conversation refuses %d messages and drops exchanges %v times, keeping some: %v; want 1 refused, and some dropped with some kept", refused, wantDrops, kept)
	}

	cmd := exec.Command(os.Args[0], append(append([]string(nil), chatArgs...), "-n", strconv.Itoa(n), "--ctx", strconv.Itoa(ctx), "--system", system)...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n")) // the last line without its end
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("chat: %v; standard error:\n%s", err, stderr.Bytes())
		}
	case <-time.After(chatDeadline):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the chat did not end in %v; standard error:\n%s", chatDeadline, stderr.Bytes())
	}
	if stdout.String() != want.String() {
		t.Errorf("standard output:\n%q\nwant\n%q", stdout.String(), want.String())
	}
	var drops, prompts []int
	tooLong := 0
	for _, line := range strings.Split(stderr.String(), "\n") {
		if s, ok := parseStats(line); ok {
			prompts = append(prompts, s.prompt)
		}
		if i := strings.Index(line, "forgot its oldest "); i >= 0 {
			d, _ := strconv.Atoi(strings.Fields(line[i+len("forgot its oldest "):])[0])
			drops = append(drops, d)
		}
		if strings.Contains(line, "with the system message, the message is") {
			tooLong++
		}
	}
	if fmt.Sprint(drops) != fmt.Sprint(wantDrops) || tooLong != 1 {
		t.Errorf("standard error tells of dropped exchanges %v and %d refused messages, want %v and 1:\n%s", drops, tooLong, wantDrops, stderr.Bytes())
	}
	if fmt.Sprint(prompts) != fmt.Sprint(wantPrompts) {
		t.Errorf("the prompts were %v tokens, want %v", prompts, wantPrompts)
	}
}

// TestReadLine checks the line reader: both line ends, a last line without
// one, and a line over the limit skipped whole.
func TestReadLine(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string // "!" marks errLineTooLong
	}{
		{"lf", "a\nbc\n", []string{"a", "bc"}},
		{"crlf", "a\r\nb\r\n", []string{"a", "b"}},
		{"no end", "a\nb", []string{"a", "b"}},
		{"empty lines", "\n\n", []string{"", ""}},
		{"too long", "short\n" + strings.Repeat("x", 40) + "\nafter", []string{"short", "!", "after"}},
		{"too long at the end", strings.Repeat("x", 40), []string{"!"}},
		{"just fits", strings.Repeat("y", 32) + "\r\n", []string{strings.Repeat("y", 32)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A small buffer makes the long lines span several reads.
			br := bufio.NewReaderSize(strings.NewReader(tc.in), 16)
			var got []string
			for {
				s, err := readLine(br, 34)
				if errors.Is(err, io.EOF) {
					break
				}
				if errors.Is(err, errLineTooLong) {
					s = "!"
				} else if err != nil {
					t.Fatal(err)
				}
				got = append(got, s)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAnswerRoom(t *testing.T) {
	for _, tc := range []struct{ n, ctx, want int }{
		{24, 2048, 24},
		{0, 2048, 1024},
		{5000, 2048, 1024},
		{1, 1, 1},
		{0, 1, 1},
	} {
		if got := answerRoom(tc.n, tc.ctx); got != tc.want {
			t.Errorf("answerRoom(%d, %d) = %d, want %d", tc.n, tc.ctx, got, tc.want)
		}
	}
}
