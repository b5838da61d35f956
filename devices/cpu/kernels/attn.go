package kernels

import (
	"math"

	"hybrid/quant"
)

// The pieces of llama.cpp's tiled CPU flash attention
// (ggml_compute_forward_flash_attn_ext_tiled in ggml-cpu/ops.cpp), which it
// takes for 64 query rows or more. Keys and values come in tiles of AttnTile
// cache cells; both products are its simd_gemm, whose every output element is
// one chain of fused multiply-adds in order of the summed index, so the
// vector width does not change a result and these kernels can block rows and
// columns as they like. The Go functions are the definition; the assembly
// ones must equal them bit for bit (attn_test.go).

// AttnTile is the number of cache cells in a key and value tile
// (GGML_FA_TILE_KV); the score rows of AttnScores, AttnSoftMax and AttnAccum
// are AttnTile apart.
const AttnTile = 64

// AttnPackK widens keys j < n (n ≤ AttnTile) of an f16 cache, key j at
// k[j*stride:j*stride+hd], into kt[d*AttnTile+j]: the tile transposed, as
// llama.cpp packs it for its GEMM. Columns n and above are left as they are;
// their scores are masked.
func AttnPackK(kt []float32, k []uint16, stride, n, hd int) {
	_ = kt[hd*AttnTile-1]
	if n == 0 {
		return
	}
	_ = k[(n-1)*stride+hd-1]
	attnPackK(kt, k, stride, n, hd)
}

// AttnScores sets s[r*AttnTile+j], for rows r < rows and every column j of
// the tile, to (Σ_d q[r*hd+d]·kt[d*AttnTile+j])·scale: the sum a chain of
// fused multiply-adds from zero in order of d, then one rounded product, as
// llama.cpp's simd_gemm and ggml_vec_scale_f32 compute KQ.
func AttnScores(s, q, kt []float32, rows, hd int, scale float32) {
	if rows == 0 {
		return
	}
	_ = s[rows*AttnTile-1]
	_ = q[rows*hd-1]
	_ = kt[hd*AttnTile-1]
	attnScores(s, q, kt, rows, hd, scale)
}

// AttnSoftMax is ggml_vec_soft_max_f32 over one score row: it sets p[j] =
// exp(p[j]-m) with ggml_v_expf and returns the sum of the new p in float64,
// each vector's lanes first summed in f32 as the build's reduction does. The
// lanes (16 for the AVX-512 build, 8 for the AVX2 one) are the width of
// llama.cpp built natively for this CPU, as HasAVX512 tells; len(p) must be a
// multiple of them. A -Inf score gives a weight of exactly zero.
func AttnSoftMax(p []float32, m float32) float64 { return attnSoftMax(p, m) }

// AttnAccum adds values to rows of an f32 output accumulator: for r < rows
// and t < hd, o[r*hd+t] gets p[r*AttnTile+j]·v[j*stride+t] (the value
// widened from f16) added for j = 0, 1, ..., n-1 in turn, each step one fused
// multiply-add, as simd_gemm computes VKQ += KQ·V with the accumulator loaded
// first.
func AttnAccum(o, p []float32, v []uint16, stride, rows, n, hd int) {
	if rows == 0 || n == 0 {
		return
	}
	_ = o[rows*hd-1]
	_ = p[(rows-1)*AttnTile+n-1]
	_ = v[(n-1)*stride+hd-1]
	attnAccum(o, p, v, stride, rows, n, hd)
}

// AttnRowMax returns the largest of a score row's AttnTile scores, as
// ggml_vec_max_f32 finds it up to the sign of a zero maximum (which no
// result depends on: the maximum is only ever subtracted and compared) and
// to a NaN score, which no finite query and cache give.
func AttnRowMax(p []float32) float32 {
	_ = p[AttnTile-1]
	return attnRowMax(p)
}

func attnRowMaxGo(p []float32) float32 {
	m := float32(math.Inf(-1))
	for _, x := range p[:AttnTile] {
		if x > m {
			m = x
		}
	}
	return m
}

var (
	attnRowMax  = attnRowMaxGo
	attnPackK   = attnPackKGo
	attnScores  = attnScoresGo
	attnSoftMax = func(p []float32, m float32) float64 { return attnSoftMaxGo(p, m, HasAVX512()) }
	attnAccum   = attnAccumGo
)

func attnPackKGo(kt []float32, k []uint16, stride, n, hd int) {
	t := quant.F16Table()
	for j := range n {
		row := k[j*stride : j*stride+hd]
		for d, h := range row {
			kt[d*AttnTile+j] = t[h]
		}
	}
}

func attnScoresGo(s, q, kt []float32, rows, hd int, scale float32) {
	for r := range rows {
		qr := q[r*hd : (r+1)*hd]
		sr := s[r*AttnTile : (r+1)*AttnTile]
		for j := range sr {
			var a float32
			for d, x := range qr {
				a = fma32(x, kt[d*AttnTile+j], a)
			}
			sr[j] = a * scale
		}
	}
}

func attnAccumGo(o, p []float32, v []uint16, stride, rows, n, hd int) {
	t := quant.F16Table()
	for r := range rows {
		or := o[r*hd : (r+1)*hd]
		pr := p[r*AttnTile : r*AttnTile+n]
		for j, w := range pr {
			vj := v[j*stride : j*stride+hd]
			for i, h := range vj {
				or[i] = fma32(w, t[h], or[i])
			}
		}
	}
}

// attnSoftMaxGo is ggml_vec_soft_max_f32 of the AVX-512 build (wide: 16
// lanes, _mm512_reduce_add_ps) or of the AVX2 one (8 lanes, summed as
// (4+4), then (0+2, 1+3), then the two).
func attnSoftMaxGo(p []float32, m float32, wide bool) float64 {
	var sum float64
	if wide {
		var l [16]float32
		for i := 0; i+16 <= len(p); i += 16 {
			for k := range l {
				l[k] = VExpF512(p[i+k] - m)
				p[i+k] = l[k]
			}
			sum += float64(reduce16(&l))
		}
		return sum
	}
	for i := 0; i+8 <= len(p); i += 8 {
		var l [8]float32
		for k := range l {
			l[k] = VExpF256(p[i+k] - m)
			p[i+k] = l[k]
		}
		a := [4]float32{l[4] + l[0], l[5] + l[1], l[6] + l[2], l[7] + l[3]}
		sum += float64((a[0] + a[2]) + (a[1] + a[3]))
	}
	return sum
}

// The llama.cpp we match is the one built natively for this CPU: its AVX-512
// and AVX2 builds approximate expf differently (HasAVX512 picks; 16 or 8
// lanes). These per-lane Go emulations of ggml_v_expf are the reference the
// assembly (softmax, SiLU) is checked against, bit for bit, and what package
// cpu uses where there is no assembly.

// VExpF512 is ggml_v_expf of the AVX-512 build, one lane.
func VExpF512(x float32) float32 {
	const r = 0x1.8p23
	z := fma32(x, 0x1.715476p+0, r)
	n := z - r
	b := fma32(-n, 0x1.7f7d1cp-20, fma32(-n, 0x1.62e4p-1, x))
	u := b * b
	j := fma32(fma32(fma32(0x1.0e4020p-7, b, 0x1.573e2ep-5), u, fma32(0x1.555e66p-3, b, 0x1.fffdb6p-2)), u, fma32(0x1.ffffecp-1, b, 1))
	if abs32(n) > 192 {
		if n <= 0 {
			return 0
		}
		return float32(math.Inf(1))
	}
	return float32(math.Ldexp(float64(j), int(n)))
}

// VExpF256 is ggml_v_expf of the AVX2 build, one lane: Arm's
// optimized-routines expf, with its special cases for |n| > 126.
func VExpF256(x float32) float32 {
	const r = 0x1.8p23
	z := fma32(x, 0x1.715476p+0, r)
	n := z - r
	b := fma32(-n, 0x1.7f7d1cp-20, fma32(-n, 0x1.62e4p-1, x))
	e := math.Float32bits(z) << 23
	k := math.Float32frombits(e + math.Float32bits(1))
	u := b * b
	j := fma32(fma32(fma32(0x1.0e4020p-7, b, 0x1.573e2ep-5), u, fma32(0x1.555e66p-3, b, 0x1.fffdb6p-2)), u, 0x1.ffffecp-1*b)
	an := abs32(n)
	if !(an > 126) {
		return fma32(j, k, k)
	}
	var g uint32
	if n <= 0 {
		g = 0x82000000
	}
	s1 := math.Float32frombits(g + 0x7f000000)
	s2 := math.Float32frombits(e - g)
	if an > 192 {
		return s1 * s1
	}
	return fma32(s2, j, s2) * s1
}
