package verify

import (
	"fmt"
	"math"
	"path/filepath"

	"hybrid/models/builtin"
	"hybrid/quant"
	"hybrid/runtime"
)

// GenOptions configure the generation checks.
type GenOptions struct {
	Hardware string // hardware profile for the policies' sessions
	Threads  int
	CPUs     int
	Tokens   int    // 0: 32
	Prompt   string // "": "Once upon a time"
}

// Trace is a greedy generation: each picked token (the last may be an
// end-of-generation token) and the logits it was picked from.
type Trace struct {
	Prompt []int32
	Picks  []int32
	Logits [][]float32
}

// Greedy runs ex on prompt and picks the argmax n times, stopping after an
// end-of-generation token.
func Greedy(ex *runtime.Executor, prompt []int32, n int, eog func(int32) bool) (*Trace, error) {
	tr := &Trace{Prompt: prompt}
	logits, err := ex.Prefill(prompt, 0)
	if err != nil {
		return nil, err
	}
	pos := len(prompt)
	for len(tr.Picks) < n {
		id := runtime.Greedy(logits)
		tr.Picks = append(tr.Picks, id)
		tr.Logits = append(tr.Logits, append([]float32(nil), logits...))
		if eog(id) || len(tr.Picks) == n || pos >= ex.Context() {
			break
		}
		if logits, err = ex.Forward([]int32{id}, pos); err != nil {
			return nil, err
		}
		pos++
	}
	return tr, nil
}

// Divergence is the first step where two greedy runs pick different tokens.
type Divergence struct {
	Step              int
	Want, Got         int32   // the reference's pick and the candidate's
	WantRef, GotRef   float32 // the reference's logits of the two
	WantCand, GotCand float32 // the candidate's logits of the two
	Tie               bool    // the reference's margin between them is below the tie margin
}

func (d *Divergence) String() string {
	s := fmt.Sprintf("step %d: cpu-only picks %d (logit %.5g; here %.5g), this run %d (logit %.5g; cpu-only %.5g)",
		d.Step, d.Want, d.WantRef, d.WantCand, d.Got, d.GotCand, d.GotRef)
	if d.Tie {
		s += ": a near tie, where either token is right; the comparison ends there"
	}
	return s
}

// Follow runs ex along ref's tokens (each step is fed the reference's pick,
// so the logits of every step are comparable) and returns how many picks
// agree, the largest logit difference relative to the reference's largest
// logit before the first disagreement, and that disagreement, if any. A
// disagreement where the reference's two logits are within tie of each
// other is a near tie (the README's rule for matching llama.cpp).
func Follow(ex *runtime.Executor, ref *Trace, tie float64) (int, float64, *Divergence, error) {
	logits, err := ex.Prefill(ref.Prompt, 0)
	if err != nil {
		return 0, 0, nil, err
	}
	pos := len(ref.Prompt)
	worst := 0.0
	for i, want := range ref.Picks {
		rl := ref.Logits[i]
		if len(logits) != len(rl) {
			return i, worst, nil, fmt.Errorf("step %d: %d logits, the reference has %d", i, len(logits), len(rl))
		}
		worst = max(worst, maxAbsDiff(logits, rl)/math.Max(MaxAbs(rl), 1e-30))
		if got := runtime.Greedy(logits); got != want {
			d := &Divergence{Step: i, Want: want, Got: got, WantRef: rl[want], GotRef: rl[got], WantCand: logits[want], GotCand: logits[got]}
			d.Tie = float64(rl[want])-float64(rl[got]) < tie
			return i, worst, d, nil
		}
		if i == len(ref.Picks)-1 {
			break
		}
		if logits, err = ex.Forward([]int32{want}, pos); err != nil {
			return i + 1, worst, nil, err
		}
		pos++
	}
	return len(ref.Picks), worst, nil, nil
}

// Generation loads the model at path ("" for the built-in one), makes the
// cpu-only greedy trace, and follows it under each policy, one result per
// policy. The error is for a model that cannot be loaded or run on the CPU.
func Generation(path string, policies []string, o GenOptions) ([]Result, error) {
	if o.Tokens <= 0 {
		o.Tokens = 32
	}
	if o.Prompt == "" {
		o.Prompt = "Once upon a time"
	}
	m, err := runtime.LoadModel(path, nil)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	name := filepath.Base(path)
	if path == "" {
		name = builtin.Name
	}
	prompt := m.Tokenizer.Encode(o.Prompt, true)
	ctx := min(m.Config.Context, max(512, len(prompt)+o.Tokens))
	refSess, err := runtime.NewSession(m, runtime.SessionOptions{Policy: "cpu-only", Threads: o.Threads, Context: ctx})
	if err != nil {
		return nil, fmt.Errorf("verify: %s on cpu-only: %w", name, err)
	}
	ref, err := Greedy(refSess.Exec, prompt, o.Tokens, m.Tokenizer.IsEOG)
	refSess.Close()
	if err != nil {
		return nil, fmt.Errorf("verify: %s on cpu-only: %w", name, err)
	}
	tie := 0.02
	if quantized(m.Types) {
		tie = 0.1
	}
	var out []Result
	for _, pol := range policies {
		r := Result{Part: "generate", Name: name + " " + pol, Metric: "max|Δlogit|/max|logit|"}
		s, err := runtime.NewSession(m, runtime.SessionOptions{Policy: pol, Hardware: o.Hardware, Threads: o.Threads, CPUs: o.CPUs, Context: ctx})
		if err != nil {
			r.Metric, r.Status, r.Note = "", Fail, err.Error()
			out = append(out, r)
			continue
		}
		same, worst, div, err := Follow(s.Exec, ref, tie)
		placement := s.Plan.PlacementText()
		s.Close()
		r.Err = worst
		switch {
		case err != nil:
			r.Status, r.Note = Fail, fmt.Sprintf("after %d tokens: %v", same, err)
		case div != nil && !div.Tie:
			r.Status, r.Note = Fail, div.String()
		case div != nil:
			r.Status, r.Note = Pass, fmt.Sprintf("%d of %d tokens as cpu-only, then %s", same, len(ref.Picks), div)
		default:
			r.Status, r.Note = Pass, fmt.Sprintf("%d of %d tokens as cpu-only", same, len(ref.Picks))
		}
		r.Note += "; ops on " + placement
		out = append(out, r)
	}
	return out, nil
}

// quantized reports whether any tensor is stored in a block type (the
// README's looser tie margin applies).
func quantized(types map[string]quant.Type) bool {
	for _, t := range types {
		if t != quant.F32 && t != quant.F16 && t != quant.BF16 {
			return true
		}
	}
	return false
}
