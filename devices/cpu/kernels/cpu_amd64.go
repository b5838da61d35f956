//go:build amd64 && !purego

package kernels

import "os"

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
func xgetbv() (eax uint32)

// hasAVX2 reports whether the CPU and OS support what the assembly kernels
// use: AVX2 integer ops, FMA, and F16C's half-to-float conversion, with the
// OS saving the YMM registers.
var hasAVX2 = func() bool {
	maxID, _, _, _ := cpuid(0, 0)
	if maxID < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const fma, osxsave, avx, f16c = 1 << 12, 1 << 27, 1 << 28, 1 << 29
	if ecx1&(fma|osxsave|avx|f16c) != fma|osxsave|avx|f16c {
		return false
	}
	if xgetbv()&6 != 6 { // XMM and YMM state enabled
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	const avx2 = 1 << 5
	return ebx7&avx2 != 0
}()

// hasAVX512 reports AVX-512 F and DQ with the OS saving ZMM state.
var hasAVX512 = func() bool {
	if !hasAVX2 {
		return false
	}
	if xgetbv()&0xe6 != 0xe6 {
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	const f, dq = 1 << 16, 1 << 17
	return ebx7&(f|dq) == f|dq
}()

// HasAVX512 reports whether this CPU has AVX-512 F and DQ, which decides
// which of llama.cpp's vector code paths a native build of it takes.
func HasAVX512() bool { return hasAVX512 }

// Features names the kernel set in use.
func Features() string {
	if !hasAVX2 {
		return "portable Go kernels"
	}
	f := "AVX2/FMA/F16C kernels"
	if hasAVX512 {
		f += ", AVX-512 numerics"
	}
	if hasAVX512VNNI {
		f += ", VNNI"
	}
	if hasAMX {
		f += ", AMX tiles for prompts"
	}
	return f
}

// hasAVX512BF16 reports AVX512-BF16, with which a native llama.cpp multiplies
// BF16 weights by VDPBF16PS (see bf16dp.go).
var hasAVX512BF16 = func() bool {
	if !hasAVX512 {
		return false
	}
	eax, _, _, _ := cpuid(7, 1)
	return eax&(1<<5) != 0
}()

// isAMD reports an AMD CPU (vendor "AuthenticAMD").
var isAMD = func() bool {
	_, ebx, ecx, edx := cpuid(0, 0)
	return ebx == 0x68747541 && edx == 0x69746e65 && ecx == 0x444d4163
}()

// streamPrefetch says whether the four-stream decode kernels prefetch each
// stream ahead in software (q8_0Rows4, gemvQ4_0Packed4) or leave it to the
// hardware prefetchers (the NP variants); HYBRID_CPU_PREFETCH=0 or 1
// overrides the CPU's default, to measure both.
var streamPrefetch = func() bool {
	switch os.Getenv("HYBRID_CPU_PREFETCH") {
	case "0":
		return false
	case "1":
		return true
	}
	return !isAMD
}()
