package runtime

import (
	"fmt"
	"strings"
	"time"

	"hybrid/devices"
)

// GenerateOptions configures one generation.
type GenerateOptions struct {
	Prompt    string
	MaxTokens int // tokens to generate at most
	Sampler   SamplerConfig
	// KeepLogits keeps the whole vocabulary's logits after the prompt.
	KeepLogits bool
	// OnText, if set, receives the generated text as it is produced, in pieces
	// that are always whole UTF-8 sequences.
	OnText func(string)
}

// Timings are the wall-clock costs of a generation. Decoding counts each
// step after the prompt and the picking of every token.
type Timings struct {
	PrefillMs     float64 `json:"prefill_ms"`
	DecodeMs      float64 `json:"decode_ms"`
	PrefillTokS   float64 `json:"prefill_tokens_per_s"`
	DecodeTokS    float64 `json:"decode_tokens_per_s"`
	DecodedTokens int     `json:"decoded_tokens"`
}

// Result is what a generation produced.
type Result struct {
	PromptTokens []int32
	Tokens       []int32
	Text         string
	FirstLogits  []float32
	StopReason   string // "eos", "length" or "context"
	Timings      Timings
}

// Generate tokenizes the prompt, runs prefill and then decodes until EOS, the
// token limit or the end of the context.
func (e *Executor) Generate(o GenerateOptions) (*Result, error) {
	if o.MaxTokens < 0 {
		return nil, fmt.Errorf("runtime: -n %d must be >= 0", o.MaxTokens)
	}
	s, err := NewSampler(o.Sampler)
	if err != nil {
		return nil, err
	}
	tok := e.m.Tokenizer
	prompt := tok.Encode(o.Prompt, true)
	if len(prompt) == 0 {
		return nil, fmt.Errorf("runtime: the prompt is empty and the model adds no BOS token")
	}
	if len(prompt) > e.ctx {
		return nil, fmt.Errorf("runtime: the prompt is %d tokens, longer than the context of %d tokens (use a larger --ctx or a shorter prompt)", len(prompt), e.ctx)
	}
	r := &Result{PromptTokens: prompt, StopReason: "length"}
	t0 := time.Now()
	logits, err := e.Prefill(prompt, 0)
	if err != nil {
		return nil, err
	}
	r.Timings.PrefillMs = ms(time.Since(t0))
	r.Timings.PrefillTokS = float64(len(prompt)) / time.Since(t0).Seconds()
	if o.KeepLogits {
		r.FirstLogits = append([]float32(nil), logits...)
	}
	stream := tok.NewStream(false)
	var text strings.Builder
	emit := func(s string) {
		text.WriteString(s)
		if o.OnText != nil && s != "" {
			o.OnText(s)
		}
	}
	history := append([]int32(nil), prompt...)
	pos := len(prompt)
	var decodeTime time.Duration
	// A pure greedy pick (no temperature, no repeat penalty) is the
	// largest logit: the device picks it, and the step after a pick is
	// queued before the pick is read back where the device keeps its picks
	// (stepChain); so too a sampled pick where the device makes it.
	next := int32(-1)
	chain, err := e.newStepChain()
	if err != nil {
		return nil, err
	}
	defer chain.close()
	cs, chained := chain.takes(s) // cs: the chain's sampler, nil for greedy picks
	// A sampled pick needs only the best few logits where the device can
	// pick them (ForwardTop): then picks holds them and logits is nil.
	var picks, buf []devices.Pick
	for len(r.Tokens) < o.MaxTokens {
		id := next
		if id < 0 {
			// Picking a token counts as decoding (llama.cpp times it apart).
			t := time.Now()
			if picks != nil {
				id = s.SampleTop(picks, history)
			} else {
				id = s.Sample(logits, history)
			}
			decodeTime += time.Since(t)
		}
		if tok.IsEOG(id) {
			r.StopReason = "eos"
			break
		}
		r.Tokens = append(r.Tokens, id)
		history = append(history, id)
		emit(stream.Add(id))
		if len(r.Tokens) == o.MaxTokens {
			break
		}
		if pos >= e.ctx {
			r.StopReason = "context"
			break
		}
		t := time.Now()
		if chained {
			next, err = chain.step(id, pos, o.MaxTokens-len(r.Tokens)-1, cs)
		} else {
			picks, logits, err = e.ForwardTop([]int32{id}, pos, s.Needs(history), buf)
			if picks != nil {
				buf = picks
			}
		}
		if err != nil {
			return nil, err
		}
		decodeTime += time.Since(t)
		r.Timings.DecodedTokens++
		pos++
	}
	emit(stream.Flush())
	r.Text = text.String()
	r.Timings.DecodeMs = ms(decodeTime)
	if r.Timings.DecodedTokens > 0 {
		r.Timings.DecodeTokS = float64(r.Timings.DecodedTokens) / decodeTime.Seconds()
	}
	return r, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
