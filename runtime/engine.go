package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// MaxSlots bounds EngineOptions.Slots.
const MaxSlots = 256

// MaxQueue bounds EngineOptions.Queue.
const MaxQueue = 1 << 16

// EngineOptions configure an Engine.
type EngineOptions struct {
	// Slots is how many sequences run at once, each with its own place in
	// the KV cache: 1..MaxSlots.
	Slots int
	// Queue is how many requests may wait for a free slot beyond those
	// running: 0..MaxQueue. A request that finds the queue full fails at
	// once with ErrBusy.
	Queue int
}

// ErrBusy is returned by Generate when every slot is taken and the queue is
// full.
var ErrBusy = errors.New("runtime: every slot is busy and the queue is full")

// ErrClosed is returned by Generate once the engine is shut down.
var ErrClosed = errors.New("runtime: the engine is shut down")

// Request is one generation: a tokenized prompt and how to continue it.
type Request struct {
	Prompt []int32 // as the tokenizer gave it, BOS and special tokens included
	// MaxTokens is how many tokens to generate at most; 0 runs until an
	// end-of-generation token or the end of the context.
	MaxTokens int
	Sampler   SamplerConfig
}

// Finish reasons.
const (
	FinishStop      = "stop"      // the model produced an end-of-generation token (not emitted)
	FinishLength    = "length"    // MaxTokens were generated
	FinishContext   = "context"   // the sequence filled its context
	FinishCancelled = "cancelled" // emit returned false, or the caller's context ended
)

// Finish is how a generation ended.
type Finish struct {
	Reason       string
	PromptTokens int
	Tokens       int // generated and emitted
	// QueueMs is the time spent waiting for a slot; PrefillMs the prompt's
	// steps; DecodeMs the rest.
	QueueMs, PrefillMs, DecodeMs float64
}

// Engine serves generations for many callers on one Executor: requests
// wait in a bounded queue for a slot, and a scheduler goroutine runs them.
// Generate may be called from any goroutine.
type Engine struct {
	x     *Executor
	opts  EngineOptions
	queue chan *job

	mu     sync.Mutex
	closed bool
	held   int            // jobs queued or running: at most Slots+Queue
	wg     sync.WaitGroup // the scheduler
	stop   chan struct{}  // closed by Close: cancel what is left
}

// job is a request on its way through the engine.
type job struct {
	ctx      context.Context
	req      Request
	tokens   chan int32 // generated tokens, in order; closed when done
	fin      Finish
	err      error
	queued   time.Time
	cancel   atomic.Bool // set by the caller when emit returns false
	finished chan struct{}
}

// NewEngine starts an engine on x. The engine owns x from now on: nothing
// else may run steps on it until Close returns.
func NewEngine(x *Executor, o EngineOptions) (*Engine, error) {
	if o.Slots < 1 || o.Slots > MaxSlots {
		return nil, fmt.Errorf("runtime: slots %d must be 1..%d", o.Slots, MaxSlots)
	}
	if o.Queue < 0 || o.Queue > MaxQueue {
		return nil, fmt.Errorf("runtime: queue %d must be 0..%d", o.Queue, MaxQueue)
	}
	if o.Slots > 1 {
		return nil, fmt.Errorf("runtime: %d slots: sequences decoded together are not built yet; use 1", o.Slots)
	}
	e := &Engine{x: x, opts: o, queue: make(chan *job, o.Queue+o.Slots), stop: make(chan struct{})}
	e.wg.Add(1)
	go e.run()
	return e, nil
}

// Slots is the number of sequences that run at once.
func (e *Engine) Slots() int { return e.opts.Slots }

// Context is each slot's context in tokens: a prompt plus its generated
// tokens must fit it.
func (e *Engine) Context() int { return e.x.ctx }

// Generate queues r and waits for it to run, calling emit with each
// generated token, in order, on the caller's goroutine (a slow emit holds
// up only its own request). emit returning false ends the generation
// (FinishCancelled), as does ctx ending. The error is ErrBusy (at once) when
// the queue is full, ErrClosed after Close, a prompt that does not fit the
// context, or a failed step; ctx's error is not an error here, only a
// FinishCancelled.
func (e *Engine) Generate(ctx context.Context, r Request, emit func(id int32) bool) (Finish, error) {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return Finish{}, ErrClosed
	}
	if len(r.Prompt) == 0 {
		return Finish{}, fmt.Errorf("runtime: the prompt is empty")
	}
	if len(r.Prompt) > e.x.ctx {
		return Finish{}, &ContextError{Tokens: len(r.Prompt), Context: e.x.ctx}
	}
	if r.MaxTokens < 0 {
		return Finish{}, fmt.Errorf("runtime: max tokens %d must be >= 0", r.MaxTokens)
	}
	if err := r.Sampler.Validate(); err != nil {
		return Finish{}, err
	}
	j := &job{ctx: ctx, req: r, tokens: make(chan int32, 64), queued: time.Now(), finished: make(chan struct{})}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return Finish{}, ErrClosed
	}
	if e.held >= e.opts.Slots+e.opts.Queue {
		e.mu.Unlock()
		return Finish{}, ErrBusy
	}
	e.held++
	e.queue <- j // never blocks: the channel has room for every held job
	e.mu.Unlock()
	n := 0
	for id := range j.tokens {
		if j.cancel.Load() {
			continue // drain what the scheduler sent before it saw the flag
		}
		if !emit(id) {
			j.cancel.Store(true)
			continue
		}
		n++
	}
	<-j.finished
	if j.cancel.Load() && j.err == nil {
		j.fin.Reason = FinishCancelled
	}
	j.fin.Tokens = n
	return j.fin, j.err
}

// ContextError is a prompt longer than a slot's context.
type ContextError struct{ Tokens, Context int }

func (e *ContextError) Error() string {
	return fmt.Sprintf("runtime: the prompt is %d tokens, longer than the context of %d tokens", e.Tokens, e.Context)
}

// Close stops taking requests and waits for the running and queued ones to
// finish until ctx ends; then it cancels what is left (each ends with
// FinishCancelled) and waits for the scheduler to stop. The executor is the
// caller's again afterwards.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if !e.closed {
		e.closed = true
		close(e.queue)
	}
	e.mu.Unlock()
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		select {
		case <-e.stop:
		default:
			close(e.stop)
		}
		<-done
		return ctx.Err()
	}
}

// run is the scheduler: it takes queued jobs in order and runs each.
func (e *Engine) run() {
	defer e.wg.Done()
	for j := range e.queue {
		e.runJob(j)
	}
}

// cancelled reports whether j should end now.
func (e *Engine) cancelled(j *job) bool {
	if j.cancel.Load() {
		return true
	}
	select {
	case <-j.ctx.Done():
		return true
	case <-e.stop:
		return true
	default:
		return false
	}
}

// runJob runs one generation to its end and closes its channels.
func (e *Engine) runJob(j *job) {
	defer func() {
		e.mu.Lock()
		e.held--
		e.mu.Unlock()
		close(j.finished)
	}()
	defer close(j.tokens)
	r := j.req
	j.fin = Finish{PromptTokens: len(r.Prompt), Reason: FinishLength}
	j.fin.QueueMs = ms(time.Since(j.queued))
	if e.cancelled(j) {
		j.fin.Reason = FinishCancelled
		return
	}
	s, err := NewSampler(r.Sampler)
	if err != nil {
		j.err = err
		return
	}
	t0 := time.Now()
	logits, err := e.x.Prefill(r.Prompt, 0)
	if err != nil {
		j.err = err
		return
	}
	j.fin.PrefillMs = ms(time.Since(t0))
	t0 = time.Now()
	defer func() { j.fin.DecodeMs = ms(time.Since(t0)) }()
	tok := e.x.m.Tokenizer
	history := append([]int32(nil), r.Prompt...)
	pos := len(r.Prompt)
	for n := 0; r.MaxTokens == 0 || n < r.MaxTokens; n++ {
		if e.cancelled(j) {
			j.fin.Reason = FinishCancelled
			return
		}
		id := s.Sample(logits, history)
		if tok.IsEOG(id) {
			j.fin.Reason = FinishStop
			return
		}
		history = append(history, id)
		select {
		case j.tokens <- id:
		case <-j.ctx.Done():
			j.fin.Reason = FinishCancelled
			return
		case <-e.stop:
			j.fin.Reason = FinishCancelled
			return
		}
		if r.MaxTokens > 0 && n+1 == r.MaxTokens {
			return
		}
		if pos >= e.x.ctx {
			j.fin.Reason = FinishContext
			return
		}
		if logits, err = e.x.Forward([]int32{id}, pos); err != nil {
			j.err = err
			return
		}
		pos++
	}
}
