package server

import (
	"io"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestNoGrowth sends a thousand requests of every kind (chat and
// completions, streamed and not, with stop strings, refused ones, and
// clients that leave mid-stream) and checks that the number of goroutines
// and the live heap come back to where they were.
func TestNoGrowth(t *testing.T) {
	if testing.Short() {
		t.Skip("a thousand requests")
	}
	f := newFixture(t, setup{queue: 8})
	client := f.ts.Client()
	bodies := []struct{ path, body string }{
		{"/v1/completions", `{"prompt":"Once upon a time","max_tokens":4}`},
		{"/v1/completions", `{"prompt":"Lily","max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"temperature":0.7,"stop":["the"]}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"stream":true}`},
		{"/v1/chat/completions", `{"messages":[`},
		{"/v1/completions", `{"prompt":"Once upon a time","model":"other"}`},
	}
	send := func(i int) {
		b := bodies[i%len(bodies)]
		resp, err := client.Post(f.ts.URL+b.path, "application/json", strings.NewReader(b.body))
		if err != nil {
			t.Error(err)
			return
		}
		if i%50 == 7 {
			// A client that leaves after the first bytes.
			resp.Body.Read(make([]byte, 16))
		} else {
			io.Copy(io.Discard, resp.Body)
		}
		resp.Body.Close()
	}
	// Four clients at once, so some requests queue.
	run := func(n int) {
		var wg sync.WaitGroup
		for c := range 4 {
			wg.Go(func() {
				for i := c; i < n; i += 4 {
					send(i)
				}
			})
		}
		wg.Wait()
	}
	settle := func() (int, uint64) {
		client.CloseIdleConnections()
		var g int
		var ms goruntime.MemStats
		// Handlers of closed connections and the engine end shortly after
		// their clients: wait for the count to stop falling.
		for range 50 {
			time.Sleep(20 * time.Millisecond)
			goruntime.GC()
			if n := goruntime.NumGoroutine(); n == g {
				break
			} else {
				g = n
			}
		}
		goruntime.ReadMemStats(&ms)
		return g, ms.HeapAlloc
	}
	run(60) // warm up: pools, connections, the executor's buffers
	g0, h0 := settle()
	const n = 1000
	start := time.Now()
	run(n)
	took := time.Since(start)
	g1, h1 := settle()
	t.Logf("%d requests in %v; goroutines %d -> %d; heap %d KiB -> %d KiB", n, took.Round(time.Millisecond), g0, g1, h0>>10, h1>>10)
	if g1 > g0+2 {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines grew from %d to %d:\n%s", g0, g1, buf[:goruntime.Stack(buf, true)])
	}
	// A leak of a single 1 KiB buffer per request would add 1000 KiB.
	if h1 > h0+512<<10 {
		t.Errorf("the live heap grew from %d KiB to %d KiB over %d requests", h0>>10, h1>>10, n)
	}
}
