package quant

import (
	"encoding/binary"
	"math"
)

// Q8_0 block (34 bytes, 32 elements): f16 scale d, then 32 int8 quants;
// x = q*d.

func dequantizeQ8_0(src []byte, dst []float32) {
	for b := 0; len(dst) > 0; b, dst = b+34, dst[32:] {
		blk := src[b : b+34]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		for j, q := range blk[2:34] {
			dst[j] = float32(int8(q)) * d
		}
	}
}

func quantizeQ8_0(src []float32, dst []byte) {
	for b := 0; len(src) > 0; b, src = b+34, src[32:] {
		x := src[:32]
		blk := dst[b : b+34]
		var amax float32
		for _, v := range x {
			if a := abs32(v); !(amax > a) { // C's MAX(amax, a), NaN included
				amax = a
			}
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(blk, F32ToF16(d))
		for j, v := range x {
			// roundf: to nearest, halves away from zero; exact via float64.
			blk[2+j] = uint8(int8(int32(math.Round(float64(v * id)))))
		}
	}
}
