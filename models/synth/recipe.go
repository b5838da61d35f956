package synth

import (
	"fmt"
	"sort"
	"strings"

	"hybrid/quant"
)

// FileType is a llama.cpp quantization recipe ("ftype"): a default weight type
// plus per-tensor rules, as llama-quantize applies them without an imatrix.
type FileType struct {
	Name  string
	ID    uint32     // general.file_type (llama_ftype)
	Base  quant.Type // type of most 2-D weights
	Mixed int        // 0: llama.cpp's plain rules; 4/5: the Q4_K_M/Q5_K_M bumps
	Pure  bool       // every 2-D weight gets Base (llama-quantize --pure)
}

var fileTypes = []FileType{
	{Name: "F32", ID: 0, Base: quant.F32},
	{Name: "F16", ID: 1, Base: quant.F16},
	{Name: "BF16", ID: 32, Base: quant.BF16},
	{Name: "Q8_0", ID: 7, Base: quant.Q8_0},
	{Name: "Q4_0", ID: 2, Base: quant.Q4_0},
	{Name: "Q4_1", ID: 3, Base: quant.Q4_1},
	{Name: "Q5_0", ID: 8, Base: quant.Q5_0},
	{Name: "Q5_1", ID: 9, Base: quant.Q5_1},
	{Name: "Q4_K", ID: 14, Base: quant.Q4_K, Pure: true},
	{Name: "Q5_K", ID: 16, Base: quant.Q5_K, Pure: true},
	{Name: "Q6_K", ID: 18, Base: quant.Q6_K},
	{Name: "Q4_K_M", ID: 15, Base: quant.Q4_K, Mixed: 4},
	{Name: "Q5_K_M", ID: 17, Base: quant.Q5_K, Mixed: 5},
	// The types community files add, as llama-quantize --pure makes them
	// (Q2_K and Q3_K_S name their file types): every 2-D weight in the
	// type, so that a check exercises it everywhere.
	{Name: "Q2_K", ID: 10, Base: quant.Q2_K, Pure: true},
	{Name: "Q3_K", ID: 11, Base: quant.Q3_K, Pure: true},
	{Name: "IQ4_NL", ID: 25, Base: quant.IQ4_NL, Pure: true},
	{Name: "IQ4_XS", ID: 30, Base: quant.IQ4_XS, Pure: true},
}

// LookupFileType returns the recipe named name (case-insensitive).
func LookupFileType(name string) (FileType, error) {
	for _, f := range fileTypes {
		if strings.EqualFold(f.Name, name) {
			return f, nil
		}
	}
	return FileType{}, fmt.Errorf("synth: unknown type %q (have %s)", name, strings.Join(FileTypeNames(), ", "))
}

// FileTypeNames lists the recipes.
func FileTypeNames() []string {
	var ns []string
	for _, f := range fileTypes {
		ns = append(ns, f.Name)
	}
	sort.Strings(ns)
	return ns
}

// TensorType is the type llama-quantize gives the named 2-D tensor of cols
// columns in layer (-1 outside the blocks) of a model with layers blocks;
// tied says the model has no output.weight, so that token_embd takes the
// output's rule, as llama-quantize gives it. 1-D tensors (norms, biases)
// stay F32, as in llama.cpp.
func (f FileType) TensorType(name string, layer, layers, cols int, tied bool) quant.Type {
	t := f.Base
	if f.Base == quant.F32 || f.Base == quant.F16 || f.Base == quant.BF16 {
		return t
	}
	moreBits := func(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }
	if !f.Pure {
		switch {
		case name == "output.weight", tied && name == "token_embd.weight":
			if t != quant.Q8_0 {
				t = quant.Q6_K
			}
			if cols%t.BlockSize() != 0 {
				t = quant.Q8_0
			}
		case strings.HasSuffix(name, ".attn_v.weight"), strings.HasSuffix(name, ".ffn_down.weight"):
			if f.Mixed != 0 && moreBits(layer, layers) {
				t = quant.Q6_K
			}
		}
	}
	return fallback(t, cols)
}

// fallback is llama.cpp's substitute for a type whose block does not divide
// the row (tensor_type_fallback): 256-blocks fall to 32-blocks, and a
// 32-block type that still does not fit falls to F16.
func fallback(t quant.Type, cols int) quant.Type {
	if cols%t.BlockSize() == 0 {
		return t
	}
	switch t {
	case quant.Q2_K, quant.Q3_K:
		t = quant.Q4_0
	case quant.IQ4_XS:
		t = quant.IQ4_NL
	case quant.Q4_K:
		t = quant.Q5_0
	case quant.Q5_K:
		t = quant.Q5_1
	case quant.Q6_K:
		t = quant.Q8_0
	}
	if cols%t.BlockSize() != 0 {
		t = quant.F16
	}
	return t
}
