// Package llama reads a Llama-family model's configuration from GGUF metadata and
// builds the op graph of its forward step (a prefill of n tokens, or a decode of 1).
package llama

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"hybrid/models/gguf"
	"hybrid/quant"
)

// Metadata is the part of a GGUF file's metadata the config reads. If it
// also has typedMetadata's accessors (a *gguf.File does), a key that holds a
// value of the wrong type is reported as such, with the type found and the
// type wanted, rather than as missing or replaced by a default.
type Metadata interface {
	String(key string) (string, bool)
	Uint(key string) (uint64, bool)
	Float(key string) (float64, bool)
}

// typedMetadata is metadata whose accessors say why a key has no value of
// the wanted type: a *gguf.KeyError, which wraps gguf.ErrMissingKey when the
// key is absent.
type typedMetadata interface {
	GetString(key string) (string, error)
	GetUint(key string) (uint64, error)
	GetFloat(key string) (float64, error)
}

var _ typedMetadata = (*gguf.File)(nil)

// lookupString, lookupUint and lookupFloat return the value under key and
// whether the key is there; a key there with a value of another type is an
// error.
func lookupString(md Metadata, key string) (string, bool, error) {
	if t, ok := md.(typedMetadata); ok {
		v, err := t.GetString(key)
		return typed(v, key, err)
	}
	v, ok := md.String(key)
	return v, ok, nil
}

func lookupUint(md Metadata, key string) (uint64, bool, error) {
	if t, ok := md.(typedMetadata); ok {
		v, err := t.GetUint(key)
		return typed(v, key, err)
	}
	v, ok := md.Uint(key)
	return v, ok, nil
}

func lookupFloat(md Metadata, key string) (float64, bool, error) {
	if t, ok := md.(typedMetadata); ok {
		v, err := t.GetFloat(key)
		return typed(v, key, err)
	}
	v, ok := md.Float(key)
	return v, ok, nil
}

// typed sorts a typed accessor's error: none, a missing key (not an error
// here: the caller knows whether the key has a default), or a wrong type,
// said without the file's path, which the caller of ConfigFrom adds once.
func typed[T any](v T, key string, err error) (T, bool, error) {
	var ke *gguf.KeyError
	switch {
	case err == nil:
		return v, true, nil
	case errors.Is(err, gguf.ErrMissingKey):
		return v, false, nil
	case errors.As(err, &ke) && ke.Msg != "":
		return v, false, fmt.Errorf("llama: metadata key %s %s", key, ke.Msg)
	case errors.As(err, &ke):
		return v, false, fmt.Errorf("llama: metadata key %s is %s, want %s", key, ke.Got, ke.Want)
	}
	return v, false, fmt.Errorf("llama: metadata key %s: %w", key, err)
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
	HeadDim    int // features per head: attention.key_length, by default Dim/Heads
	FFN        int
	RopeDims   int     // rotated features per head
	RopeBase   float32 // θ
	Eps        float32 // RMSNorm epsilon
	Context    int     // training context length
	Vocab      int
	TiedOutput bool // the output projection reuses token_embd
	// HasRopeFreqs says the file holds rope_freqs.weight (RopeDims/2 F32
	// frequency factors: how Llama 3.1+ files express "llama3" rope
	// scaling). ConfigFrom checks its type and shape; the factors
	// themselves are tensor data, which FromFile reads into RopeFreqs.
	HasRopeFreqs bool
	RopeFreqs    []float32
	// RopeNeox pairs feature j of a head with j+RopeDims/2 (llama.cpp's
	// NEOX rope type, which qwen2 and qwen3 use); llama pairs neighbours.
	RopeNeox bool
	// QKNorm says each head of Q and K is RMS-normalised before its rope
	// (qwen3: blk.N.attn_q_norm.weight and attn_k_norm.weight, HeadDim long).
	QKNorm bool
	// Biases holds the names of the optional bias vectors the file has
	// and the architecture adds (blk.N.attn_q.bias, ...), each added to its
	// projection's output as llama.cpp does.
	Biases map[string]bool
}

// Architectures lists the general.architecture values hybrid runs, with
// the tensors each may carry beyond the Llama ones.
var Architectures = []string{"llama", "qwen2", "qwen3"}

// biasesOf lists, per architecture, the projections whose optional bias
// vector llama.cpp's loader reads and its graph adds: the others are
// ignored there, and so here.
var biasesOf = map[string][]string{
	"llama": {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"},
	"qwen2": {"attn_q", "attn_k", "attn_v"},
	"qwen3": {"attn_q", "attn_k", "attn_v"},
}

// ArchNeox reports whether architecture arch rotates in the NEOX pairing
// (llama.cpp's rope type for qwen2 and qwen3).
func ArchNeox(arch string) bool { return arch == "qwen2" || arch == "qwen3" }

// ArchQKNorm reports whether architecture arch RMS-normalises each head of
// Q and K before its rope (qwen3).
func ArchQKNorm(arch string) bool { return arch == "qwen3" }

// BiasOf is the name of the bias vector of the weight named w
// ("blk.0.attn_q.weight" → "blk.0.attn_q.bias").
func BiasOf(w string) string { return strings.TrimSuffix(w, ".weight") + ".bias" }

// HasBias reports whether the model adds a bias after the projection by
// weight w.
func (c Config) HasBias(w string) bool { return c.Biases[BiasOf(w)] }

// RopeFreqsTensor is the tensor of rope frequency factors.
const RopeFreqsTensor = "rope_freqs.weight"

// QDim is the width of the attention's queries (and of its output): head
// size times heads, which need not be the embedding width.
func (c Config) QDim() int { return c.Heads * c.HeadDim }

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
	arch, ok, err := lookupString(md, "general.architecture")
	if err != nil {
		return c, err
	}
	if !ok {
		return c, fmt.Errorf("llama: metadata key general.architecture is missing")
	}
	if !slices.Contains(Architectures, arch) {
		return c, fmt.Errorf("llama: general.architecture is %q; hybrid runs %s", arch, strings.Join(Architectures, ", "))
	}
	c.Arch = arch
	get := func(key string, def int, max int) int {
		if err != nil {
			return 0
		}
		v, ok, e := lookupUint(md, arch+"."+key)
		if e != nil {
			err = e
			return 0
		}
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
	if n, ok, e := lookupUint(md, arch+".expert_count"); e != nil {
		return c, e
	} else if ok && n > 0 {
		return c, fmt.Errorf("llama: %s.expert_count is %d: mixture-of-experts models are not supported", arch, n)
	}
	if c.Heads%c.KVHeads != 0 {
		return c, fmt.Errorf("llama: attention.head_count %d is not a multiple of attention.head_count_kv %d", c.Heads, c.KVHeads)
	}
	// The head size is explicit in files whose heads do not split the
	// embedding evenly (llama.cpp reads the same two keys, with the same
	// default); hybrid's attention has one size for keys and values.
	def := -1
	if c.Dim%c.Heads == 0 {
		def = c.Dim / c.Heads
	} else if _, ok, e := lookupUint(md, arch+".attention.key_length"); e == nil && !ok {
		return c, fmt.Errorf("llama: embedding_length %d is not a multiple of attention.head_count %d and %s.attention.key_length is missing", c.Dim, c.Heads, arch)
	}
	c.HeadDim = get("attention.key_length", def, maxDim)
	vdim := get("attention.value_length", c.HeadDim, maxDim)
	if err != nil {
		return c, err
	}
	if vdim != c.HeadDim {
		return c, fmt.Errorf("llama: %s.attention.key_length %d differs from %s.attention.value_length %d; hybrid needs one head size", arch, c.HeadDim, arch, vdim)
	}
	if uint64(c.Heads)*uint64(c.HeadDim) > 4*maxDim {
		return c, fmt.Errorf("llama: %d heads of %d features (%s.attention.head_count × key_length) are too wide", c.Heads, c.HeadDim, arch)
	}
	c.RopeDims = get("rope.dimension_count", c.HeadDim, c.HeadDim)
	if err != nil {
		return c, err
	}
	if c.RopeDims%2 != 0 {
		return c, fmt.Errorf("llama: %s.rope.dimension_count %d is odd", arch, c.RopeDims)
	}
	c.RopeNeox, c.QKNorm = ArchNeox(arch), ArchQKNorm(arch)
	if c.RopeNeox && c.RopeDims != c.HeadDim {
		// llama.cpp's qwen graphs assert a whole-head rope.
		return c, fmt.Errorf("llama: %s.rope.dimension_count %d is not the head size %d, which %s needs", arch, c.RopeDims, c.HeadDim, arch)
	}
	c.RopeBase = 10000
	base, ok, err := lookupFloat(md, arch+".rope.freq_base")
	if err != nil {
		return c, err
	}
	if ok {
		if !(base > 0) {
			return c, fmt.Errorf("llama: %s.rope.freq_base %g is not positive", arch, base)
		}
		c.RopeBase = float32(base)
	}
	if err := checkRopeScaling(md, arch); err != nil {
		return c, err
	}
	c.Eps = 1e-5
	eps, ok, err := lookupFloat(md, arch+".attention.layer_norm_rms_epsilon")
	if err != nil {
		return c, err
	}
	if ok {
		if !(eps > 0 && eps < 1) {
			return c, fmt.Errorf("llama: %s.attention.layer_norm_rms_epsilon %g is out of range", arch, eps)
		}
		c.Eps = float32(eps)
	}

	emb, ok := tensors["token_embd.weight"]
	if !ok {
		return c, fmt.Errorf("llama: tensor token_embd.weight is missing")
	}
	if len(emb.Dims) != 2 || emb.Dims[0] != uint64(c.Dim) || emb.Dims[1] == 0 || emb.Dims[1] > maxVocab {
		return c, fmt.Errorf("llama: tensor token_embd.weight has dims %v, want [%d, vocab]", emb.Dims, c.Dim)
	}
	c.Vocab = int(emb.Dims[1])
	nv, ok, err := lookupUint(md, arch+".vocab_size")
	if err != nil {
		return c, err
	}
	if ok && nv != uint64(c.Vocab) {
		return c, fmt.Errorf("llama: %s.vocab_size %d differs from token_embd.weight's %d rows", arch, nv, c.Vocab)
	}
	_, hasOut := tensors["output.weight"]
	c.TiedOutput = !hasOut
	if t, ok := tensors[RopeFreqsTensor]; ok {
		if t.Type != quant.F32 {
			return c, fmt.Errorf("llama: tensor %s has type %s, want F32", RopeFreqsTensor, t.Type)
		}
		if !sameDims(t.Dims, []uint64{uint64(c.RopeDims / 2)}) {
			return c, fmt.Errorf("llama: tensor %s has dims %v, want [%d] (rope.dimension_count / 2)", RopeFreqsTensor, t.Dims, c.RopeDims/2)
		}
		c.HasRopeFreqs = true
	}
	if _, ok := tensors["blk.0.attn_qkv.weight"]; ok {
		return c, fmt.Errorf("llama: tensor blk.0.attn_qkv.weight: fused Q/K/V projections are not supported")
	}
	for l := 0; l < c.Layers; l++ {
		for _, p := range biasesOf[arch] {
			name := fmt.Sprintf("blk.%d.%s.bias", l, p)
			if _, ok := tensors[name]; ok {
				if c.Biases == nil {
					c.Biases = map[string]bool{}
				}
				c.Biases[name] = true
			}
		}
	}
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

// checkRopeScaling refuses the rope scalings hybrid does not implement,
// which llama.cpp reads from these keys: any scaling factor other than 1
// (it scales every angle by 1/factor, whatever the type) and any type but
// none or linear (yarn and longrope change the angles and their
// magnitude). Llama 3's "llama3" scaling is not among them: its files
// carry it as rope_freqs.weight and no type.
func checkRopeScaling(md Metadata, arch string) error {
	typ, ok, err := lookupString(md, arch+".rope.scaling.type")
	if err != nil {
		return err
	}
	if ok && typ != "none" && typ != "linear" {
		return fmt.Errorf("llama: %s.rope.scaling.type is %q; hybrid implements no rope scaling but llama3's (rope_freqs.weight)", arch, typ)
	}
	for _, key := range []string{"rope.scaling.factor", "rope.scale_linear", "rope.scaling.attn_factor"} {
		f, ok, err := lookupFloat(md, arch+"."+key)
		if err != nil {
			return err
		}
		// llama.cpp reads a factor of 0 as none.
		if ok && f != 0 && f != 1 {
			return fmt.Errorf("llama: %s.%s is %g; hybrid implements no rope scaling but llama3's (rope_freqs.weight)", arch, key, f)
		}
	}
	return nil
}

// WeightShape is a tensor the model needs, with its matrix shape.
type WeightShape struct {
	Name       string
	Rows, Cols int
}

// Weights lists every tensor the model reads, with the shape it must have.
func (c Config) Weights() []WeightShape {
	kv, q := c.KVHeads*c.HeadDim, c.QDim()
	ws := []WeightShape{{"token_embd.weight", c.Vocab, c.Dim}}
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		layer := []WeightShape{
			{p + "attn_norm.weight", 1, c.Dim},
			{p + "attn_q.weight", q, c.Dim},
			{p + "attn_k.weight", kv, c.Dim},
			{p + "attn_v.weight", kv, c.Dim},
			{p + "attn_output.weight", c.Dim, q},
			{p + "ffn_norm.weight", 1, c.Dim},
			{p + "ffn_gate.weight", c.FFN, c.Dim},
			{p + "ffn_up.weight", c.FFN, c.Dim},
			{p + "ffn_down.weight", c.Dim, c.FFN},
		}
		for _, w := range layer {
			ws = append(ws, w)
			if w.Rows > 1 && c.HasBias(w.Name) {
				ws = append(ws, WeightShape{BiasOf(w.Name), 1, w.Rows})
			}
		}
		if c.QKNorm {
			ws = append(ws, WeightShape{p + "attn_q_norm.weight", 1, c.HeadDim}, WeightShape{p + "attn_k_norm.weight", 1, c.HeadDim})
		}
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
