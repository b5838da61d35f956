package runtime

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"hybrid/devices"
)

// SamplerConfig chooses how the next token is picked from the logits. The
// stages run in llama.cpp's default order: repeat penalty, top-k, top-p,
// temperature, then a seeded draw. Temp <= 0 is greedy (argmax).
type SamplerConfig struct {
	Temp          float32
	TopK          int     // 0 keeps all
	TopP          float32 // 1 keeps all
	RepeatPenalty float32 // 1 is off
	RepeatLastN   int     // how many recent tokens the penalty looks at
	Seed          uint64
}

// DefaultSampler is llama.cpp's default sampling setup.
func DefaultSampler() SamplerConfig {
	return SamplerConfig{Temp: 0.8, TopK: 40, TopP: 0.95, RepeatPenalty: 1, RepeatLastN: 64, Seed: 0}
}

// Validate checks the ranges of the settings.
func (c SamplerConfig) Validate() error {
	switch {
	case math.IsNaN(float64(c.Temp)) || c.Temp < 0:
		return fmt.Errorf("sampler: temperature %g must be >= 0", c.Temp)
	case c.TopK < 0:
		return fmt.Errorf("sampler: top-k %d must be >= 0", c.TopK)
	case !(c.TopP > 0 && c.TopP <= 1):
		return fmt.Errorf("sampler: top-p %g must be in (0, 1]", c.TopP)
	case !(c.RepeatPenalty > 0):
		return fmt.Errorf("sampler: repeat penalty %g must be > 0", c.RepeatPenalty)
	case c.RepeatLastN < 0:
		return fmt.Errorf("sampler: repeat-last-n %d must be >= 0", c.RepeatLastN)
	}
	return nil
}

// Sampler picks tokens; it is not safe for concurrent use.
type Sampler struct {
	cfg  SamplerConfig
	rng  *rand.Rand
	cand []candidate
	top  []candidate // topK's heap
	// back holds draws handed out (draw) for picks that were then not
	// made, given back (undraw) oldest first: the next picks take them
	// before the generator's, so that each pick takes the same draw
	// wherever it is made.
	back []float32
}

// draw is the next of the sampler's uniform draws in [0, 1): one a sampled
// pick.
func (s *Sampler) draw() float32 {
	if len(s.back) > 0 {
		r := s.back[0]
		s.back = s.back[1:]
		return r
	}
	return s.rng.Float32()
}

// undraw gives back draws (oldest first) that draw handed out for picks not
// made, ahead of any given back before them: they were handed out later.
func (s *Sampler) undraw(ds []float32) {
	s.back = append(append(make([]float32, 0, len(ds)+len(s.back)), ds...), s.back...)
}

// Chained reports whether a device that picks sampled tokens itself
// (devices.SampleChainer) can make this sampler's picks, and with what
// settings (Draw left to each pick): a temperature, no repeat penalty (it
// reads the history, which the device does not keep) and top-k of 1 to
// devices.MaxPicks.
func (s *Sampler) Chained() (devices.SampleSpec, bool) {
	c := s.cfg
	if c.Temp <= 0 || s.penalty() || c.TopK < 1 || c.TopK > devices.MaxPicks {
		return devices.SampleSpec{}, false
	}
	return devices.SampleSpec{K: c.TopK, TopP: c.TopP, Temp: c.Temp}, true
}

type candidate struct {
	id    int32
	logit float32
	p     float32
}

// NewSampler returns a sampler for cfg.
func NewSampler(cfg SamplerConfig) (*Sampler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Sampler{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}, nil
}

// Greedy returns the index of the largest logit (the lowest index on ties).
func Greedy(logits []float32) int32 {
	best := 0
	for i, l := range logits {
		if l > logits[best] {
			best = i
		}
	}
	return int32(best)
}

// Greedy reports whether the sampler picks the largest logit whatever the
// history (no temperature, no repeat penalty), so that a device may pick it
// (Executor.ForwardGreedy).
func (s *Sampler) Greedy() bool {
	c := s.cfg
	return c.Temp <= 0 && (c.RepeatPenalty == 1 || c.RepeatLastN <= 0)
}

// Sample picks the next token from logits given the tokens so far (for the
// repeat penalty). It does not modify logits.
func (s *Sampler) Sample(logits []float32, history []int32) int32 {
	if s.cfg.Temp <= 0 && !s.penalty() {
		return Greedy(logits)
	}
	s.cand = s.cand[:0]
	nan := false
	for i, l := range logits {
		s.cand = append(s.cand, candidate{id: int32(i), logit: l})
		nan = nan || l != l
	}
	if s.penalty() {
		seen := map[int32]bool{}
		for i := max(0, len(history)-s.cfg.RepeatLastN); i < len(history); i++ {
			t := history[i]
			if t < 0 || int(t) >= len(s.cand) || seen[t] {
				continue
			}
			seen[t] = true
			s.cand[t].logit = s.penalize(s.cand[t].logit)
		}
	}
	return s.pick(s.cand, nan)
}

// penalty reports whether the repeat penalty applies.
func (s *Sampler) penalty() bool { return s.cfg.RepeatPenalty != 1 && s.cfg.RepeatLastN > 0 }

// penalize is the repeat penalty of a logit: toward 0 if it is positive,
// away from it otherwise.
func (s *Sampler) penalize(l float32) float32 {
	if l > 0 {
		return l / s.cfg.RepeatPenalty
	}
	return l * s.cfg.RepeatPenalty
}

// Needs is how many of a row's largest logits (devices.TopKer's picks,
// largest first and equal ones by lower index) the next pick needs, given
// the tokens so far; 0 when it needs the whole row. The k best after the
// repeat penalty, which only lowers logits when it is above 1, are among
// the k + w best before it, w being the tokens it looks at: any other token
// is not penalized and has k + w tokens above it, at least k of them not
// penalized.
func (s *Sampler) Needs(history []int32) int {
	c := s.cfg
	k := c.TopK
	if c.Temp <= 0 {
		k = 1
	}
	if k == 0 {
		return 0
	}
	if s.penalty() {
		if c.RepeatPenalty < 1 {
			return 0 // it raises penalized logits: any of them could enter
		}
		k += min(c.RepeatLastN, len(history))
	}
	return k
}

// SampleTop is Sample given only a row's m largest logits, largest first
// and equal ones by lower index (devices.TopKer's picks, NaN-free), where m
// >= Needs(history): the same pick from the same draws.
func (s *Sampler) SampleTop(top []devices.Pick, history []int32) int32 {
	if s.cfg.Temp <= 0 && !s.penalty() {
		return top[0].Index
	}
	s.cand = s.cand[:0]
	for _, p := range top {
		s.cand = append(s.cand, candidate{id: p.Index, logit: p.Value})
	}
	if s.penalty() {
		seen := map[int32]bool{}
		for i := max(0, len(history)-s.cfg.RepeatLastN); i < len(history); i++ {
			seen[history[i]] = true
		}
		for i := range s.cand {
			if seen[s.cand[i].id] {
				s.cand[i].logit = s.penalize(s.cand[i].logit)
			}
		}
	}
	return s.pick(s.cand, false)
}

// pick draws from candidates cand (after the repeat penalty), whose ids
// are distinct, in any order: the largest logit (the lowest id on ties)
// without temperature, else top-k, top-p and temperature, then a seeded
// draw. nan says whether a logit is a NaN.
func (s *Sampler) pick(cand []candidate, nan bool) int32 {
	c := s.cfg
	if c.Temp <= 0 {
		best := 0
		for i := range cand {
			if cand[i].logit > cand[best].logit || cand[i].logit == cand[best].logit && cand[i].id < cand[best].id {
				best = i
			}
		}
		return cand[best].id
	}
	if c.TopK > 0 && c.TopK < len(cand) && !nan {
		// The k best alone, in the order the whole sort gives them.
		cand = s.topK(cand, c.TopK)
	} else {
		if nan {
			// No order holds with a NaN: the sort Sample always made.
			sort.SliceStable(cand, func(i, j int) bool { return cand[i].logit > cand[j].logit })
		} else {
			// The stable sort's order, as a total one (equal logits by
			// id), so that an unstable sort gives it: the reflective
			// stable sort took 44 ms for 32000 candidates on the CI kind.
			slices.SortFunc(cand, func(a, b candidate) int {
				switch {
				case a.logit > b.logit:
					return -1
				case a.logit < b.logit:
					return 1
				}
				return int(a.id - b.id)
			})
		}
		if c.TopK > 0 && c.TopK < len(cand) {
			cand = cand[:c.TopK]
		}
	}
	softmax(cand, 1)
	if c.TopP < 1 {
		var cum float32
		for i := range cand {
			cum += cand[i].p
			if cum >= c.TopP {
				cand = cand[:i+1]
				break
			}
		}
	}
	softmax(cand, c.Temp)
	r := s.draw()
	var cum float32
	for _, x := range cand {
		cum += x.p
		if r < cum {
			return x.id
		}
	}
	return cand[len(cand)-1].id
}

// topK returns the k best of cand (NaN-free, distinct ids) in the order a
// stable sort by descending logit puts them first (equal logits by id):
// a heap of the k best so far, its root the worst of them, then those k
// sorted. For a vocabulary of 32000 and k of 40 this takes a fraction of
// the whole sort (BenchmarkSample).
func (s *Sampler) topK(cand []candidate, k int) []candidate {
	// worse reports whether a comes after b in the sorted order.
	worse := func(a, b candidate) bool { return a.logit < b.logit || a.logit == b.logit && a.id > b.id }
	h := s.top[:0]
	down := func(i int) {
		for {
			w, l, r := i, 2*i+1, 2*i+2
			if l < len(h) && worse(h[l], h[w]) {
				w = l
			}
			if r < len(h) && worse(h[r], h[w]) {
				w = r
			}
			if w == i {
				return
			}
			h[i], h[w] = h[w], h[i]
			i = w
		}
	}
	for _, x := range cand {
		if len(h) < k {
			h = append(h, x)
			for i := len(h) - 1; i > 0 && worse(h[i], h[(i-1)/2]); i = (i - 1) / 2 {
				h[i], h[(i-1)/2] = h[(i-1)/2], h[i]
			}
			continue
		}
		if worse(h[0], x) {
			h[0] = x
			down(0)
		}
	}
	sort.Slice(h, func(i, j int) bool { return worse(h[j], h[i]) })
	s.top = h
	return h
}

// softmax fills p of candidates sorted by descending logit, at temperature
// t. A device that makes the pick (devices.SampleSpec) does these same
// operations in this order, with sampleExp.
func softmax(cand []candidate, t float32) {
	var sum float64
	for i := range cand {
		e := sampleExp(float64((cand[i].logit - cand[0].logit) / t))
		cand[i].p = float32(e)
		sum += e
	}
	for i := range cand {
		cand[i].p = float32(float64(cand[i].p) / sum)
	}
}

// sampleExp is e^x for the sampler's softmax: the classic reduction x =
// k·ln2 + r with ln2 in two parts, a rational approximation of e^r, and the
// scaling by 2^k, in float64 operations each rounded (the conversions keep
// a compiler from fusing a product into an addition), so that a GPU doing
// the same operations (kernels/ops.cu's sample_exp) gets the same bits and,
// with the same draws, the same picks. Within two ulps of math.Exp
// (TestSampleExp). Below -708, where e^x is under the smallest normal
// float64, it is 0: such a term rounds to 0 as a float32 probability and
// leaves the softmax's sum, at least the largest candidate's term of 1,
// unchanged.
func sampleExp(x float64) float64 {
	const (
		ln2Hi = 6.93147180369123816490e-01
		ln2Lo = 1.90821492927058770002e-10
		log2e = 1.44269504088896338700e+00
		p1    = 1.66666666666666657415e-01
		p2    = -2.77777777770155933842e-03
		p3    = 6.61375632143793436117e-05
		p4    = -1.65339022054652515390e-06
		p5    = 4.13813679705723846039e-08
	)
	switch {
	case x != x:
		return x
	case x > 7.09782712893383973096e+02:
		return math.Inf(1)
	case x < -708:
		return 0
	case x > -1.0/(1<<28) && x < 1.0/(1<<28):
		return 1 + x
	}
	// k, the nearest integer to x/ln2 (the conversion truncates).
	var k int
	if x < 0 {
		k = int(float64(log2e*x) - 0.5)
	} else {
		k = int(float64(log2e*x) + 0.5)
	}
	kf := float64(k)
	hi := x - float64(kf*ln2Hi) // exact: ln2Hi's low bits are zero
	lo := float64(kf * ln2Lo)
	r := hi - lo
	t := float64(r * r)
	q := float64(t*p5) + p4
	q = float64(t*q) + p3
	q = float64(t*q) + p2
	q = float64(t*q) + p1
	c := r - float64(t*q)
	y := 1 - ((lo - float64(r*c)/(2-c)) - hi)
	// y·2^k in two exact steps, 2^(k/2) each (-1021 <= k <= 1024).
	h := k / 2
	y = float64(y * math.Float64frombits(uint64(h+1023)<<52))
	return float64(y * math.Float64frombits(uint64(k-h+1023)<<52))
}
