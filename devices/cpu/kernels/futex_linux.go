//go:build linux

package kernels

import (
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// futexes is how a Pool's workers wait between jobs on Linux: each on its
// own OS thread, first spinning on a generation word for up to spinWait,
// then asleep in a futex wait on it; Run bumps the word and, if any worker
// sleeps, wakes as many as the job has chunks for in one system call. With
// channels, Go's scheduler starts woken goroutines one after another (it
// lets one idle thread look for work at a time), which at 16 threads cost
// tens of microseconds per job, hundreds of times per decode step.
//
// The spin matters as much: on the 2-core CI kind (a virtual machine) a
// sleeping thread takes tens of microseconds to wake, longer than most of a
// decode step's jobs, so a pool whose worker slept between jobs ran them on
// the caller alone. Spinning only briefly keeps what sleeping gives under a
// competing load: a worker that finds no job within spinWait stops taking
// CPU time from other processes.
//
// Run waits for the job's chunks to be done, not for every woken worker to
// report: a worker the OS has not run yet (on a machine busy with other
// work) finds nothing left and costs the job nothing. So a job lives in one
// of two slots that workers may still hold a pointer to after it ends; a
// sequence number and a count of workers inside a slot (a seqlock) keep a
// late worker from claiming from a slot that Run is refilling.
type futexes struct {
	gen      atomic.Uint32 // the futex word workers wait on
	sleepers atomic.Int32  // workers in (or entering) a futex wait on gen
	_        [56]byte      // gen is polled; keep it off the slots' line
	done     atomic.Uint32 // the futex word Run sleeps on
	waiting  atomic.Bool   // Run is in (or entering) a futex wait on done
	cur      atomic.Pointer[jobSlot]
	slots    [2]jobSlot
	jobs     uint64
	closed   atomic.Bool
}

// jobSlot is one job: its task and range, its chunking (the smallest chunk,
// and the share of what is left that a claim takes), the next unclaimed
// index and the count of indices not yet done.
type jobSlot struct {
	seq    atomic.Uint64 // odd while Run fills the slot
	active atomic.Int32  // workers between reading seq and leaving
	t      task
	n      int
	chunk  int64
	div    int64
	align  int64
	next   atomic.Int64
	left   atomic.Int64
}

const (
	futexWaitPrivate = 128 // FUTEX_WAIT | FUTEX_PRIVATE_FLAG
	futexWakePrivate = 129 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
)

// futexFrom is the fewest workers for which a pool uses futexes. Measured
// side by side (TinyLlama Q4_0): on the 16-core H100 host decode went from
// 47 to 61 tok/s at 8 threads and from 48 to 70 at 16, and from 12.4 to
// 18.3 under a competing load on every core, before the spin; on the 2-core
// CI kind, with the spin, from 31-33 to 42 tok/s.
const futexFrom = 1

// spinWait is how long a worker polls for the next job, and Run for the
// last chunk of its job, before sleeping. A decode step's jobs follow each
// other within microseconds; 50 µs covers those gaps, and is short next to
// the scheduler's time slice, so a competing process loses little.
const spinWait = 50 * time.Microsecond

// spin polls cond, with a PAUSE between polls, until it holds or spinWait
// has passed; it reports whether cond held.
func spin(cond func() bool) bool {
	var start time.Time
	for i := 0; ; i++ {
		if cond() {
			return true
		}
		relax()
		if i%64 == 63 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > spinWait {
				return false
			}
		}
	}
}

func newFutexes(workers int) *futexes {
	if workers < futexFrom {
		return nil
	}
	return &futexes{}
}

// futexWait sleeps while *w == val (or until a signal or a spurious
// wake-up: callers recheck).
func futexWait(w *atomic.Uint32, val uint32) {
	syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWaitPrivate, uintptr(val), 0, 0, 0)
}

func futexWake(w *atomic.Uint32, n int) {
	syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWakePrivate, uintptr(n), 0, 0, 0)
}

// run is runTask with futexes: t over [0, n) in guided chunks, multiples of
// align but the last, with up to workers workers besides the caller.
func (f *futexes) run(p *Pool, t task, n, align, workers int) {
	s := &f.slots[f.jobs%2]
	f.jobs++
	s.seq.Add(1) // odd: filling
	for s.active.Load() != 0 {
		runtime.Gosched() // a late worker is leaving the slot
	}
	// Guided chunks: each claim takes 1/(2·threads) of what is left, down
	// to a sixteenth of a thread's share, so that the first chunks are large
	// and the last ones small enough to even the threads' finishing times.
	s.t, s.n, s.align = t, n, int64(align)
	s.chunk, s.div = int64(max(align, n/(16*p.threads))), int64(2*p.threads)
	s.next.Store(0)
	s.left.Store(int64(n))
	s.seq.Add(1) // even: ready
	f.cur.Store(s)
	f.gen.Add(1)
	if n := min(int(f.sleepers.Load()), workers); n > 0 {
		futexWake(&f.gen, n)
	}
	f.claim(p, s)
	if !spin(func() bool { return s.left.Load() == 0 }) {
		for {
			d := f.done.Load()
			f.waiting.Store(true)
			if s.left.Load() == 0 {
				break
			}
			futexWait(&f.done, d)
		}
		f.waiting.Store(false)
	}
	s.t = nil
}

// claim runs chunks of the job in s until none are left; the chunk that
// finishes the job wakes Run.
func (f *futexes) claim(p *Pool, s *jobSlot) {
	n := int64(s.n)
	for {
		lo := s.next.Load()
		if lo >= n {
			return
		}
		size := max(s.chunk, (n-lo)/s.div)
		hi := min(lo+(size+s.align-1)/s.align*s.align, n)
		if !s.next.CompareAndSwap(lo, hi) {
			continue
		}
		p.chunkRun(s.t, int(lo), int(hi))
		if s.left.Add(lo-hi) == 0 {
			f.done.Add(1)
			if f.waiting.Load() {
				futexWake(&f.done, 1)
			}
		}
	}
}

func (f *futexes) close() {
	f.closed.Store(true)
	f.gen.Add(1)
	futexWake(&f.gen, 1<<30)
}

// workFutex is a worker's loop with futexes.
func (p *Pool) workFutex() {
	runtime.LockOSThread()
	debug.SetPanicOnFault(true)
	f := p.fx
	var seen uint32 // gen starts at 0, whenever this goroutine starts
	for {
		g := f.gen.Load()
		if g == seen && !spin(func() bool { return f.gen.Load() != seen }) {
			f.sleepers.Add(1)
			futexWait(&f.gen, seen) // returns at once if gen moved on
			f.sleepers.Add(-1)
			continue
		}
		g = f.gen.Load()
		if f.closed.Load() {
			return
		}
		seen = g
		s := f.cur.Load()
		s.active.Add(1)
		if s.seq.Load()%2 == 0 {
			f.claim(p, s)
		}
		s.active.Add(-1)
	}
}
