//go:build amd64 && !purego

package kernels

import "hybrid/quant"

// The assembly row kernels of the low-bit types (lowbit_amd64.s): each gives
// its Go kernel's results (iq4_go.go, kquant2_go.go) to the bit, with
// AVX2 for the integer sums and the Go kernel's float steps in its order
// (TestLowBitAssemblyBitIdentical).

//go:noescape
func iq4_NLRows(w *byte, stride, rows int, xq *int8, xd *float32, nb int, y *float32)

//go:noescape
func iq4_XSRows(w *byte, stride, rows int, xq *int8, xd *float32, nb int, y *float32)

//go:noescape
func q3_KRows(w *byte, stride, rows int, xq *int8, xd *float32, nb int, y *float32)

//go:noescape
func q2_KRows(w *byte, stride, rows int, xq *int8, xd *float32, bs *int16, nb int, y *float32)

// hasBMI2 reports PDEP, with which iq4_XSRows gathers its scales.
var hasBMI2 = func() bool {
	if !hasAVX2 {
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	return ebx7&(1<<8) != 0
}()

// lowBitAsm lists the assembly row kernels this CPU can run, by type, for
// init and the tests.
var lowBitAsm = func() map[quant.Type]func([]byte, int, *xrow, []float32) {
	m := map[quant.Type]func([]byte, int, *xrow, []float32){}
	if !hasAVX2 {
		return m
	}
	m[quant.IQ4_NL] = block32(iq4_NLRows)
	if hasBMI2 {
		m[quant.IQ4_XS] = block32(iq4_XSRows)
	}
	m[quant.Q3_K] = block32(q3_KRows)
	m[quant.Q2_K] = block256(q2_KRows)
	return m
}()

func init() {
	for t, rows := range lowBitAsm {
		kernelFor[t].rows = rows
	}
}
