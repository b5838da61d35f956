package quant

import (
	"errors"
	"fmt"
)

// ErrUnsupported is returned for a type this package has no codec for.
var ErrUnsupported = errors.New("unsupported tensor type")

// ErrSize is returned when a buffer's length does not fit the element count:
// the count is not a multiple of the block size, or the byte buffer is not
// exactly RowBytes long.
var ErrSize = errors.New("buffer size mismatch")

// codec converts whole rows of blocks; the callers have checked the sizes.
type codec struct {
	dequantize func(src []byte, dst []float32)
	quantize   func(src []float32, dst []byte)
}

var codecs = map[Type]codec{
	F32:  {dequantizeF32, quantizeF32},
	F16:  {dequantizeF16, quantizeF16},
	BF16: {dequantizeBF16, quantizeBF16},
	Q4_0: {dequantizeQ4_0, quantizeQ4_0},
	Q4_1: {dequantizeQ4_1, quantizeQ4_1},
	Q5_0: {dequantizeQ5_0, quantizeQ5_0},
	Q5_1: {dequantizeQ5_1, quantizeQ5_1},
	Q8_0: {dequantizeQ8_0, quantizeQ8_0},
	Q2_K: {dequantizeQ2_K, quantizeQ2_K},
	Q3_K: {dequantizeQ3_K, quantizeQ3_K},
	Q4_K: {dequantizeQ4_K, quantizeQ4_K},
	Q5_K: {dequantizeQ5_K, quantizeQ5_K},
	Q6_K: {dequantizeQ6_K, quantizeQ6_K},

	IQ4_NL: {dequantizeIQ4_NL, quantizeIQ4_NL},
	IQ4_XS: {dequantizeIQ4_XS, quantizeIQ4_XS},
}

// Dequantize decodes len(dst) elements of type t from src into dst. len(dst)
// must be a multiple of t's block size and len(src) exactly RowBytes(t,
// len(dst)). The results are bit-identical to llama.cpp's dequantize_row_*
// (with its multiply-adds evaluated unfused, as its portable C build does).
func Dequantize(t Type, src []byte, dst []float32) error {
	c, err := check("dequantize", t, len(dst), len(src))
	if err != nil {
		return err
	}
	c.dequantize(src, dst)
	return nil
}

// Quantize encodes the elements of src as type t into dst. len(src) must be a
// multiple of t's block size and len(dst) exactly RowBytes(t, len(src)). The
// bytes are those of llama.cpp's reference quantizers (quantize_row_*_ref),
// which llama-quantize uses when it is given no importance matrix (for IQ4_NL
// and IQ4_XS, what ggml_quantize_chunk does then: quantize_iq4_nl and
// quantize_iq4_xs without weights); F16 and BF16 round to nearest even as
// ggml's conversions do.
func Quantize(t Type, src []float32, dst []byte) error {
	c, err := check("quantize", t, len(src), len(dst))
	if err != nil {
		return err
	}
	c.quantize(src, dst)
	return nil
}

func check(op string, t Type, n, nbytes int) (codec, error) {
	c, ok := codecs[t]
	if !ok || !t.Supported() {
		return codec{}, fmt.Errorf("quant: %s %s: %w", op, t, ErrUnsupported)
	}
	if bs := t.BlockSize(); n%bs != 0 {
		return codec{}, fmt.Errorf("quant: %s %s: %d elements are not a multiple of the block size %d: %w", op, t, n, bs, ErrSize)
	}
	if want := n / t.BlockSize() * t.BlockBytes(); nbytes != want {
		return codec{}, fmt.Errorf("quant: %s %s: %d elements take %d bytes, buffer has %d: %w", op, t, n, want, nbytes, ErrSize)
	}
	return c, nil
}
