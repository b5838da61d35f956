package runtime

import (
	"hybrid/models/builtin"
	"hybrid/models/gguf"
	"hybrid/models/llama"
)

// Progress receives how many of total bytes a long operation has done.
type Progress func(done, total int64)

// LoadModel opens the GGUF model at path, or the built-in stories260K when path
// is empty, and reads its tensor data once so that the first token does not pay
// for page faults. progress, if not nil, follows that read.
func LoadModel(path string, progress Progress) (*llama.Model, error) {
	if path == "" {
		f, err := gguf.Parse(builtin.Model(), builtin.Name)
		if err != nil {
			return nil, err
		}
		return llama.FromFile(f, builtin.Name)
	}
	m, err := llama.Load(path)
	if err != nil {
		return nil, err
	}
	if err := m.File.Guard(func() { prefault(m, progress) }); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// prefault touches one byte per page of every tensor the model reads.
func prefault(m *llama.Model, progress Progress) {
	total := m.WeightBytes()
	var done int64
	var sink byte
	for _, w := range m.Config.Weights() {
		data, err := m.TensorData(w.Name)
		if err != nil {
			continue
		}
		for i := 0; i < len(data); i += 4096 {
			sink ^= data[i]
		}
		done += int64(len(data))
		if progress != nil {
			progress(done, total)
		}
	}
	_ = sink
}
