package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"hybrid/runtime"
	"hybrid/server"
)

// HTTP server timeouts of hybrid serve. Reading a request (headers and a
// body of up to --max-body) is bounded; a response's writes are bounded
// each by the server package (server.DefaultWriteTimeout), so that a
// stream lasts as long as it generates.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 60 * time.Second
	idleTimeout       = 120 * time.Second
	// afterGrace is how long the handlers of generations cancelled at the
	// end of the grace period get to write their last event.
	afterGrace = 5 * time.Second
)

func serveCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	model := fs.String("model", "", "GGUF model `file` (default: the built-in stories260K)")
	policy := fs.String("policy", "auto", "placement policy: a name in configs/policies (auto, cpu-only, ...) or a YAML `file`")
	addr := fs.String("addr", "127.0.0.1:8080", "`host:port` to listen on (port 0 picks a free one); loopback by default")
	parallel := fs.Int("parallel", 1, "sequences generated at once (slots): each decode step runs every active one together; they share the --ctx cells of the KV cache, ctx/N each (as llama-server's -np)")
	queue := fs.Int("queue", 64, "requests that may wait for a slot; more are answered 429 with Retry-After")
	threads := fs.Int("threads", 0, "CPU threads; 0 uses every core")
	ctx := fs.Int("ctx", 0, "KV cache cells in tokens, shared by the slots (each gets ctx/--parallel); 0 uses the model's context, at most 4096; more than the model's needs --ctx-override")
	override := fs.Bool("ctx-override", false, ctxOverrideUsage)
	maxBody := fs.Int64("max-body", server.DefaultMaxBody, "largest request body in `bytes`")
	grace := fs.Duration("grace", 10*time.Second, "on SIGINT or SIGTERM, how long running requests may go on before they are cancelled")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *parallel < 1 || *parallel > runtime.MaxSlots {
		return badFlag(fs, "--parallel %d: want 1..%d slots", *parallel, runtime.MaxSlots)
	}
	if *queue < 0 || *queue > runtime.MaxQueue {
		return badFlag(fs, "--queue %d: want 0..%d waiting requests", *queue, runtime.MaxQueue)
	}
	if *maxBody < 1 || *maxBody > server.MaxBodyLimit {
		return badFlag(fs, "--max-body %d: want 1..%d bytes", *maxBody, server.MaxBodyLimit)
	}
	if *grace < 0 {
		return badFlag(fs, "--grace %v: want 0 or more", *grace)
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return badFlag(fs, "--addr %q: want host:port (%v)", *addr, err)
	}
	if err := checkDeviceFlags(fs, *threads, 0); err != nil {
		return err
	}
	if err := checkContextFlag(fs, *ctx); err != nil {
		return err
	}

	m, c, err := loadModel(fs, stderr, *model, *ctx, *override)
	if err != nil {
		return err
	}
	defer m.Close()
	sess, err := runtime.NewSession(m, runtime.SessionOptions{Policy: *policy, Threads: *threads, Context: c, ContextOverride: *override, Batch: *parallel})
	if err != nil {
		return err
	}
	defer sess.Close()
	engine, err := runtime.NewEngine(sess.Exec, runtime.EngineOptions{Slots: *parallel, Queue: *queue})
	if err != nil {
		return fmt.Errorf("--parallel %d --queue %d: %w", *parallel, *queue, err)
	}
	logger := log.New(stderr, "", log.LstdFlags)
	srv, err := server.New(engine, m, server.Options{MaxBody: *maxBody, Logf: logger.Printf})
	if err != nil {
		engine.Close(context.Background())
		return err
	}
	if err := srv.TemplateError(); err != nil {
		fmt.Fprintf(stderr, "hybrid serve: warning: chat completions will fail: %v\n", err)
	}

	// Take SIGINT and SIGTERM over from main's handler (which exits at
	// once): Ignore stops their delivery to every channel without a moment
	// of their default action (Reset would kill the process there), then
	// only ours gets them.
	sig := make(chan os.Signal, 2)
	signal.Ignore(os.Interrupt, syscall.SIGTERM)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		engine.Close(context.Background())
		return err
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      server.DefaultWriteTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          logger,
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && !ip.IsLoopback()) || (ip == nil && host != "localhost") {
		fmt.Fprintf(stderr, "hybrid serve: warning: %s is reachable from other machines, and the server has no authentication\n", *addr)
	}
	fmt.Fprintf(stdout, "hybrid serve: listening on http://%s (model %s on %s, %d slot(s) of %d tokens, queue %d)\n",
		ln.Addr(), srv.ID(), sess.Exec.DeviceList(), *parallel, engine.Context(), *queue)

	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	var s os.Signal
	select {
	case err := <-served:
		engine.Close(context.Background())
		return err
	case s = <-sig:
	}
	fmt.Fprintf(stderr, "hybrid serve: %v: shutting down; running requests have %v to finish (a second signal exits now)\n", s, *grace)
	go func() {
		s := <-sig
		fmt.Fprintf(stderr, "hybrid serve: %v again: exiting now\n", s)
		code := 130
		if s == syscall.SIGTERM {
			code = 143
		}
		os.Exit(code)
	}()
	return shutdown(hs, engine, *grace, served, stderr)
}

// shutdown stops hs from taking connections and engine from taking
// requests, lets running requests go on for grace, then cancels what is
// left (streams end with an error event) and waits for their handlers.
func shutdown(hs *http.Server, engine *runtime.Engine, grace time.Duration, served <-chan error, stderr io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- hs.Shutdown(ctx) }()
	if err := engine.Close(ctx); err != nil {
		fmt.Fprintln(stderr, "hybrid serve: grace period over: cancelled the requests still running")
	}
	if err := <-closed; err != nil {
		// The handlers of cancelled requests are writing their last
		// events: give them a moment, then drop their connections.
		ctx, cancel := context.WithTimeout(context.Background(), afterGrace)
		defer cancel()
		if err := hs.Shutdown(ctx); err != nil {
			hs.Close()
		}
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	fmt.Fprintln(stderr, "hybrid serve: stopped")
	return nil
}
