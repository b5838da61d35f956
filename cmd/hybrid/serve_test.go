//go:build unix

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestServeFlags checks that bad flags are usage errors naming the flag,
// before anything is loaded.
func TestServeFlags(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"parallel-zero", []string{"--parallel", "0"}, "--parallel 0"},
		{"parallel-huge", []string{"--parallel", "100000"}, "--parallel 100000"},
		{"queue-negative", []string{"--queue", "-1"}, "--queue -1"},
		{"max-body-zero", []string{"--max-body", "0"}, "--max-body 0"},
		{"max-body-huge", []string{"--max-body", "99999999999"}, "--max-body 99999999999"},
		{"addr", []string{"--addr", "localhost"}, "--addr \"localhost\""},
		{"grace", []string{"--grace", "-1s"}, "--grace -1s"},
		{"threads", []string{"--threads", "-2"}, "--threads -2"},
		{"ctx", []string{"--ctx", "-5"}, "--ctx -5"},
		{"argument", []string{"model.gguf"}, "unexpected argument"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := Main(append([]string{"serve"}, c.args...), &stdout, &stderr); code != 2 {
				t.Errorf("exit code %d, want 2; stderr %s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), c.want) {
				t.Errorf("stderr does not name %q:\n%s", c.want, stderr.String())
			}
		})
	}
}

// served is a hybrid serve running in a child process (this test binary
// running main).
type served struct {
	cmd    *exec.Cmd
	url    string
	stderr *syncBuffer
	exited chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startServe starts hybrid serve with args on a free loopback port and
// waits for the line that gives its address.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"serve", "--addr", "127.0.0.1:0", "--threads", "1", "--ctx", "1024"}, args...)...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	s := &served{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan error, 1)}
	cmd.Stderr = s.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		io.Copy(io.Discard, out)
		s.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-s.exited
	})
	select {
	case line := <-lines:
		_, rest, ok := strings.Cut(line, "listening on http://")
		if !ok {
			t.Fatalf("first line %q does not give the address", line)
		}
		s.url = "http://" + strings.Fields(rest)[0]
	case err := <-s.exited:
		t.Fatalf("hybrid serve exited (%v): %s", err, s.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("hybrid serve did not say where it listens in 30 s: %s", s.stderr.String())
	}
	return s
}

// wait waits for the server to exit and returns its exit code.
func (s *served) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-s.exited:
		s.exited <- err // for the cleanup
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(30 * time.Second):
		t.Fatalf("hybrid serve still running 30 s after the signal: %s", s.stderr.String())
	}
	return -1
}

// startStream starts a greedy chat stream that runs to the end of the
// context of 1024 tokens (about a second here) and returns once its
// first event has come.
func startStream(t *testing.T, url string) (*bufio.Reader, func()) {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"stories260K","messages":[{"role":"user","content":"Once upon a time"}],"temperature":0,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: {") {
		t.Fatalf("first line %q, %v", line, err)
	}
	return br, func() { resp.Body.Close() }
}

// lastEvents reads a stream to its end and returns its last two data lines.
func lastEvents(t *testing.T, r io.Reader) (string, string) {
	t.Helper()
	var prev, last string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if l := sc.Text(); l != "" {
			prev, last = last, l
		}
	}
	return prev, last
}

// TestServeGracefulShutdown checks SIGTERM (and SIGINT) on a real hybrid
// serve: it stops taking connections at once, a stream that was running
// goes on to its end within the grace period, and the process exits 0.
func TestServeGracefulShutdown(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			s := startServe(t, "--grace", "20s")
			resp, err := http.Get(s.url + "/health")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("/health: %v %v", resp, err)
			}
			resp.Body.Close()
			br, closeStream := startStream(t, s.url)
			defer closeStream()
			if err := s.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			// New connections are refused once the listener is closed.
			host := strings.TrimPrefix(s.url, "http://")
			deadline := time.Now().Add(5 * time.Second)
			for {
				c, err := net.DialTimeout("tcp", host, time.Second)
				if err != nil {
					break
				}
				c.Close()
				if time.Now().After(deadline) {
					t.Fatal("still accepting connections 5 s after the signal")
				}
				time.Sleep(10 * time.Millisecond)
			}
			prev, last := lastEvents(t, br)
			var ev struct {
				Choices []struct {
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			if last != "data: [DONE]" || json.Unmarshal([]byte(strings.TrimPrefix(prev, "data: ")), &ev) != nil ||
				len(ev.Choices) != 1 || ev.Choices[0].FinishReason != "length" {
				t.Errorf("the stream did not run to its end: last events %q, %q", prev, last)
			}
			if code := s.wait(t); code != 0 {
				t.Errorf("exit code %d, want 0: %s", code, s.stderr.String())
			}
			if !strings.Contains(s.stderr.String(), "hybrid serve: stopped") {
				t.Errorf("stderr:\n%s", s.stderr.String())
			}
		})
	}
}

// TestServeGraceOver checks that a stream still running when the grace
// period ends is cancelled and ends with an error event, not a cut.
func TestServeGraceOver(t *testing.T) {
	s := startServe(t, "--grace", "0s")
	br, closeStream := startStream(t, s.url)
	defer closeStream()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_, last := lastEvents(t, br)
	if !strings.Contains(last, `"code":"shutting_down"`) {
		t.Errorf("the stream's last event is %q, want an error", last)
	}
	if code := s.wait(t); code != 0 {
		t.Errorf("exit code %d, want 0: %s", code, s.stderr.String())
	}
}

// TestServeParallel checks that --parallel N reaches the engine: it
// serves with N slots, or fails with the engine's reason naming the flag.
func TestServeParallel(t *testing.T) {
	cmd := exec.Command(os.Args[0], "serve", "--addr", "127.0.0.1:0", "--threads", "1", "--parallel", "2")
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.Contains(line, "2 slot(s)") {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		return
	}
	err = cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "--parallel 2") {
		t.Errorf("neither served with 2 slots nor failed naming --parallel: %v, stdout %q, stderr %s", err, line, stderr.String())
	}
}
