//go:build amd64 && !purego

package kernels

// The AVX-512 kernels of attn.go. Without AVX-512 the Go ones serve: their
// numerics (ggml_v_expf and reductions of the AVX2 build) are what
// llama.cpp's AVX2 build computes, and an AVX2 version of these kernels is
// still to be written.

//go:noescape
func attnScores512(s, q, kt *float32, rows, hd int, scale float32)

//go:noescape
func attnAccum512(o, p *float32, v *uint16, stride, rows, n, hd int)

//go:noescape
func attnSoftMax512(p *float32, n int, m float32) float64

//go:noescape
func attnRowMax512(p *float32) float32

func init() {
	if !hasAVX512 {
		return
	}
	attnRowMax = func(p []float32) float32 { return attnRowMax512(&p[0]) }
	attnScores = func(s, q, kt []float32, rows, hd int, scale float32) {
		if hd == 0 {
			attnScoresGo(s, q, kt, rows, hd, scale)
			return
		}
		attnScores512(&s[0], &q[0], &kt[0], rows, hd, scale)
	}
	attnAccum = func(o, p []float32, v []uint16, stride, rows, n, hd int) {
		if hd%16 != 0 {
			attnAccumGo(o, p, v, stride, rows, n, hd)
			return
		}
		attnAccum512(&o[0], &p[0], &v[0], stride, rows, n, hd)
	}
	attnSoftMax = func(p []float32, m float32) float64 {
		if len(p) == 0 {
			return 0
		}
		return attnSoftMax512(&p[0], len(p)&^15, m)
	}
}
