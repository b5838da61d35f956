package kernels

// attnRowAsm, where the CPU has a kernel for it, is AttnRow's assembly
// (attnrow_amd64.go); it reports false for a head size it has no kernel
// for.
var attnRowAsm func(q []float32, k, v []uint16, stride, n int, scale float32, st []float32, tab *[32]uint64) bool

// AttnRow runs n keys of llama.cpp's one-row flash attention over an f16
// KV cache (ggml_compute_forward_flash_attn_ext_f16_one_chunk) for the
// query q (len(q) = head size, its values already rounded to binary16):
// key j is k[j*stride:][:len(q)], its value v[j*stride:][:len(q)]. The
// running state st is M, S and the value accumulator (len(q) f32 values,
// each a binary16), updated in place, so that a row can be run in chunks.
// tab is glibc expf's table of 2^(i/32) (package cpu's expf). It reports
// false, having done nothing, where this CPU or head size has no kernel:
// the caller then runs its own loop, which gives the same bits.
func AttnRow(q []float32, k, v []uint16, stride, n int, scale float32, st []float32, tab *[32]uint64) bool {
	if attnRowAsm == nil {
		return false
	}
	return attnRowAsm(q, k, v, stride, n, scale, st, tab)
}

// attnRow2Asm is AttnRow2's assembly, where there is one.
var attnRow2Asm func(q []float32, k, v []uint16, stride, n int, scale float32, st []float32, tab *[32]uint64) bool

// AttnRow2 is AttnRow for two query heads that share their keys and values
// (grouped-query attention): q holds the two heads one after the other, st
// their two states; each head's results are AttnRow's to the bit. It
// reports false, having done nothing, where there is no kernel for it.
func AttnRow2(q []float32, k, v []uint16, stride, n int, scale float32, st []float32, tab *[32]uint64) bool {
	if attnRow2Asm == nil {
		return false
	}
	return attnRow2Asm(q, k, v, stride, n, scale, st, tab)
}
