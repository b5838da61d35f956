//go:build amd64 && !purego

package kernels

// q4_KRowsVNNI is q4_KRows to the bit, with VPDPWSSD scaling and summing the
// integer dots and four rows a pass (qk_vnni_amd64.s).
//
//go:noescape
func q4_KRowsVNNI(w *byte, stride, rows int, xq *int8, xd *float32, bs *int16, nb int, y *float32)
