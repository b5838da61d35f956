//go:build cuda

package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"hybrid/devices"
	"hybrid/devices/cuda"
	"hybrid/models/llama"
	"hybrid/ops"
)

// openGPUs opens the CUDA devices, closed when tb ends; tb is skipped
// where there are none.
func openGPUs(tb testing.TB) []devices.Device {
	devs, err := cuda.Open()
	if errors.Is(err, devices.ErrNotAvailable) {
		tb.Skipf("skipping: %v", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		for _, d := range devs {
			d.Close()
		}
	})
	return devs
}

// TestCUDASequences checks steps of several sequences on the GPU: prompts
// prefilled into four slots' cells, then batched decode steps, against each
// sequence run alone on a GPU executor of its own (logits bit for bit: a
// batch's mat-vecs compute each row as its decode step does), and that an
// Engine's greedy streams on four slots run.
func TestCUDASequences(t *testing.T) {
	devs := openGPUs(t)
	m := builtinModel(t)
	const slots, cells = 4, 128
	x, err := NewPlanExecutor(m, devs[:1], slots*cells, Options{})
	if err != nil {
		t.Fatal(err)
	}
	prompts := []string{"Once upon a time", "The cat", "Lily and Tom went to the park. They", "One day"}
	var next []int32
	var rows []ops.Row
	var alone [][]float32
	// The references first: executors on one device share its KV cache,
	// so a reference run would overwrite slot 0's cells.
	for i, p := range prompts {
		toks := m.Tokenizer.Encode(p, true)
		ref, err := NewPlanExecutor(m, devs[:1], cells, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ref.Forward(toks, 0); err != nil {
			t.Fatal(err)
		}
		tok := int32(100 + 7*i)
		l, err := ref.Forward([]int32{tok}, len(toks))
		if err != nil {
			t.Fatal(err)
		}
		alone = append(alone, append([]float32(nil), l...))
		next = append(next, tok)
		rows = append(rows, ops.Row{Pos: len(toks), Base: i * cells})
	}
	for i, p := range prompts {
		if _, err := x.ForwardSeq(m.Tokenizer.Encode(p, true), 0, i*cells); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 { // a batch seen again replays as a graph
		// Only the first round's rows match the references; later rounds
		// check that replays run at all.
		logits, err := x.ForwardRows(next, rows)
		if err != nil {
			t.Fatal(err)
		}
		if round > 0 {
			continue
		}
		v := m.Config.Vocab
		for i := range prompts {
			got, want := logits[i*v:(i+1)*v], alone[i]
			var maxAbs, maxErr float64
			for j := range want {
				maxAbs = math.Max(maxAbs, math.Abs(float64(want[j])))
				maxErr = math.Max(maxErr, math.Abs(float64(got[j]-want[j])))
			}
			t.Logf("row %d: max |Δlogit| %.3g of max |logit| %.3g", i, maxErr, maxAbs)
			if maxErr != 0 {
				t.Errorf("row %d (%q): batched logits differ from the sequence alone by %.3g of max %.3g", i, prompts[i], maxErr, maxAbs)
			}
		}
		for i := range rows {
			rows[i].Pos++
		}
	}
	// The engine end to end: four slots, eight greedy requests.
	e, err := NewEngine(x, EngineOptions{Slots: slots, Queue: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	done := make(chan error, 8)
	for i := range 8 {
		go func() {
			n := 0
			_, err := e.Generate(context.Background(), Request{Prompt: m.Tokenizer.Encode(prompts[i%4], true), MaxTokens: 20, Sampler: SamplerConfig{TopP: 1, RepeatPenalty: 1}},
				func(int32) bool { n++; return true })
			if err == nil && n == 0 {
				err = errors.New("no tokens")
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestCUDASampledPicks checks sampled decoding on the GPU with the device's
// picks (devices.TopKer, and for samplers without a repeat penalty the
// sampled tokens themselves, chained: devices.SampleChainer) against the
// same with the logits read back (noDeviceTopK): Generate alone, and an
// engine's four sampled requests at once (the last one alone chained)
// against each one's Generate, token for token.
func TestCUDASampledPicks(t *testing.T) {
	devs := openGPUs(t)
	m := builtinModel(t)
	const cells = 128
	prompts := []string{"Once upon a time", "The cat", "Lily and Tom went to the park. They", "One day"}
	cfgs := []SamplerConfig{
		{Temp: 0.8, TopK: 40, TopP: 0.95, RepeatPenalty: 1.1, RepeatLastN: 64, Seed: 1},
		{Temp: 1.5, TopK: 200, TopP: 1, RepeatPenalty: 1, Seed: 2},
		{Temp: 0, TopP: 1, RepeatPenalty: 1.3, RepeatLastN: 16, Seed: 3},
		{Temp: 1, TopK: 3, TopP: 0.5, RepeatPenalty: 1, Seed: 4},
	}
	want := make([][]int32, len(prompts))
	toks := make([][]int32, len(prompts))
	for _, host := range []bool{true, false} {
		noDeviceTopK = host
		for i, p := range prompts {
			x, err := NewPlanExecutor(m, devs[:1], cells, Options{})
			if err != nil {
				t.Fatal(err)
			}
			r, err := x.Generate(GenerateOptions{Prompt: p, MaxTokens: 40, Sampler: cfgs[i]})
			if err != nil {
				t.Fatal(err)
			}
			if host {
				want[i], toks[i] = r.Tokens, r.PromptTokens
			} else if !slices.Equal(r.Tokens, want[i]) {
				t.Fatalf("prompt %d: Generate with the device's picks %v, with the logits %v", i, r.Tokens, want[i])
			}
		}
	}
	noDeviceTopK = false
	x, err := NewPlanExecutor(m, devs[:1], len(prompts)*cells, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine(x, EngineOptions{Slots: len(prompts), Queue: len(prompts)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	got := make([][]int32, len(prompts))
	errs := make([]error, len(prompts))
	var wg sync.WaitGroup
	for i := range prompts {
		wg.Go(func() {
			_, errs[i] = e.Generate(context.Background(), Request{Prompt: toks[i], MaxTokens: 40, Sampler: cfgs[i]},
				func(id int32) bool { got[i] = append(got[i], id); return true })
		})
	}
	wg.Wait()
	for i := range prompts {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("request %d: engine %v, Generate %v", i, got[i], want[i])
		}
	}
}

// BenchmarkCUDARows measures batched decode steps on the GPU: rows
// sequences, each prefilled with 64 tokens in its own cells, stepped
// together; tok/s is rows·steps per second. HYBRID_BENCH_MODEL names the
// GGUF file (the built-in model without it).
func BenchmarkCUDARows(b *testing.B) {
	devs := openGPUs(b)
	m, err := LoadModel(os.Getenv("HYBRID_BENCH_MODEL"), nil)
	if err != nil {
		b.Fatal(err)
	}
	const slots, cells, prompt = 16, 256, 64
	x, err := NewPlanExecutor(m, devs[:1], slots*cells, Options{})
	if err != nil {
		b.Fatal(err)
	}
	toks := make([]int32, prompt)
	for i := range toks {
		toks[i] = int32(1 + i%(m.Config.Vocab-1))
	}
	for s := range slots {
		if _, err := x.ForwardSeq(toks, 0, s*cells); err != nil {
			b.Fatal(err)
		}
	}
	for _, n := range []int{1, 2, 4, 8, 16} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			rows := make([]ops.Row, n)
			next := make([]int32, n)
			reset := func() {
				for i := range rows {
					rows[i] = ops.Row{Pos: prompt, Base: i * cells}
					next[i] = int32(7 + i)
				}
			}
			reset()
			step := func() {
				if rows[0].Pos == cells {
					reset()
				}
				if _, err := x.ForwardRows(next, rows); err != nil {
					b.Fatal(err)
				}
				for i := range rows {
					rows[i].Pos++
				}
			}
			for range 4 { // the first steps capture the graph
				step()
			}
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				step()
			}
			b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "tok/s")
		})
	}
}

// BenchmarkCUDAEngine runs what bench/cuda/serve.sh asks of a server,
// without HTTP: closed-loop streams, each sending greedy requests one after
// another, prompts of a different length each (so that every prefill is a
// new shape), 128 tokens each, greedy or with llama.cpp's default sampling,
// on an Engine with a slot per stream. It reports aggregate generated
// tok/s, and the mean prefill and time to first token (queue + prefill).
func BenchmarkCUDAEngine(b *testing.B) {
	devs := openGPUs(b)
	m, err := LoadModel(os.Getenv("HYBRID_BENCH_MODEL"), nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"greedy", "sampled"} {
		sc := SamplerConfig{TopP: 1, RepeatPenalty: 1}
		if mode == "sampled" {
			sc = DefaultSampler()
		}
		for _, streams := range []int{1, 4, 16} {
			benchEngine(b, m, devs[0], mode, streams, sc)
		}
	}
}

func benchEngine(b *testing.B, m *llama.Model, dev devices.Device, mode string, streams int, sc SamplerConfig) {
	const ctx, gen = 4096, 128
	b.Run(fmt.Sprintf("%s/streams=%d", mode, streams), func(b *testing.B) {
		x, err := NewPlanExecutor(m, []devices.Device{dev}, ctx, Options{})
		if err != nil {
			b.Fatal(err)
		}
		e, err := NewEngine(x, EngineOptions{Slots: streams, Queue: streams})
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close(context.Background())
		serial := 0
		prompt := func() []int32 {
			serial++
			p := make([]int32, 56+serial%17)
			p[0] = 1
			for i := 1; i < len(p); i++ {
				p[i] = int32(2 + (serial*131+i*7)%(m.Config.Vocab-2))
			}
			return p
		}
		run := func(requests int) (toks int, prefill, ttft float64, el time.Duration) {
			var mu sync.Mutex
			var wg sync.WaitGroup
			ps := make([][]int32, requests)
			for i := range ps {
				ps[i] = prompt()
			}
			t0 := time.Now()
			for s := range streams {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for r := s; r < requests; r += streams {
						f, err := e.Generate(context.Background(), Request{Prompt: ps[r], MaxTokens: gen, Sampler: sc}, func(int32) bool { return true })
						if err != nil {
							b.Error(err)
							return
						}
						mu.Lock()
						toks += f.Tokens
						prefill += f.PrefillMs
						ttft += f.QueueMs + f.PrefillMs
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			return toks, prefill / float64(requests), ttft / float64(requests), time.Since(t0)
		}
		run(streams) // warm: graphs, the batched steps' compiles
		b.ResetTimer()
		var toks int
		var prefill, ttft float64
		var el time.Duration
		for range b.N {
			t, p, f, d := run(2 * streams)
			toks, prefill, ttft, el = toks+t, prefill+p, ttft+f, el+d
		}
		b.ReportMetric(float64(toks)/el.Seconds(), "tok/s")
		b.ReportMetric(prefill/float64(b.N), "prefill-ms")
		b.ReportMetric(ttft/float64(b.N), "ttft-ms")
	})
}

// BenchmarkCUDAPrefillShapes times a short prompt's prefill on the GPU in
// its parts: compiling the step of a new length (its graph, placement and
// buffers), its first run, its second (a graph captured) and later ones (a
// graph replayed), for prompts of about 16 to 512 tokens.
func BenchmarkCUDAPrefillShapes(b *testing.B) {
	devs := openGPUs(b)
	m, err := LoadModel(os.Getenv("HYBRID_BENCH_MODEL"), nil)
	if err != nil {
		b.Fatal(err)
	}
	x, err := NewPlanExecutor(m, devs[:1], 4096, Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := x.ForwardSeq([]int32{1}, 0, 0); err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{16, 64, 128, 256, 512} {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			var el [5]time.Duration // compile, then runs 1 to 4
			for i := range b.N {
				toks := make([]int32, n+i%2) // a new length each time
				for j := range toks {
					toks[j] = int32(1 + (j*7+i)%(m.Config.Vocab-1))
				}
				t0 := time.Now()
				if _, err := x.compile(stepKey{n: len(toks)}); err != nil {
					b.Fatal(err)
				}
				el[0] += time.Since(t0)
				for r := 1; r < len(el); r++ {
					t0 = time.Now()
					if _, err := x.PrefillSeq(toks, 0, 0); err != nil {
						b.Fatal(err)
					}
					el[r] += time.Since(t0)
				}
			}
			for r, name := range []string{"compile", "first", "second", "third", "fourth"} {
				b.ReportMetric(float64(el[r].Microseconds())/1e3/float64(b.N), name+"-ms")
			}
		})
	}
}
