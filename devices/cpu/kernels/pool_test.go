package kernels

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// TestPoolRun checks that Run covers [0, n) exactly once, in order within a
// chunk, for sizes around the chunking thresholds.
func TestPoolRun(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		p := NewPool(threads)
		for _, n := range []int{0, 1, 2, 7, 8, 33, 1000} {
			t.Run(fmt.Sprintf("threads=%d/n=%d", threads, n), func(t *testing.T) {
				hits := make([]atomic.Int32, n)
				for range 3 {
					p.Run(n, func(lo, hi int) {
						if lo >= hi || lo < 0 || hi > n {
							t.Errorf("chunk [%d, %d) of %d", lo, hi, n)
						}
						for i := lo; i < hi; i++ {
							hits[i].Add(1)
						}
					})
				}
				for i := range hits {
					if h := hits[i].Load(); h != 3 {
						t.Errorf("index %d ran %d times in 3 runs", i, h)
					}
				}
			})
		}
		if p.Threads() != threads {
			t.Errorf("Threads() = %d, want %d", p.Threads(), threads)
		}
		p.Close()
		p.Close() // idempotent
	}
}

// TestPoolRunNoAllocs checks that Run itself does not allocate. (A closure
// that captures variables is heap-allocated by its caller when it is made, as
// any func value that escapes is.)
func TestPoolRunNoAllocs(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	var sink atomic.Int64
	fn := func(lo, hi int) { sink.Add(int64(hi - lo)) }
	if a := testing.AllocsPerRun(100, func() { p.Run(100, fn) }); a != 0 {
		t.Errorf("Run allocates %v times per call", a)
	}
}

func BenchmarkPoolRun(b *testing.B) {
	p := NewPool(2)
	defer p.Close()
	var sink atomic.Int64
	fn := func(lo, hi int) { sink.Add(int64(hi - lo)) }
	for b.Loop() {
		p.Run(64, fn)
	}
}

// TestPoolBothWakeUps runs TestPoolRun's check on pools with and without
// futexes (where the OS has them), with jobs of every chunk count, many in a
// row so that late workers meet refilled job slots.
func TestPoolBothWakeUps(t *testing.T) {
	for _, threads := range []int{2, 4, 9} {
		p := NewPool(threads)
		for round := range 2000 {
			n := round%97 + 1
			hits := make([]atomic.Int32, n)
			p.Run(n, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					hits[i].Add(1)
				}
			})
			for i := range hits {
				if h := hits[i].Load(); h != 1 {
					t.Fatalf("threads=%d round %d: index %d of %d ran %d times", threads, round, i, n, h)
				}
			}
		}
		p.Close()
	}
}
