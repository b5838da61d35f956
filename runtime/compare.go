package runtime

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"hybrid/devices"
	"hybrid/models/llama"
	"hybrid/ops"
	"hybrid/planner"
)

// CompareOptions say which policies ComparePolicies measures and how.
type CompareOptions struct {
	Policies []string // policy names or files, in the order of the rows
	Hardware string   // hardware profile whose devices are added, simulated; "" for none
	Threads  int      // CPU threads per CPU device
	CPUs     int      // separate CPU devices
	// Conversions are the fp16 conversion designs to run each policy under
	// ("boundary", "per-op"; SessionOptions.Conversions); none is the
	// default design alone.
	Conversions []string
	// Prompt and Gen are the tokens prefilled and decoded per repetition,
	// Reps the repetitions (Executor.Bench).
	Prompt, Gen, Reps int
	// MicroBatch is SessionOptions.MicroBatch.
	MicroBatch int
}

// Comparison is the result of ComparePolicies, the document `hybrid bench
// --policies` prints as JSON.
type Comparison struct {
	Model  string `json:"model"`
	Prompt int    `json:"n_prompt"`
	Gen    int    `json:"n_gen"`
	Reps   int    `json:"reps"`
	// Hardware and HardwareSource are the profile's file and where its
	// numbers come from; empty where no device is simulated.
	Hardware       string        `json:"hardware,omitempty"`
	HardwareSource string        `json:"hardware_source,omitempty"`
	Policies       []PolicyBench `json:"policies"`
}

// PolicyBench is one policy's row of a Comparison.
type PolicyBench struct {
	Policy    string         `json:"policy"`
	Devices   string         `json:"devices"`
	Simulated bool           `json:"simulated"`
	Placement map[string]int `json:"placement"`
	// Conversions is the design of the fp16 devices' conversions the run
	// was charged for (boundary or per-op); FP16Ops is how many ops of a
	// decode step ran on an fp16 device (when none did, the design makes
	// no difference and only the first mode asked for is run).
	Conversions string `json:"conversions"`
	FP16Ops     int    `json:"fp16_ops"`
	// PrefillTokS and DecodeTokS are llama-bench-style speeds, wall time on
	// this machine.
	PrefillTokS    float64 `json:"prefill_tokens_per_s"`
	DecodeTokS     float64 `json:"decode_tokens_per_s"`
	CopiesPerToken float64 `json:"copies_per_token"`
	BytesPerToken  float64 `json:"bytes_per_token"`
	PredictedMS    float64 `json:"predicted_ms_per_token"`
	// AccountedMS is the decode step's time as the executor records it: op
	// times (modelled on simulated devices) plus copy times.
	AccountedMS float64 `json:"accounted_ms_per_token"`
	// AccountedPrefillTokS and AccountedDecodeTokS are the speeds at the
	// accounted times: where every device is simulated, the simulated
	// speed.
	AccountedPrefillTokS float64 `json:"accounted_prefill_tokens_per_s"`
	AccountedDecodeTokS  float64 `json:"accounted_decode_tokens_per_s"`
	// ConvertMS is the part of AccountedMS charged for fp16 conversion
	// passes (zero with conversions at the boundary).
	ConvertMS float64 `json:"convert_ms_per_token"`
	// WallMS is the decode step's wall time on this machine.
	WallMS float64 `json:"wall_ms_per_token"`
	// Peaks is the most memory each device that keeps it (a GPU) held
	// during the runs, by device name.
	Peaks map[string]devices.MemoryPeak `json:"memory_peaks,omitempty"`
}

// ComparePolicies runs m under each policy and each conversion design in
// turn, one session at a time, and measures every run the same way
// (benchPolicy). A design other than the first is skipped for a policy that
// places no op on an fp16 device: it would be the same run again.
func ComparePolicies(m *llama.Model, o CompareOptions) (*Comparison, error) {
	modes := o.Conversions
	if len(modes) == 0 {
		modes = []string{"boundary"}
	}
	c := &Comparison{Model: m.Path, Prompt: o.Prompt, Gen: o.Gen, Reps: o.Reps}
	ctx := max(o.Prompt, o.Gen, 1)
	for _, pol := range o.Policies {
		for i, mode := range modes {
			sess, err := NewSession(m, SessionOptions{Policy: pol, Hardware: o.Hardware, Threads: o.Threads,
				CPUs: o.CPUs, Context: ctx, Conversions: mode, MicroBatch: o.MicroBatch})
			if err != nil {
				return nil, err
			}
			if hw := sess.Hardware; hw != nil {
				c.Hardware, c.HardwareSource = hw.Path, hw.Source
			}
			if i > 0 && fp16Ops(sess) == 0 {
				sess.Close()
				continue
			}
			r, err := benchPolicy(sess, o.Prompt, o.Gen, o.Reps)
			sess.Close()
			if err != nil {
				return nil, fmt.Errorf("policy %s: %w", pol, err)
			}
			r.Conversions = mode
			c.Policies = append(c.Policies, r)
		}
	}
	return c, nil
}

// benchPolicy measures one session: llama-bench-style prefill and decode
// speed, then a decode-only pass with fresh counters for the per-token copies
// and the accounted time.
func benchPolicy(s *Session, nPrompt, nGen, reps int) (PolicyBench, error) {
	ex := s.Exec
	r := PolicyBench{Policy: s.Policy.Name, Devices: ex.DeviceList(), Placement: s.Plan.Placement(),
		PredictedMS: float64(s.Plan.Predicted) / 1e6, FP16Ops: fp16Ops(s), Conversions: "boundary",
		ConvertMS: float64(convertTime(s, s.Plan)) / 1e6}
	for _, d := range ex.Devices() {
		r.Simulated = r.Simulated || d.Info().Simulated
	}
	res, err := ex.Bench(nPrompt, nGen, reps, 42)
	if err != nil {
		return r, err
	}
	r.PrefillTokS, _ = MeanStd(res.PrefillTokS)
	r.DecodeTokS, _ = MeanStd(res.DecodeTokS)
	if nPrompt > 0 {
		// One prefill with fresh counters for its accounted time.
		rng := rand.New(rand.NewPCG(7, 1))
		toks := make([]int32, nPrompt)
		for i := range toks {
			toks[i] = int32(rng.IntN(s.Model.Config.Vocab))
		}
		ex.ResetStats()
		if _, err := ex.Prefill(toks, 0); err != nil {
			return r, err
		}
		if acc := accounted(ex.Stats); acc > 0 {
			r.AccountedPrefillTokS = float64(nPrompt) / acc.Seconds()
		}
	}
	ex.ResetStats()
	t0 := time.Now()
	if _, err := ex.Bench(0, nGen, 1, 7); err != nil {
		return r, err
	}
	wall := time.Since(t0)
	st := ex.Stats
	steps := float64(max(st.Steps, 1))
	r.CopiesPerToken = float64(st.Copies.Count) / steps
	r.BytesPerToken = float64(st.Copies.Bytes) / steps
	acc := accounted(st)
	r.AccountedMS = float64(acc) / steps / 1e6
	if acc > 0 {
		r.AccountedDecodeTokS = steps / acc.Seconds()
	}
	r.WallMS = float64(wall) / steps / 1e6
	r.Peaks = MemoryPeaks(ex.Devices())
	return r, nil
}

// MemoryPeaks is what each of devs that keeps it (devices.PeakReporter: a
// GPU) held at its peak, by device name; nil where none does.
func MemoryPeaks(devs []devices.Device) map[string]devices.MemoryPeak {
	var out map[string]devices.MemoryPeak
	for _, d := range devs {
		if pr, ok := d.(devices.PeakReporter); ok {
			if out == nil {
				out = map[string]devices.MemoryPeak{}
			}
			out[d.Name()] = pr.MemoryPeak()
		}
	}
	return out
}

// accounted is the time the executor recorded: op times (modelled on
// simulated devices) plus copy times.
func accounted(st Stats) time.Duration {
	var acc time.Duration
	for _, d := range st.Devices {
		acc += d.Time
	}
	return acc + st.Copies.Time
}

// fp16Ops counts the ops of the session's decode plan placed on an fp16
// device.
func fp16Ops(s *Session) int {
	prec := map[string]string{}
	for _, d := range s.Plan.Devices {
		prec[d.Name] = d.Precision
	}
	n := 0
	for _, d := range s.Plan.Device {
		if prec[d] == "f16" {
			n++
		}
	}
	return n
}

// converter is implemented by the devices whose modelled op times include
// fp16 conversion passes (the simulated ones): ConvertTime is that part.
type converter interface {
	ConvertTime(*ops.Op) time.Duration
}

// convertTime is what p's ops are charged for conversion passes in a step of
// p's graph, on the session's devices (zero unless an fp16 device converts
// per op).
func convertTime(s *Session, p *planner.Plan) time.Duration {
	conv := map[string]converter{}
	for _, d := range s.Devices {
		if c, ok := d.(converter); ok {
			conv[d.Name()] = c
		}
	}
	var t time.Duration
	for i, op := range p.Graph.Ops {
		if c := conv[p.Device[i]]; c != nil {
			t += c.ConvertTime(op)
		}
	}
	return t
}

// DeviceList names the executor's devices joined by "+", each simulated one
// marked "(simulated)".
func (e *Executor) DeviceList() string {
	var ns []string
	for _, d := range e.Devices() {
		n := d.Name()
		if d.Info().Simulated {
			n += " (simulated)"
		}
		ns = append(ns, n)
	}
	return strings.Join(ns, "+")
}
