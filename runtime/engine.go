package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"hybrid/devices"
	"hybrid/ops"
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
	// once with ErrBusy. A request counts until its Generate returns: one
	// whose tokens are all made but not yet all handed to a slow emit still
	// takes its place.
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
	// Cached is how many of the prompt's tokens the slot's cache already
	// held (a conversation one turn on), which were not run again.
	Cached int
	// QueueMs is the time spent waiting for a slot; PrefillMs the prompt's
	// steps; DecodeMs the rest.
	QueueMs, PrefillMs, DecodeMs float64
}

// Engine serves generations for many callers on one Executor: requests
// wait in a bounded queue for one of its slots, and a scheduler goroutine
// runs them. The slots share the executor's KV cache, each a range of
// context/Slots cells (Context), as llama-server's -np does with its -c.
// Every decode step runs all active slots together: one batched step (the
// mat-muls with one row per slot, attention per slot); a new request joins
// at the next step, after its prompt's prefill, and a finished or cancelled
// one leaves and frees its slot. A slot keeps the tokens its cache holds,
// and a request that starts with them (the same conversation, one turn on)
// prefills only the rest, where they are at least half its prompt.
// Generate may be called from any goroutine.
type Engine struct {
	x     *Executor
	opts  EngineOptions
	queue chan *job
	slots []slot
	n     int            // each slot's cells
	ids   []int32        // a batched greedy step's picks, reused by the scheduler
	picks []devices.Pick // a sampled batched step's candidates (ForwardRowsTop), kept between steps
	chain *stepChain     // a lone sequence's steps, each queued before the pick before it is read (nil until one runs); any other step drops the one queued ahead

	mu     sync.Mutex
	closed bool
	held   int            // jobs whose Generate has not returned: at most Slots+Queue
	wg     sync.WaitGroup // the scheduler
	stop   chan struct{}  // closed by Close: cancel what is left
}

// slot is one sequence's place in the cache.
type slot struct {
	base   int
	cached []int32 // the tokens whose keys and values its cells hold, in order
	job    *job    // running, or nil
	// The running job's state.
	sampler *Sampler
	history []int32
	next    int32 // the token sampled last, to feed at the next step
	made    int   // tokens generated
	t0      time.Time
}

// job is a request on its way through the engine.
type job struct {
	ctx      context.Context
	req      Request
	out      outbox // generated tokens, in order
	fin      Finish
	err      error
	queued   time.Time
	cancel   atomic.Bool // set by the caller when emit returns false
	finished chan struct{}
}

// outbox is an unbounded queue of tokens from the scheduler to a caller, so
// that a slow caller never holds up the other slots.
type outbox struct {
	mu     sync.Mutex
	ids    []int32
	closed bool
	wake   chan struct{} // capacity 1: something new
}

func (o *outbox) push(id int32) {
	o.mu.Lock()
	o.ids = append(o.ids, id)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// take waits for tokens and returns them; ok is false once the box is
// closed and empty.
func (o *outbox) take(buf []int32) (ids []int32, ok bool) {
	for {
		o.mu.Lock()
		if len(o.ids) > 0 {
			ids = append(buf[:0], o.ids...)
			o.ids = o.ids[:0]
			o.mu.Unlock()
			return ids, true
		}
		if o.closed {
			o.mu.Unlock()
			return nil, false
		}
		o.mu.Unlock()
		<-o.wake
	}
}

// NewEngine starts an engine on x. The engine owns x from now on: nothing
// else may run steps on it until Close returns. With more than one slot
// every device of x must run steps of several sequences
// (devices.Info.Sequences), and each slot gets the executor's context/Slots
// cells.
func NewEngine(x *Executor, o EngineOptions) (*Engine, error) {
	if o.Slots < 1 || o.Slots > MaxSlots {
		return nil, fmt.Errorf("runtime: slots %d must be 1..%d", o.Slots, MaxSlots)
	}
	if o.Queue < 0 || o.Queue > MaxQueue {
		return nil, fmt.Errorf("runtime: queue %d must be 0..%d", o.Queue, MaxQueue)
	}
	n := x.ctx / o.Slots
	if n < 1 {
		return nil, fmt.Errorf("runtime: %d slots do not fit a context of %d tokens", o.Slots, x.ctx)
	}
	if o.Slots > 1 && x.single != nil {
		return nil, fmt.Errorf("runtime: %d slots: %s does not run steps of several sequences yet; use one slot, or a policy without it", o.Slots, x.single.Name())
	}
	e := &Engine{x: x, opts: o, queue: make(chan *job, o.Queue+o.Slots), stop: make(chan struct{}), n: n}
	e.slots = make([]slot, o.Slots)
	for i := range e.slots {
		e.slots[i].base = i * n
	}
	e.wg.Add(1)
	go e.run()
	return e, nil
}

// Slots is the number of sequences that run at once.
func (e *Engine) Slots() int { return e.opts.Slots }

// Context is each slot's context in tokens: a prompt plus its generated
// tokens must fit it.
func (e *Engine) Context() int { return e.n }

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
	if len(r.Prompt) > e.n {
		return Finish{}, &ContextError{Tokens: len(r.Prompt), Context: e.n}
	}
	if r.MaxTokens < 0 {
		return Finish{}, fmt.Errorf("runtime: max tokens %d must be >= 0", r.MaxTokens)
	}
	if err := r.Sampler.Validate(); err != nil {
		return Finish{}, err
	}
	j := &job{ctx: ctx, req: r, out: outbox{wake: make(chan struct{}, 1)}, queued: time.Now(), finished: make(chan struct{})}
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
	var buf []int32
	for {
		ids, ok := j.out.take(buf)
		if !ok {
			break
		}
		buf = ids
		for _, id := range ids {
			if j.cancel.Load() {
				break // drop what the scheduler made before it saw the flag
			}
			if !emit(id) {
				j.cancel.Store(true)
				break
			}
			n++
		}
	}
	<-j.finished
	e.mu.Lock()
	e.held--
	e.mu.Unlock()
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

// run is the scheduler: it admits queued jobs into free slots (each
// prefilled on its own) and runs a decode step of every active slot
// together, until the queue is closed and every slot is done.
func (e *Engine) run() {
	defer e.wg.Done()
	queue := e.queue
	for {
		active := 0
		for i := range e.slots {
			if e.slots[i].job != nil {
				active++
			}
		}
		// Admit: wait for a job when nothing runs, else take what is there.
		for active < len(e.slots) && queue != nil {
			var j *job
			ok := true
			if active == 0 {
				j, ok = <-queue
			} else {
				select {
				case j, ok = <-queue:
				default:
				}
			}
			if !ok {
				queue = nil
				break
			}
			if j == nil {
				break // none waiting: run the active slots
			}
			if e.start(j) {
				active++
			}
		}
		if active == 0 {
			if queue == nil {
				return
			}
			continue
		}
		e.step()
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

// end finishes the job of slot s with reason (or err).
func (e *Engine) end(s *slot, reason string, err error) {
	j := s.job
	s.job = nil
	if err != nil {
		j.err = err
		s.cached = s.cached[:0] // the cache's state is unknown
	}
	if reason != "" {
		j.fin.Reason = reason
	}
	if !s.t0.IsZero() {
		j.fin.DecodeMs = ms(time.Since(s.t0))
	}
	e.release(j)
}

// release closes a job's channels; its Generate then returns and frees its
// place in the count.
func (e *Engine) release(j *job) {
	j.out.close()
	close(j.finished)
}

// start puts j in a free slot, prefills its prompt and emits its first
// token; it reports whether j is running afterwards.
func (e *Engine) start(j *job) bool {
	r := j.req
	j.fin = Finish{PromptTokens: len(r.Prompt), Reason: FinishLength}
	j.fin.QueueMs = ms(time.Since(j.queued))
	if e.cancelled(j) {
		j.fin.Reason = FinishCancelled
		e.release(j)
		return false
	}
	sampler, err := NewSampler(r.Sampler)
	if err != nil {
		j.err = err
		e.release(j)
		return false
	}
	// The free slot whose cache shares the longest prefix with the prompt.
	best, keep := -1, -1
	for i := range e.slots {
		if e.slots[i].job != nil {
			continue
		}
		if k := commonPrefix(e.slots[i].cached, r.Prompt); k > keep {
			best, keep = i, k
		}
	}
	s := &e.slots[best]
	// At least the prompt's last token is run, for its logits. A slot's
	// cells are kept only where they hold at least half the prompt (a
	// conversation one turn on, a long shared system prompt): a shorter
	// shared start, such as the BOS token and a common first word, is
	// prefilled again, so that an answer does not depend on what its slot
	// held before. On a GPU a prompt prefilled in two parts gives logits a
	// little apart from the same prompt prefilled whole (up to 0.12 for a
	// synthetic TinyLlama on an H100), enough to change a greedy text.
	// Prefilling a short shared start again costs at most twice the
	// prefill.
	keep = min(keep, len(r.Prompt)-1)
	if 2*keep < len(r.Prompt) {
		keep = 0
	}
	*s = slot{base: s.base, cached: s.cached[:keep], job: j, sampler: sampler,
		history: append([]int32(nil), r.Prompt...)}
	j.fin.Cached = keep
	t0 := time.Now()
	rest := r.Prompt[keep:]
	logits, err := e.x.PrefillSeq(rest, keep, s.base)
	if err != nil {
		e.end(s, "", err)
		return false
	}
	s.cached = append(s.cached, rest...)
	j.fin.PrefillMs = ms(time.Since(t0))
	s.t0 = time.Now()
	return e.emit(s, logits)
}

// emit samples slot s's next token from logits and hands it over, or ends
// the job; it reports whether the job goes on.
func (e *Engine) emit(s *slot, logits []float32) bool {
	return e.emitID(s, s.sampler.Sample(logits, s.history))
}

// emitID hands over id, slot s's next token, or ends the job; it reports
// whether the job goes on.
func (e *Engine) emitID(s *slot, id int32) bool {
	j := s.job
	if e.cancelled(j) {
		e.end(s, FinishCancelled, nil)
		return false
	}
	if e.x.m.Tokenizer.IsEOG(id) {
		e.end(s, FinishStop, nil)
		return false
	}
	s.history = append(s.history, id)
	j.out.push(id)
	s.made++
	if j.req.MaxTokens > 0 && s.made == j.req.MaxTokens {
		e.end(s, FinishLength, nil)
		return false
	}
	if len(s.cached) >= e.n {
		e.end(s, FinishContext, nil)
		return false
	}
	s.next = id
	return true
}

// step runs one decode step of every active slot: alone as a decode step
// of its sequence, or together as one batched step.
func (e *Engine) step() {
	var act []*slot
	for i := range e.slots {
		if s := &e.slots[i]; s.job != nil {
			if e.cancelled(s.job) {
				e.end(s, FinishCancelled, nil)
				continue
			}
			act = append(act, s)
		}
	}
	switch len(act) {
	case 0:
		return
	case 1:
		// One sequence: a greedy pick is made where the logits are, and
		// only the token comes back; where the device keeps its picks
		// (stepChain), the steps after it, each one's token the pick
		// before it, are queued before the pick is read, as many as the
		// job can still take, up to the chain's depth; so too a sampled
		// pick where the device makes it.
		s := act[0]
		if e.chain == nil {
			g, err := e.x.newStepChain()
			if err != nil {
				e.end(s, "", err)
				return
			}
			e.chain = g
		}
		if cs, ok := e.chain.takes(s.sampler); ok {
			// The steps the job may still take after this one: its
			// cells' room, and its token limit where it has one.
			left := e.n - 1 - len(s.cached)
			if max := s.job.req.MaxTokens; max > 0 {
				left = min(left, max-1-s.made)
			}
			id, err := e.chain.stepSeq(s.next, len(s.cached), s.base, left, cs)
			if err != nil {
				e.end(s, "", err)
				return
			}
			s.cached = append(s.cached, s.next)
			e.emitID(s, id)
			return
		}
		// A sampled pick needs only the best few logits where the
		// device can pick them (ForwardSeqTop).
		picks, logits, err := e.x.ForwardSeqTop([]int32{s.next}, len(s.cached), s.base, s.sampler.Needs(s.history), e.picks)
		if err != nil {
			e.end(s, "", err)
			return
		}
		s.cached = append(s.cached, s.next)
		if logits != nil {
			e.emit(s, logits)
		} else {
			e.picks = picks
			e.emitID(s, s.sampler.SampleTop(picks, s.history))
		}
		return
	}
	toks := make([]int32, len(act))
	rows := make([]ops.Row, len(act))
	greedy, m := true, 0
	for i, s := range act {
		toks[i], rows[i] = s.next, ops.Row{Pos: len(s.cached), Base: s.base}
		greedy = greedy && s.sampler.Greedy()
		k := s.sampler.Needs(s.history)
		if k == 0 || m < 0 {
			m = -1 // a row needs its whole row of logits
		} else {
			m = max(m, k)
		}
	}
	// A greedy step's picks are made where the logits are, and only the
	// tokens come back (ForwardRowsGreedy); a sampled step's rows need only
	// their best few logits where the device picks them (ForwardRowsTop);
	// otherwise every row's logits come back.
	var logits []float32
	var err error
	if greedy {
		e.ids, err = e.x.ForwardRowsGreedy(toks, rows, e.ids)
	} else {
		var picks []devices.Pick
		if picks, logits, err = e.x.ForwardRowsTop(toks, rows, m, e.picks); picks != nil {
			e.picks = picks
		}
	}
	if err != nil {
		for _, s := range act {
			e.end(s, "", err)
		}
		return
	}
	v := len(logits) / len(act)
	for i, s := range act {
		s.cached = append(s.cached, s.next)
		switch {
		case greedy:
			e.emitID(s, e.ids[i])
		case logits != nil:
			e.emit(s, logits[i*v:(i+1)*v])
		default:
			e.emitID(s, s.sampler.SampleTop(e.picks[i*m:(i+1)*m], s.history))
		}
	}
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
