package runtime

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"hybrid/models/llama"
	"hybrid/ops"
)

// BenchResult is one llama-bench-style measurement: a prefill of PromptTokens
// random tokens and a decode of GenTokens tokens, each timed over Reps runs.
type BenchResult struct {
	PromptTokens int `json:"n_prompt"`
	GenTokens    int `json:"n_gen"`
	// Depth is how many tokens were in the KV cache before each timed run
	// (llama-bench's -d): the prompt is prefilled, and decode starts, at
	// that position.
	Depth       int       `json:"n_depth"`
	Reps        int       `json:"reps"`
	PrefillTokS []float64 `json:"prefill_tokens_per_s"`
	DecodeTokS  []float64 `json:"decode_tokens_per_s"`
	// DecodeWeightBytes is what one decode step reads of the weights: every
	// mat-mul's matrix whole, one row of the embedding. Times decode tok/s it
	// is the weight traffic, to compare with the machine's read bandwidth.
	DecodeWeightBytes int64 `json:"decode_weight_bytes"`
	// ChainDepth is the most decode steps queued at once before their
	// picks were read (a GPU that keeps its picks; 0 where each step
	// waited for the one before).
	ChainDepth int `json:"chain_depth"`
	// Ops, when asked for (BenchSession's breakdown), is where a decode
	// step's time went, measured after the timed runs.
	Ops *Breakdown `json:"decode_ops,omitempty"`
	// Devices names the devices that ran it (Executor.DeviceList), for a
	// caller to print; `hybrid bench --json` leaves it out.
	Devices string `json:"-"`
}

// BenchCPU is what `hybrid bench` measures without policies: Bench of m on
// a cpu-only session of threads CPU threads (0: every core) whose context
// just fits the run (within the model's context: CheckContext).
//
// depth > 0 measures at that depth of the KV cache (llama-bench's -d);
// override allows the context it needs past the model's (CheckContext).
func BenchCPU(m *llama.Model, threads, nPrompt, nGen, depth, reps int, override bool) (*BenchResult, error) {
	return BenchSession(m, SessionOptions{Policy: "cpu-only", Threads: threads, ContextOverride: override}, nPrompt, nGen, depth, reps, false)
}

// BenchSession is BenchCPU in a session of so's policy, devices and threads
// (`hybrid bench -d D --policies P` with one policy: a decode at depth on a
// GPU); its Context is set to what the run needs.
//
// breakdown adds the decode step's time by op (Executor.DecodeBreakdown):
// nGen more tokens at the same depth, after the timed runs.
func BenchSession(m *llama.Model, so SessionOptions, nPrompt, nGen, depth, reps int, breakdown bool) (*BenchResult, error) {
	if err := checkBench(nPrompt, nGen, reps); err != nil {
		return nil, err
	}
	if depth < 0 || depth > MaxContext {
		return nil, fmt.Errorf("runtime: bench depth %d: want 0..%d tokens", depth, MaxContext)
	}
	so.Context = depth + max(nPrompt, nGen, 1)
	sess, err := NewSession(m, so)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	r, err := sess.Exec.BenchDepth(nPrompt, nGen, depth, reps, 42)
	if err != nil {
		return nil, err
	}
	if breakdown && nGen > 0 {
		if r.Ops, err = sess.Exec.DecodeBreakdown(nGen, depth, 43); err != nil {
			return nil, err
		}
	}
	r.DecodeWeightBytes, err = DecodeWeightBytes(m)
	return r, err
}

// DecodeWeightBytes is the weight bytes a decode step of m reads: every
// weight of a mat-mul in full, and of the others (the embedding, norms) what
// the op's cost model says it reads.
func DecodeWeightBytes(m *llama.Model) (int64, error) {
	g, err := m.Graph(1, 0, 1)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, op := range g.Ops {
		if op.Weight == nil {
			continue
		}
		if op.Kind == ops.MatMul {
			n += op.Weight.Bytes()
			continue
		}
		c := ops.CostOf(g, op)
		for _, in := range op.In {
			c.BytesRead -= g.Values[in].Bytes()
		}
		n += max(c.BytesRead, 0)
	}
	return n, nil
}

// Bench measures prefill and decode speed the way llama.cpp's llama-bench does:
// random tokens (no tokenizer, no sampling cost), a fresh context per run, the
// prefill and the decode timed separately, decode starting from an empty cache.
func (e *Executor) Bench(nPrompt, nGen, reps int, seed uint64) (*BenchResult, error) {
	return e.BenchDepth(nPrompt, nGen, 0, reps, seed)
}

// BenchDepth is Bench with depth tokens prefilled, untimed, before each
// timed run, which then starts at position depth: llama-bench's -d, which
// measures attention over a long cache.
func (e *Executor) BenchDepth(nPrompt, nGen, depth, reps int, seed uint64) (*BenchResult, error) {
	if err := checkBench(nPrompt, nGen, reps); err != nil {
		return nil, err
	}
	if depth < 0 || depth+max(nPrompt, nGen) > e.ctx {
		return nil, fmt.Errorf("runtime: bench of %d/%d tokens at depth %d does not fit the context of %d", nPrompt, nGen, depth, e.ctx)
	}
	r := rand.New(rand.NewPCG(seed, 1))
	toks := func(n int) []int32 { return e.randomTokens(r, n) }
	res := &BenchResult{PromptTokens: nPrompt, GenTokens: nGen, Depth: depth, Reps: reps, Devices: e.DeviceList()}
	fill := func() error {
		if depth == 0 {
			return nil
		}
		_, err := e.Prefill(toks(depth), 0)
		return err
	}
	// One untimed warm-up of each kind, as llama-bench does: the prompt's
	// (at the timed runs' depth, so that its steps are compiled and, on a
	// GPU, their graphs captured) and a decode step's.
	if nPrompt > 0 {
		if err := fill(); err != nil {
			return nil, err
		}
		if _, err := e.Prefill(toks(nPrompt), depth); err != nil {
			return nil, err
		}
	}
	if _, err := e.Forward(toks(1), 0); err != nil {
		return nil, err
	}
	for i := 0; i < reps; i++ {
		if nPrompt > 0 {
			if err := fill(); err != nil {
				return nil, err
			}
			p := toks(nPrompt)
			t := time.Now()
			if _, err := e.Prefill(p, depth); err != nil {
				return nil, err
			}
			res.PrefillTokS = append(res.PrefillTokS, float64(nPrompt)/time.Since(t).Seconds())
		}
		if nGen > 0 {
			if err := fill(); err != nil {
				return nil, err
			}
			el, err := e.greedyDecode(toks(1)[0], depth, nGen)
			if err != nil {
				return nil, err
			}
			res.DecodeTokS = append(res.DecodeTokS, float64(nGen)/el.Seconds())
		}
	}
	res.ChainDepth = e.Stats.ChainDepth
	return res, nil
}

// randomTokens returns n token ids drawn by r from the model's vocabulary.
func (e *Executor) randomTokens(r *rand.Rand, n int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(r.IntN(e.m.Config.Vocab))
	}
	return t
}

// greedyDecode decodes n tokens at positions from.., the first tok and each
// next the greedy choice of the step before, and returns how long it took.
func (e *Executor) greedyDecode(tok int32, from, n int) (time.Duration, error) {
	t := time.Now()
	chain, err := e.newStepChain()
	if err != nil {
		return 0, err
	}
	for pos := from; pos < from+n; pos++ {
		if tok, err = chain.step(tok, pos, from+n-1-pos, nil); err != nil {
			chain.close()
			return 0, err
		}
	}
	return time.Since(t), chain.close()
}

// checkBench checks a bench's sizes before a session is sized from them.
func checkBench(nPrompt, nGen, reps int) error {
	if nPrompt < 0 || nGen < 0 || reps < 1 || reps > MaxBenchReps {
		return fmt.Errorf("runtime: bench of %d prompt and %d generated tokens, %d reps: want n-prompt >= 0, n-gen >= 0 and reps 1..%d", nPrompt, nGen, reps, MaxBenchReps)
	}
	return nil
}

// MeanStd is the mean and sample standard deviation of xs.
func MeanStd(xs []float64) (mean, sd float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) > 1 {
		for _, x := range xs {
			sd += (x - mean) * (x - mean)
		}
		sd = math.Sqrt(sd / float64(len(xs)-1))
	}
	return mean, sd
}
