package synth

import (
	"hash/fnv"
	"math"
)

// rowRand is a splitmix64 stream for one row of one tensor, so that rows can be
// generated in any order and in parallel with the same result.
type rowRand struct{ s uint64 }

func newRowRand(seed uint64, tensor string, row int) rowRand {
	h := fnv.New64a()
	h.Write([]byte(tensor))
	return rowRand{s: seed*0x9e3779b97f4a7c15 ^ h.Sum64() ^ uint64(row)*0xbf58476d1ce4e5b9}
}

func (r *rowRand) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// irwinHallScale makes the sum of four uniform 16-bit values (variance
// 4·(2^32-1)/12 in 16-bit units) unit-variance.
var irwinHallScale = float32(1 / (65536 * math.Sqrt(4.0/12)))

// fillNormal fills dst with approximately normal values of mean 0 and standard
// deviation std: each is the centred sum of four uniforms (Irwin–Hall), which
// is close enough to Gaussian for weights and costs one 64-bit draw.
func (r *rowRand) fillNormal(dst []float32, std float32) {
	s := std * irwinHallScale
	for i := range dst {
		x := r.next()
		sum := int64(x&0xffff) + int64(x>>16&0xffff) + int64(x>>32&0xffff) + int64(x>>48) - 2*65535
		dst[i] = float32(sum) * s
	}
}
