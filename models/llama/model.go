package llama

import (
	"fmt"
	"math"

	"hybrid/models/gguf"
	"hybrid/models/tokenizer"
	"hybrid/ops"
	"hybrid/quant"
)

// Model is an opened Llama GGUF file: its config, tokenizer and tensors, with
// tensor data left in the file's memory mapping.
type Model struct {
	Path      string
	File      *gguf.File
	Config    Config
	Tokenizer *tokenizer.Tokenizer
	Types     map[string]quant.Type
	tensors   map[string]*gguf.TensorInfo
}

// Load opens and checks the model at path.
func Load(path string) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := FromFile(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	return m, nil
}

// FromFile builds a Model over an already parsed GGUF file; name is used in
// errors.
func FromFile(f *gguf.File, name string) (*Model, error) {
	m := &Model{Path: name, File: f, Types: map[string]quant.Type{}, tensors: map[string]*gguf.TensorInfo{}}
	shapes := map[string]TensorShape{}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		m.tensors[ti.Name] = ti
		m.Types[ti.Name] = ti.Type
		shapes[ti.Name] = TensorShape{Type: ti.Type, Dims: ti.Dims}
	}
	var err error
	if m.Config, err = ConfigFrom(f, shapes); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if m.Config.HasRopeFreqs {
		// ConfigFrom checked the tensor is F32 of RopeDims/2 values, so
		// its bytes are exactly that many.
		raw := f.TensorData(m.tensors[RopeFreqsTensor])
		fs := make([]float32, m.Config.RopeDims/2)
		if err := quant.Dequantize(quant.F32, raw, fs); err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %w", name, RopeFreqsTensor, err)
		}
		for i, v := range fs {
			if !(v > 0) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("%s: tensor %s: factor %d is %g, want a positive finite number", name, RopeFreqsTensor, i, v)
			}
		}
		m.Config.RopeFreqs = fs
	}
	if m.Tokenizer, err = tokenizer.FromGGUF(f); err != nil {
		return nil, err // it names the file
	}
	if v := m.Tokenizer.VocabSize(); v != m.Config.Vocab {
		return nil, fmt.Errorf("%s: the tokenizer has %d tokens but token_embd.weight has %d rows", name, v, m.Config.Vocab)
	}
	return m, nil
}

// TensorData returns the bytes of the named tensor, in place in the mapping.
func (m *Model) TensorData(name string) ([]byte, error) {
	ti, ok := m.tensors[name]
	if !ok {
		return nil, fmt.Errorf("%s: tensor %s is missing", m.Path, name)
	}
	return m.File.TensorData(ti), nil
}

// Graph builds the op graph of a step of n tokens after past tokens, with a KV
// cache of ctx positions.
func (m *Model) Graph(n, past, ctx int) (*ops.Graph, error) {
	return Build(m.Config, m.Types, n, past, ctx)
}

// RowsGraph builds the graph of a batched step of n sequences decoding one
// token each, in a KV cache of ctx cells (BuildRows).
func (m *Model) RowsGraph(n, ctx int) (*ops.Graph, error) {
	return BuildRows(m.Config, m.Types, n, ctx)
}

// WeightBytes is the total size of the tensors the model reads, at rest.
func (m *Model) WeightBytes() int64 {
	var n int64
	for _, w := range m.Config.Weights() {
		if ti, ok := m.tensors[w.Name]; ok {
			n += int64(len(m.File.TensorData(ti)))
		}
	}
	return n
}

// Close releases the file mapping.
func (m *Model) Close() error { return m.File.Close() }
