// Package llama reads a Llama-family model's configuration from GGUF metadata and
// builds the op graph of its forward step (a prefill of n tokens, or a decode of 1).
package llama

import (
	"fmt"

	"hybrid/quant"
)

// Metadata is the part of a GGUF file's metadata the config reads.
type Metadata interface {
	String(key string) (string, bool)
	Uint(key string) (uint64, bool)
	Float(key string) (float64, bool)
}

// TensorShape is a tensor's type and GGUF dims (dims[0] is the contiguous row).
type TensorShape struct {
	Type quant.Type
	Dims []uint64
}

// Config is the typed hyper-parameter set of a Llama model.
type Config struct {
	Arch       string
	Layers     int
	Dim        int // embedding width
	Heads      int
	KVHeads    int
	HeadDim    int
	FFN        int
	RopeDims   int     // rotated features per head
	RopeBase   float32 // θ
	Eps        float32 // RMSNorm epsilon
	Context    int     // training context length
	Vocab      int
	TiedOutput bool // the output projection reuses token_embd
}

// Limits that keep a hostile file from sizing absurd allocations: far above any
// real Llama (405B has 126 layers, 16384 wide, 53248 FFN, 128256 vocabulary).
const (
	maxLayers  = 1024
	maxDim     = 1 << 17
	maxVocab   = 1 << 22
	maxContext = 1 << 24
)

// ConfigFrom reads the config from metadata and checks it against the tensors
// the file holds. Errors name the metadata key or tensor at fault.
func ConfigFrom(md Metadata, tensors map[string]TensorShape) (Config, error) {
	var c Config
	arch, ok := md.String("general.architecture")
	if !ok {
		return c, fmt.Errorf("llama: metadata key general.architecture is missing")
	}
	if arch != "llama" {
		return c, fmt.Errorf("llama: general.architecture is %q; only \"llama\" is supported", arch)
	}
	c.Arch = arch
	var err error
	get := func(key string, def int, max int) int {
		if err != nil {
			return 0
		}
		v, ok := md.Uint(arch + "." + key)
		if !ok {
			if def >= 0 {
				return def
			}
			err = fmt.Errorf("llama: metadata key %s.%s is missing", arch, key)
			return 0
		}
		if v == 0 || v > uint64(max) {
			err = fmt.Errorf("llama: metadata key %s.%s = %d is out of range (1..%d)", arch, key, v, max)
			return 0
		}
		return int(v)
	}
	c.Layers = get("block_count", -1, maxLayers)
	c.Dim = get("embedding_length", -1, maxDim)
	c.Heads = get("attention.head_count", -1, maxDim)
	c.KVHeads = get("attention.head_count_kv", c.Heads, maxDim)
	c.FFN = get("feed_forward_length", -1, 4*maxDim)
	c.Context = get("context_length", 2048, maxContext)
	if err != nil {
		return c, err
	}
	if c.Dim%c.Heads != 0 {
		return c, fmt.Errorf("llama: embedding_length %d is not a multiple of attention.head_count %d", c.Dim, c.Heads)
	}
	if c.Heads%c.KVHeads != 0 {
		return c, fmt.Errorf("llama: attention.head_count %d is not a multiple of attention.head_count_kv %d", c.Heads, c.KVHeads)
	}
	c.HeadDim = c.Dim / c.Heads
	c.RopeDims = get("rope.dimension_count", c.HeadDim, c.HeadDim)
	if err != nil {
		return c, err
	}
	if c.RopeDims%2 != 0 {
		return c, fmt.Errorf("llama: %s.rope.dimension_count %d is odd", arch, c.RopeDims)
	}
	c.RopeBase = 10000
	if v, ok := md.Float(arch + ".rope.freq_base"); ok {
		if !(v > 0) {
			return c, fmt.Errorf("llama: %s.rope.freq_base %g is not positive", arch, v)
		}
		c.RopeBase = float32(v)
	}
	c.Eps = 1e-5
	if v, ok := md.Float(arch + ".attention.layer_norm_rms_epsilon"); ok {
		if !(v > 0 && v < 1) {
			return c, fmt.Errorf("llama: %s.attention.layer_norm_rms_epsilon %g is out of range", arch, v)
		}
		c.Eps = float32(v)
	}

	emb, ok := tensors["token_embd.weight"]
	if !ok {
		return c, fmt.Errorf("llama: tensor token_embd.weight is missing")
	}
	if len(emb.Dims) != 2 || emb.Dims[0] != uint64(c.Dim) || emb.Dims[1] == 0 || emb.Dims[1] > maxVocab {
		return c, fmt.Errorf("llama: tensor token_embd.weight has dims %v, want [%d, vocab]", emb.Dims, c.Dim)
	}
	c.Vocab = int(emb.Dims[1])
	if v, ok := md.Uint(arch + ".vocab_size"); ok && v != uint64(c.Vocab) {
		return c, fmt.Errorf("llama: %s.vocab_size %d differs from token_embd.weight's %d rows", arch, v, c.Vocab)
	}
	_, hasOut := tensors["output.weight"]
	c.TiedOutput = !hasOut
	for _, w := range c.Weights() {
		t, ok := tensors[w.Name]
		if !ok {
			return c, fmt.Errorf("llama: tensor %s is missing", w.Name)
		}
		want := []uint64{uint64(w.Cols), uint64(w.Rows)}
		if w.Rows == 1 {
			want = want[:1]
		}
		if !sameDims(t.Dims, want) {
			return c, fmt.Errorf("llama: tensor %s has dims %v, want %v", w.Name, t.Dims, want)
		}
		if !t.Type.Supported() {
			return c, fmt.Errorf("llama: tensor %s has type %s, which hybrid cannot decode", w.Name, t.Type)
		}
		if _, err := quant.RowBytes(t.Type, w.Cols); err != nil {
			return c, fmt.Errorf("llama: tensor %s: %w", w.Name, err)
		}
	}
	return c, nil
}

func sameDims(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// WeightShape is a tensor the model needs, with its matrix shape.
type WeightShape struct {
	Name       string
	Rows, Cols int
}

// Weights lists every tensor the model reads, with the shape it must have.
func (c Config) Weights() []WeightShape {
	kv := c.KVHeads * c.HeadDim
	ws := []WeightShape{{"token_embd.weight", c.Vocab, c.Dim}}
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		ws = append(ws,
			WeightShape{p + "attn_norm.weight", 1, c.Dim},
			WeightShape{p + "attn_q.weight", c.Dim, c.Dim},
			WeightShape{p + "attn_k.weight", kv, c.Dim},
			WeightShape{p + "attn_v.weight", kv, c.Dim},
			WeightShape{p + "attn_output.weight", c.Dim, c.Dim},
			WeightShape{p + "ffn_norm.weight", 1, c.Dim},
			WeightShape{p + "ffn_gate.weight", c.FFN, c.Dim},
			WeightShape{p + "ffn_up.weight", c.FFN, c.Dim},
			WeightShape{p + "ffn_down.weight", c.Dim, c.FFN},
		)
	}
	ws = append(ws, WeightShape{"output_norm.weight", 1, c.Dim})
	if !c.TiedOutput {
		ws = append(ws, WeightShape{"output.weight", c.Vocab, c.Dim})
	}
	return ws
}

// OutputWeight is the tensor the final projection reads.
func (c Config) OutputWeight() string {
	if c.TiedOutput {
		return "token_embd.weight"
	}
	return "output.weight"
}
