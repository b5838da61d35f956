//go:build amd64 && !purego

package kernels

// siluMul512 and siluMul256 do SiluMul's arithmetic on n elements, n a
// positive multiple of 16 or 8 (silu_amd64.s).
//
//go:noescape
func siluMul512(gate, up, out *float32, n int)

//go:noescape
func siluMul256(gate, up, out *float32, n int)

func init() {
	if hasAVX2 {
		siluMul256Impl = func(g, u, out []float32) { siluMul256(&g[0], &u[0], &out[0], len(g)) }
	}
	if hasAVX512 {
		siluMul512Impl = func(g, u, out []float32) { siluMul512(&g[0], &u[0], &out[0], len(g)) }
	}
}
