package synth

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	goruntime "runtime"
	"strings"
	"sync"

	"hybrid/models/builtin"
	"hybrid/models/gguf"
	"hybrid/models/llama"
	"hybrid/quant"
)

// Options says what Write makes.
type Options struct {
	Preset Preset
	Type   FileType
	Seed   uint64
	// Threads quantizes rows in parallel; 0 means GOMAXPROCS. The output does
	// not depend on it.
	Threads int
	// Progress, if not nil, receives the bytes written so far and the file's
	// size.
	Progress func(done, total int64)
	// Vocab, if not nil, is the tokenizer.* metadata to write (VocabKVs)
	// in place of the generated vocabulary; its token count must be the
	// preset's. A preset with VocabFrom needs it.
	Vocab []gguf.KV
}

// Config is the llama config a preset describes, with its rope factors.
func (p Preset) Config() llama.Config {
	hd := p.HeadSize()
	c := llama.Config{
		Arch: p.Architecture(), Layers: p.Layers, Dim: p.Dim, Heads: p.Heads, KVHeads: p.KVHeads,
		HeadDim: hd, FFN: p.FFN, RopeDims: hd, RopeBase: p.RopeBase,
		Eps: p.Eps, Context: p.Context, Vocab: p.Vocab, TiedOutput: p.Tied,
		RopeNeox: llama.ArchNeox(p.Architecture()), QKNorm: llama.ArchQKNorm(p.Architecture()),
	}
	if f := p.RopeFreqs(); f != nil {
		c.HasRopeFreqs, c.RopeFreqs = true, f
	}
	if p.QKVBias {
		c.Biases = map[string]bool{}
		for l := 0; l < p.Layers; l++ {
			for _, w := range []string{"attn_q", "attn_k", "attn_v"} {
				c.Biases[fmt.Sprintf("blk.%d.%s.bias", l, w)] = true
			}
		}
	}
	return c
}

// std is the standard deviation of a weight's values: matrices keep
// activations at unit scale (1/sqrt(fan-in)); the projections that write into
// the residual stream (attn_output, ffn_down) are further scaled by
// 1/sqrt(2·layers), as GPT-2 initialises them, so that the stream grows
// slowly and a rounding difference in one layer is damped rather than
// amplified by the next; the output projection is wider (logits of standard
// deviation about 8) so that greedy decoding meets few near-ties and two
// implementations can be compared over many steps; embeddings are unit
// normal.
func std(name string, cols, layers int) float32 {
	base := 1 / float32(math.Sqrt(float64(cols)))
	switch {
	case name == "token_embd.weight":
		return 1
	case name == "output.weight":
		return 8 * base
	case strings.HasSuffix(name, ".attn_output.weight"), strings.HasSuffix(name, ".ffn_down.weight"):
		return base / float32(math.Sqrt(float64(2*layers)))
	}
	return base
}

// layerOf returns the block index in a tensor name "blk.N.…", or -1.
func layerOf(name string) int {
	var l int
	var rest string
	if n, _ := fmt.Sscanf(name, "blk.%d.%s", &l, &rest); n == 2 {
		return l
	}
	return -1
}

// Plan returns the metadata and tensor infos of the file Write makes.
func Plan(o Options) ([]gguf.KV, []gguf.TensorInfo, error) {
	p, ft := o.Preset, o.Type
	if (p.HeadDim == 0 && p.Dim%p.Heads != 0) || p.Heads%p.KVHeads != 0 {
		return nil, nil, fmt.Errorf("synth: preset %s: width %d, %d heads and %d KV heads do not divide", p.Name, p.Dim, p.Heads, p.KVHeads)
	}
	if p.VocabFrom != "" && o.Vocab == nil {
		return nil, nil, fmt.Errorf("synth: preset %s needs a vocabulary file (--vocab): %s", p.Name, p.VocabFrom)
	}
	if o.Vocab != nil {
		if p.Pre != "" {
			o.Vocab = withPre(o.Vocab, p.Pre)
		}
		if n := vocabSize(o.Vocab); n != p.Vocab {
			return nil, nil, fmt.Errorf("synth: preset %s: the vocabulary has %d tokens, the preset %d", p.Name, n, p.Vocab)
		}
	}
	kvs, err := metadata(p, ft, o.Vocab)
	if err != nil {
		return nil, nil, err
	}
	types := ft.Types(p)
	var infos []gguf.TensorInfo
	if f := p.RopeFreqs(); f != nil {
		// First, as llama.cpp's converter writes its extra tensors.
		infos = append(infos, gguf.TensorInfo{Name: llama.RopeFreqsTensor, Type: quant.F32, Dims: []uint64{uint64(len(f))}})
	}
	for _, w := range p.Config().Weights() {
		ti := gguf.TensorInfo{Name: w.Name, Type: types[w.Name]}
		if w.Rows == 1 {
			ti.Dims = []uint64{uint64(w.Cols)}
		} else {
			ti.Dims = []uint64{uint64(w.Cols), uint64(w.Rows)}
		}
		infos = append(infos, ti)
	}
	return kvs, infos, nil
}

// Types is the type of each weight of preset p's model in file type ft, as
// Write stores it: vectors F32, matrices by ft's recipe (TensorType). With
// llama.Build it gives the model's op graph without writing the file.
func (ft FileType) Types(p Preset) map[string]quant.Type {
	types := map[string]quant.Type{}
	for _, w := range p.Config().Weights() {
		types[w.Name] = quant.F32
		if w.Rows > 1 {
			types[w.Name] = ft.TensorType(w.Name, layerOf(w.Name), p.Layers, w.Cols, p.Tied)
		}
	}
	return types
}

// Write writes the synthetic model to path, atomically (gguf.Create): a
// failed write leaves no file behind, nor does an interrupted one in a
// program that calls atomicfile.Cleanup on SIGINT and SIGTERM, as hybrid
// does. A path that is not a regular file is refused before any weight is
// made.
func Write(path string, o Options) error {
	kvs, infos, err := Plan(o)
	if err != nil {
		return err
	}
	w, err := gguf.Create(path, kvs, infos)
	if err != nil {
		return err
	}
	w.Progress = o.Progress
	if err := writeTensors(w, infos, o); err != nil {
		w.Abort()
		return err
	}
	return w.Close()
}

// chunkBytes bounds the memory one batch of quantized rows takes.
const chunkBytes = 16 << 20

func writeTensors(w *gguf.Writer, infos []gguf.TensorInfo, o Options) error {
	threads := o.Threads
	if threads <= 0 {
		threads = goruntime.GOMAXPROCS(0)
	}
	for _, ti := range infos {
		if ti.Name == llama.RopeFreqsTensor {
			// Not a weight: the factors the preset's rope scaling gives.
			f := o.Preset.RopeFreqs()
			b := make([]byte, 4*len(f))
			for i, v := range f {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
			continue
		}
		cols := int(ti.Dims[0])
		rows := 1
		if len(ti.Dims) > 1 {
			rows = int(ti.Dims[1])
		}
		rowBytes, err := quant.RowBytes(ti.Type, cols)
		if err != nil {
			return fmt.Errorf("synth: %s: %w", ti.Name, err)
		}
		per := max(1, chunkBytes/rowBytes)
		buf := make([]byte, min(per, rows)*rowBytes)
		for r0 := 0; r0 < rows; r0 += per {
			n := min(per, rows-r0)
			out := buf[:n*rowBytes]
			if err := fillRows(ti, o.Seed, cols, o.Preset.Layers, r0, n, out, threads); err != nil {
				return err
			}
			if _, err := w.Write(out); err != nil {
				return err
			}
		}
	}
	return nil
}

// fillRows generates and quantizes rows r0..r0+n of a tensor into out.
func fillRows(ti gguf.TensorInfo, seed uint64, cols, layers, r0, n int, out []byte, threads int) error {
	rowBytes := len(out) / n
	sd := std(ti.Name, cols, layers)
	norm := len(ti.Dims) == 1
	var wg sync.WaitGroup
	errs := make([]error, threads)
	for t := 0; t < threads; t++ {
		lo, hi := n*t/threads, n*(t+1)/threads
		if lo == hi {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := make([]float32, cols)
			for i := lo; i < hi; i++ {
				r := newRowRand(seed, ti.Name, r0+i)
				if strings.HasSuffix(ti.Name, ".bias") {
					// Projection biases of either sign; Qwen2's reach
					// well past the weights' scale.
					r.fillNormal(row, 0.5)
				} else if norm {
					// RMSNorm gains near 1, as trained models have.
					r.fillNormal(row, 0.1)
					for j := range row {
						row[j]++
					}
				} else {
					r.fillNormal(row, sd)
				}
				if err := quant.Quantize(ti.Type, row, out[i*rowBytes:(i+1)*rowBytes]); err != nil {
					errs[t] = fmt.Errorf("synth: %s row %d: %w", ti.Name, r0+i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// metadata returns the GGUF metadata of a synthetic model: llama.cpp's keys
// for the architecture, and vocab's tokenizer keys or, when it is nil, the
// built-in model's tokenizer extended with generated pieces to the preset's
// vocabulary size.
func metadata(p Preset, ft FileType, vocab []gguf.KV) ([]gguf.KV, error) {
	u := func(v int) uint32 { return uint32(v) }
	a := p.Architecture()
	kvs := []gguf.KV{
		{Key: "general.architecture", Value: a},
		{Key: "general.name", Value: fmt.Sprintf("synthetic %s %s (seed-determined random weights)", p.Name, ft.Name)},
		{Key: "general.file_type", Value: ft.ID},
		{Key: "general.quantization_version", Value: uint32(2)},
		{Key: a + ".context_length", Value: u(p.Context)},
		{Key: a + ".embedding_length", Value: u(p.Dim)},
		{Key: a + ".block_count", Value: u(p.Layers)},
		{Key: a + ".feed_forward_length", Value: u(p.FFN)},
		{Key: a + ".rope.dimension_count", Value: u(p.HeadSize())},
		{Key: a + ".attention.head_count", Value: u(p.Heads)},
		{Key: a + ".attention.head_count_kv", Value: u(p.KVHeads)},
		{Key: a + ".attention.layer_norm_rms_epsilon", Value: p.Eps},
		{Key: a + ".rope.freq_base", Value: p.RopeBase},
		{Key: a + ".vocab_size", Value: u(p.Vocab)},
	}
	if p.Llama3Rope != nil || p.HeadDim != 0 {
		// llama.cpp's converter writes the head size of models whose
		// config.json gives head_dim, as Llama 3.1+ and Qwen3 do; the
		// older presets' files keep their bytes.
		kvs = append(kvs,
			gguf.KV{Key: a + ".attention.key_length", Value: u(p.HeadSize())},
			gguf.KV{Key: a + ".attention.value_length", Value: u(p.HeadSize())})
	}
	if vocab != nil {
		return append(kvs, vocab...), nil
	}
	tokens, scores, types, err := vocabulary(p.Vocab)
	if err != nil {
		return nil, err
	}
	return append(kvs, []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "llama"},
		{Key: "tokenizer.ggml.tokens", Value: gguf.Array{Type: gguf.TypeString, Values: tokens}},
		{Key: "tokenizer.ggml.scores", Value: gguf.Array{Type: gguf.TypeFloat32, Values: scores}},
		{Key: "tokenizer.ggml.token_type", Value: gguf.Array{Type: gguf.TypeInt32, Values: types}},
		{Key: "tokenizer.ggml.bos_token_id", Value: uint32(1)},
		{Key: "tokenizer.ggml.eos_token_id", Value: uint32(2)},
		{Key: "tokenizer.ggml.unknown_token_id", Value: uint32(0)},
		{Key: "tokenizer.ggml.add_bos_token", Value: true},
		{Key: "tokenizer.ggml.add_eos_token", Value: false},
	}...), nil
}

// vocabulary returns the built-in model's vocabulary extended to n tokens
// with generated word pieces ("▁" and three to six letters, each unique),
// scored below every real piece so that they merge last.
func vocabulary(n int) ([]string, []float32, []int32, error) {
	f, err := gguf.Parse(builtin.Model(), builtin.Name)
	if err != nil {
		return nil, nil, nil, err
	}
	base, err := f.GetStrings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, nil, nil, err
	}
	baseScores, err := f.GetFloat32s("tokenizer.ggml.scores")
	if err != nil {
		return nil, nil, nil, err
	}
	baseTypes, err := f.GetInt32s("tokenizer.ggml.token_type")
	if err != nil {
		return nil, nil, nil, err
	}
	if len(baseScores) != len(base) || len(baseTypes) != len(base) {
		return nil, nil, nil, fmt.Errorf("synth: %s: tokenizer arrays differ in length", builtin.Name)
	}
	if n < len(base) {
		return nil, nil, nil, fmt.Errorf("synth: vocabulary of %d is smaller than the built-in tokenizer's %d", n, len(base))
	}
	tokens := append(make([]string, 0, n), base...)
	scores := append(make([]float32, 0, n), baseScores...)
	types := append(make([]int32, 0, n), baseTypes...)
	low := float32(0)
	seen := make(map[string]bool, n)
	for i, t := range base {
		seen[t] = true
		if baseScores[i] < low {
			low = baseScores[i]
		}
	}
	r := newRowRand(0, "tokenizer.ggml.tokens", 0)
	for len(tokens) < n {
		x := r.next()
		l := 3 + int(x%4)
		x >>= 2
		b := []byte("▁")
		for j := 0; j < l; j++ {
			b = append(b, byte('a'+x%26))
			x /= 26
		}
		s := string(b)
		if seen[s] {
			continue
		}
		seen[s] = true
		tokens = append(tokens, s)
		scores = append(scores, low-1-float32(len(tokens)-len(base)))
		types = append(types, 1)
	}
	return tokens, scores, types, nil
}
