//go:build amd64 && !purego

package kernels

// hasAVX512VNNI reports AVX512-VNNI and AVX512VL (VPDPBUSD on Y registers)
// besides hasAVX512's F, DQ and the OS's ZMM and opmask state.
var hasAVX512VNNI = func() bool {
	if !hasAVX512 {
		return false
	}
	_, ebx7, ecx7, _ := cpuid(7, 0)
	const vl, vnni = 1 << 31, 1 << 11
	return ebx7&vl != 0 && ecx7&vnni != 0
}()

// q4_0RowsVNNI is q4_0Rows to the bit, with VPDPBUSD for the integer dots
// and four rows a pass (q4_0vnni_amd64.s).
//
//go:noescape
func q4_0RowsVNNI(w *byte, stride, rows int, xq *int8, xd *float32, xs *float32, nb int, y *float32)
