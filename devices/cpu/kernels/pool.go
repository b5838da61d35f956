package kernels

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// ErrFault is wrapped by Fault's error: a kernel's read of its inputs
// faulted (SIGBUS), which for weights used in place in a memory-mapped file
// means the file lost the page, almost always because it was truncated.
var ErrFault = errors.New("memory fault in a kernel")

// Pool is a fixed set of worker goroutines that split index ranges between
// them. The goroutine that calls Run works too, so a Pool of n threads starts
// n-1 goroutines. A Pool also owns the scratch space MatVec and MatMul reuse,
// so it serves one caller at a time.
type Pool struct {
	threads int
	wake    []chan struct{} // one per worker goroutine (without futexes)
	fx      *futexes        // where the OS has them: one broadcast wake-up
	done    chan struct{}   // the last worker to finish a job sends here
	closing sync.Once

	// The job in flight; written by Run before waking workers.
	job     task
	n       int
	chunk   int
	next    atomic.Int64 // next unclaimed index
	running atomic.Int32 // workers still busy with the job

	fn      funcTask // adapts Run's func to task without allocating
	scratch scratch

	fault atomic.Pointer[faultInfo] // the first fault since the last Fault call
}

type faultInfo struct{ addr uintptr }

// task is a unit of parallel work over an index range.
type task interface{ run(lo, hi int) }

type funcTask struct{ f func(lo, hi int) }

func (t *funcTask) run(lo, hi int) { t.f(lo, hi) }

// MaxThreads is the most workers a Pool has. More goroutines than cores only
// add contention, and 1024 is above the hardware threads of any single host
// (two 192-core EPYCs with SMT have 768), so a larger request is a mistake,
// not a machine: bounding it here keeps it from allocating a channel and a
// goroutine per requested thread before anything checks it.
const MaxThreads = 1024

// NewPool starts a pool of threads workers, at least 1 and at most
// MaxThreads: callers check the number they are given (the CPU backend's Open
// refuses one out of range); the clamp is the last guard.
func NewPool(threads int) *Pool {
	threads = min(max(threads, 1), MaxThreads)
	p := &Pool{threads: threads, done: make(chan struct{}, 1)}
	if p.fx = newFutexes(threads - 1); p.fx != nil {
		for range threads - 1 {
			go p.workFutex()
		}
		return p
	}
	p.wake = make([]chan struct{}, threads-1)
	for i := range p.wake {
		p.wake[i] = make(chan struct{}, 1)
		go p.work(p.wake[i])
	}
	return p
}

// Threads is the number of goroutines, the caller's included, that Run uses.
func (p *Pool) Threads() int { return p.threads }

// Close stops the workers. The pool must not be used afterwards.
func (p *Pool) Close() {
	p.closing.Do(func() {
		if p.fx != nil {
			p.fx.close()
			return
		}
		for _, c := range p.wake {
			close(c)
		}
	})
}

// Run calls fn on consecutive chunks covering [0, n), spread over the pool,
// and returns when all have finished. Chunks are claimed dynamically, so a
// worker slowed by the OS costs only its current chunk.
func (p *Pool) Run(n int, fn func(lo, hi int)) {
	p.fn.f = fn
	p.runTask(&p.fn, n, 1)
	p.fn.f = nil
}

// runTask runs t over [0, n) in chunks whose size is a multiple of align.
func (p *Pool) runTask(t task, n, align int) {
	if n <= 0 {
		return
	}
	// About four chunks per thread balances load without much claiming.
	chunk := (n + 4*p.threads - 1) / (4 * p.threads)
	chunk = (chunk + align - 1) / align * align
	workers := min(p.threads-1, (n+chunk-1)/chunk-1)
	// A fault reading a mapped weight panics instead of killing the
	// process, on this goroutine as on the workers (set in work), and the
	// chunk records it for Fault.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	if workers <= 0 {
		p.chunkRun(t, 0, n)
		return
	}
	if p.fx != nil {
		p.fx.run(p, t, n, align, workers)
		return
	}
	p.job, p.n, p.chunk = t, n, chunk
	p.next.Store(0)
	p.running.Store(int32(workers))
	for _, c := range p.wake[:workers] {
		c <- struct{}{}
	}
	p.claim()
	<-p.done
	p.job = nil
}

// claim runs chunks of the current job until none are left.
func (p *Pool) claim() {
	for {
		lo := int(p.next.Add(int64(p.chunk))) - p.chunk
		if lo >= p.n {
			return
		}
		p.chunkRun(p.job, lo, min(lo+p.chunk, p.n))
	}
}

// chunkRun runs one chunk, recording a memory fault in it rather than
// letting it end the process; the rest of the job still runs.
func (p *Pool) chunkRun(t task, lo, hi int) {
	defer func() {
		if r := recover(); r != nil {
			a, ok := r.(interface{ Addr() uintptr })
			if !ok {
				panic(r)
			}
			p.fault.CompareAndSwap(nil, &faultInfo{addr: a.Addr()})
		}
	}()
	t.run(lo, hi)
}

// Fault returns an error wrapping ErrFault if a chunk run since the last
// call faulted, and clears it; nil otherwise. The outputs of a job that
// faulted are garbage.
func (p *Pool) Fault() error {
	f := p.fault.Swap(nil)
	if f == nil {
		return nil
	}
	return fmt.Errorf("%w at address %#x", ErrFault, f.addr)
}

func (p *Pool) work(wake chan struct{}) {
	debug.SetPanicOnFault(true)
	for range wake {
		p.claim()
		if p.running.Add(-1) == 0 {
			p.done <- struct{}{}
		}
	}
}
