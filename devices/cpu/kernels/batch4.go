package kernels

import "math"

// Four inputs at a time for the row kernels whose order is llama.cpp's
// vec_dot per (row, input) (Q6_K: llama.cpp multiplies a batch of it so on
// x86, with no repacked layout or GEMM for the type). A kernel's rows4
// multiplies weight rows by four inputs laid out in one tile, each (row,
// input) bit for bit what rows gives, so that a row's weights are decoded
// once for four inputs instead of once per input.

// rows4Func sets y[t*ystride+r] = W_r·x_t for the four inputs x_t of tile
// (laid out by the kernel's tile4) and r < rows, W_r being the stride bytes
// at w[r*stride:].
type rows4Func func(w []byte, stride, rows int, tile []byte, nb int, y []float32, ystride int)

// q6Tile is one Q6_K-kind super-block of four inputs in a tile: their 256
// quantized activations each, their four scales, their 16 per-16 sums each.
const (
	q6TileQ     = 0
	q6TileD     = 4 * 256
	q6TileBS    = q6TileD + 4*4
	q6TileBlock = q6TileBS + 4*16*2
)

// q6TileFill lays out four inputs of nb super-blocks into dst
// (nb·q6TileBlock bytes).
func q6TileFill(x []xrow, nb int, dst []byte) {
	for b := range nb {
		blk := dst[b*q6TileBlock : (b+1)*q6TileBlock]
		for t := range 4 {
			copy(blk[q6TileQ+256*t:q6TileQ+256*(t+1)], int8Bytes(x[t].q[256*b:256*(b+1)]))
			put32(blk, q6TileD+4*t, math.Float32bits(x[t].d[b]))
			for j, v := range x[t].bs[16*b : 16*(b+1)] {
				blk[q6TileBS+32*t+2*j] = byte(v)
				blk[q6TileBS+32*t+2*j+1] = byte(uint16(v) >> 8)
			}
		}
	}
}

// batch4 lays out the inputs of a mat-mul in tiles of four for k.rows4, in
// parallel, and returns the tiles (nil where k has no rows4 or there are
// fewer than four inputs).
func (s *scratch) batch4(p *Pool, k *kernel, xs []xrow, cols int) []byte {
	if k.rows4 == nil || len(xs) < 4 {
		return nil
	}
	nb := cols / 256
	size := nb * q6TileBlock
	groups := len(xs) / 4
	s.t4 = grow(s.t4, groups*size)
	s.tt = tile4Task{x: xs, nb: nb, dst: s.t4[:groups*size]}
	p.runTask(&s.tt, groups, 1)
	s.tt = tile4Task{}
	return s.t4[:groups*size]
}

// tile4Task is batch4's parallel work over groups of four inputs (a
// struct, not a closure, so that a mat-mul allocates nothing).
type tile4Task struct {
	x   []xrow
	nb  int
	dst []byte
}

func (t *tile4Task) run(lo, hi int) {
	size := t.nb * q6TileBlock
	for g := lo; g < hi; g++ {
		q6TileFill(t.x[4*g:4*g+4], t.nb, t.dst[g*size:(g+1)*size])
	}
}
