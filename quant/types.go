// Package quant defines the GGML tensor types that GGUF files store, their block
// layouts, and the dequantizers and quantizers for each supported type. Block
// layouts and rounding follow llama.cpp's ggml-quants reference code, so data this
// package writes loads in llama.cpp and data llama.cpp writes decodes bit-exactly.
package quant

import (
	"fmt"
	"strings"
)

// Type is a GGML tensor type id, as stored in a GGUF tensor info.
type Type uint32

// GGML type ids (ggml.h). Only the ones listed in supported have codecs here;
// the rest are named so that errors can say which type a file used.
const (
	F32    Type = 0
	F16    Type = 1
	Q4_0   Type = 2
	Q4_1   Type = 3
	Q5_0   Type = 6
	Q5_1   Type = 7
	Q8_0   Type = 8
	Q8_1   Type = 9
	Q2_K   Type = 10
	Q3_K   Type = 11
	Q4_K   Type = 12
	Q5_K   Type = 13
	Q6_K   Type = 14
	Q8_K   Type = 15
	IQ4_NL Type = 20
	IQ4_XS Type = 23
	BF16   Type = 30
)

// QK_K is the super-block size of the K-quants.
const QK_K = 256

type layout struct {
	name       string
	blockSize  int // elements per block
	blockBytes int // bytes per block
	supported  bool
}

var layouts = map[Type]layout{
	F32:  {"F32", 1, 4, true},
	F16:  {"F16", 1, 2, true},
	BF16: {"BF16", 1, 2, true},
	Q4_0: {"Q4_0", 32, 18, true},
	Q4_1: {"Q4_1", 32, 20, true},
	Q5_0: {"Q5_0", 32, 22, true},
	Q5_1: {"Q5_1", 32, 24, true},
	Q8_0: {"Q8_0", 32, 34, true},
	Q8_1: {"Q8_1", 32, 36, false},
	Q2_K: {"Q2_K", QK_K, 84, true},
	Q3_K: {"Q3_K", QK_K, 110, true},
	Q4_K: {"Q4_K", QK_K, 144, true},
	Q5_K: {"Q5_K", QK_K, 176, true},
	Q6_K: {"Q6_K", QK_K, 210, true},
	Q8_K: {"Q8_K", QK_K, 292, false},

	IQ4_NL: {"IQ4_NL", 32, 18, true},
	IQ4_XS: {"IQ4_XS", QK_K, 136, true},
}

// String returns llama.cpp's name for the type, or "type(N)" for an unknown id.
func (t Type) String() string {
	if l, ok := layouts[t]; ok {
		return l.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Known reports whether t is a GGML type whose block layout this package knows
// (enough to size tensors in a file), whether or not it can decode it.
func (t Type) Known() bool { _, ok := layouts[t]; return ok }

// Supported reports whether this package can dequantize and quantize t.
func (t Type) Supported() bool { return layouts[t].supported }

// BlockSize is the number of elements in one block (1 for float types).
// It is 0 for an unknown type.
func (t Type) BlockSize() int { return layouts[t].blockSize }

// BlockBytes is the size in bytes of one block. It is 0 for an unknown type.
func (t Type) BlockBytes() int { return layouts[t].blockBytes }

// RowBytes returns the bytes that n consecutive elements of type t occupy. n must
// be a multiple of the block size.
func RowBytes(t Type, n int) (int, error) {
	l, ok := layouts[t]
	if !ok {
		return 0, fmt.Errorf("quant: unknown tensor type %d", uint32(t))
	}
	if n < 0 || n%l.blockSize != 0 {
		return 0, fmt.Errorf("quant: %s row of %d elements is not a multiple of its block size %d", l.name, n, l.blockSize)
	}
	return n / l.blockSize * l.blockBytes, nil
}

// ParseType returns the type named s (case-insensitive, as llama.cpp names them).
func ParseType(s string) (Type, error) {
	for t, l := range layouts {
		if strings.EqualFold(l.name, s) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("quant: unknown tensor type %q", s)
}

// SupportedTypes lists the types with codecs, in id order.
func SupportedTypes() []Type {
	var ts []Type
	for t := Type(0); t <= BF16; t++ {
		if layouts[t].supported {
			ts = append(ts, t)
		}
	}
	return ts
}
