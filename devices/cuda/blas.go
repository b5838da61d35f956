package cuda

// The choices of a prompt's mat-muls on cuBLAS that need no GPU (blas_cuda.go
// is the rest): where the library is looked for, and which mat-muls take it.

import (
	"os"
	"strconv"

	"hybrid/quant"
)

// blasPaths are where cuBLAS is looked for, in order: env, HYBRID_CUBLAS's
// value (a path, or "0" for none), alone where set; else the loader's
// search (LD_LIBRARY_PATH, the ld cache) for CUDA 13's, 12's and 11's
// library, then the toolkit's default directories.
func blasPaths(env string) []string {
	switch env {
	case "":
	case "0":
		return nil
	default:
		return []string{env}
	}
	var ps []string
	for _, dir := range []string{"", "/usr/local/cuda/lib64/", "/usr/local/cuda/targets/x86_64-linux/lib/", "/usr/local/cuda/targets/sbsa-linux/lib/"} {
		for _, v := range []string{".13", ".12", ".11", ""} {
			ps = append(ps, dir+"libcublas.so"+v)
		}
	}
	return ps
}

// blasMin is the prompt from which a mat-mul runs on cuBLAS where it is
// loaded (HYBRID_CUDA_BLAS_MIN overrides it), and blasBig the weights
// (rows × cols of a launch) that run on it from mmtMin tokens: decoding a
// weight to f16 is a fixed cost that a small weight's short prompt does not
// repay. Measured on an H200 (TestPrefillMatMul, µs, mmt against cuBLAS):
// at 32 tokens Q4_K 2048×2048 16.7 / 20.9 but 5632×2048 33.4 / 19.8 and
// 11008×4096 99.4 / 69.2; at 128 tokens 2048×2048 19.1 / 19.5 (Q6_K 21.6 /
// 24.5), every larger shape faster on cuBLAS; at 512 tokens 2.5-3.5× faster.
var blasMin = func() int {
	if v, err := strconv.Atoi(os.Getenv("HYBRID_CUDA_BLAS_MIN")); err == nil && v > 0 {
		return v
	}
	return 128
}()

const blasBig = 8 << 20

// blasScratchMax bounds the f16 weight rows decoded at a time
// (HYBRID_CUDA_BLAS_SCRATCH in MiB): a larger weight is multiplied in slices
// of rows, so that the scratch does not take the room of weights the GPU
// could hold.
var blasScratchMax = func() int64 {
	if v, err := strconv.Atoi(os.Getenv("HYBRID_CUDA_BLAS_SCRATCH")); err == nil && v > 0 {
		return int64(v) << 20
	}
	return 96 << 20
}()

// blasTakes reports whether a prefill mat-mul of n tokens of weight type t,
// rows (of every weight of the launch) and row length cols runs on cuBLAS
// where it loaded: F32 weights keep the f32 kernels, rows of a part of 32
// and prompts under least (the tensor cores' smallest, mmtMin) never take
// it.
func blasTakes(t quant.Type, rows, cols, n, least int) bool {
	if t == quant.F32 || cols%32 != 0 || n < least {
		return false
	}
	return n >= blasMin || int64(rows)*int64(cols) >= blasBig
}
