//go:build cuda

package cuda

// A prompt's mat-muls on cuBLAS: the weight decoded to f16 (deq16_<type> in
// kernels/matmul.cu, the values mmt decodes) and multiplied by the
// activations rounded to f16 (to_f16) with f32 sums, by cublasGemmEx. cuBLAS
// is loaded at run time (dlopen) from the CUDA toolkit where one is
// installed: without it the prompt runs mmt, the device's own tensor-core
// kernel. Decoding a weight to f16 reads its bytes once and writes two bytes
// a weight, a fixed cost that a prompt of blasMin tokens or more repays
// (bench/RESULTS.md, TestPrefillMatMul).

/*
#cgo LDFLAGS: -ldl
#include <cuda.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>

typedef int (*hy_cublas_create_t)(void **);
typedef int (*hy_cublas_destroy_t)(void *);
typedef int (*hy_cublas_stream_t)(void *, CUstream);
typedef int (*hy_cublas_ws_t)(void *, void *, size_t);
typedef int (*hy_cublas_version_t)(void *, int *);
typedef int (*hy_cublas_gemmex_t)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *, int, int,
                                  const void *, void *, int, int, int, int);

typedef struct {
	void *lib, *h;
	hy_cublas_create_t create;
	hy_cublas_destroy_t destroy;
	hy_cublas_stream_t stream;
	hy_cublas_ws_t ws;
	hy_cublas_version_t version;
	hy_cublas_gemmex_t gemm;
} hy_blas;

// hy_blas_open loads cuBLAS from path and creates a handle on the current
// context: 0, or why not.
static const char *hy_blas_open(hy_blas *b, const char *path, int *status) {
	*status = 0;
	b->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!b->lib) return dlerror();
	b->create = (hy_cublas_create_t)dlsym(b->lib, "cublasCreate_v2");
	b->destroy = (hy_cublas_destroy_t)dlsym(b->lib, "cublasDestroy_v2");
	b->stream = (hy_cublas_stream_t)dlsym(b->lib, "cublasSetStream_v2");
	b->ws = (hy_cublas_ws_t)dlsym(b->lib, "cublasSetWorkspace_v2");
	b->version = (hy_cublas_version_t)dlsym(b->lib, "cublasGetVersion_v2");
	b->gemm = (hy_cublas_gemmex_t)dlsym(b->lib, "cublasGemmEx");
	if (!b->create || !b->destroy || !b->stream || !b->ws || !b->version || !b->gemm) {
		dlclose(b->lib);
		b->lib = 0;
		return "a cuBLAS function is missing";
	}
	*status = b->create(&b->h);
	if (*status) {
		dlclose(b->lib);
		b->lib = 0;
		return "cublasCreate failed";
	}
	return 0;
}

static int hy_blas_setup(hy_blas *b, CUstream s, CUdeviceptr ws, size_t n, int *version) {
	int r = b->stream(b->h, s);
	if (!r) r = b->ws(b->h, (void *)ws, n);
	if (!r) r = b->version(b->h, version);
	return r;
}

static void hy_blas_close(hy_blas *b) {
	if (b->h) b->destroy(b->h);
	if (b->lib) dlclose(b->lib);
	b->h = 0, b->lib = 0;
}

// hy_blas_gemm is C = Aᵀ·B in cuBLAS's column-major terms: A is k × m
// (lda), B k × n (ldb), both f16, C m × n (ldc) f32, with f32 sums (CUBLAS_OP_T = 1, CUBLAS_OP_N = 0, CUDA_R_16F = 2,
// CUDA_R_32F = 0, CUBLAS_COMPUTE_32F = 68, CUBLAS_GEMM_DEFAULT = -1).
static int hy_blas_gemm(hy_blas *b, int m, int n, int k, CUdeviceptr A, int lda, CUdeviceptr B, int ldb, CUdeviceptr C, int ldc) {
	float one = 1, zero = 0;
	return b->gemm(b->h, 1, 0, m, n, k, &one, (const void *)A, 2, lda, (const void *)B, 2, ldb, &zero, (void *)C, 0, ldc, 68, -1);
}
*/
import "C"

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"hybrid/quant"
)

// blas is a cuBLAS handle on the device's context and stream (device thread
// only).
type blas struct {
	b       C.hy_blas
	path    string
	version int
}

// blasWorkspace is the workspace cuBLAS is given (cublasSetWorkspace), so
// that a captured graph's products never allocate: NVIDIA's recommendation
// for Hopper.
const blasWorkspace = 32 << 20

// openBlas loads cuBLAS for the device (device thread, its context current):
// nil and why where it cannot.
func (d *Device) openBlas() (*blas, string) {
	paths := blasPaths(os.Getenv("HYBRID_CUBLAS"))
	if len(paths) == 0 {
		return nil, "off (HYBRID_CUBLAS=0)"
	}
	var why []string
	for _, p := range paths {
		b := &blas{path: p}
		cp := C.CString(p)
		var st C.int
		msg := C.hy_blas_open(&b.b, cp, &st)
		C.free(unsafe.Pointer(cp))
		if msg != nil {
			if st != 0 || len(paths) == 1 || !strings.Contains(C.GoString(msg), "cannot open shared object") {
				why = append(why, fmt.Sprintf("%s: %s (%d)", p, C.GoString(msg), int(st)))
			}
			continue
		}
		ws, err := d.alloc(blasWorkspace, memScratch)
		if err != nil {
			C.hy_blas_close(&b.b)
			return nil, fmt.Sprintf("%s: workspace: %v", p, err)
		}
		var v C.int
		if r := C.hy_blas_setup(&b.b, d.stream.s, C.CUdeviceptr(ws), blasWorkspace, &v); r != 0 {
			C.hy_blas_close(&b.b)
			d.release(ws)
			why = append(why, fmt.Sprintf("%s: set-up failed (%d)", p, int(r)))
			continue
		}
		b.version = int(v)
		return b, ""
	}
	if len(why) == 0 {
		return nil, "libcublas not found"
	}
	return nil, strings.Join(why, "; ")
}

func (b *blas) close() {
	if b != nil {
		C.hy_blas_close(&b.b)
	}
}

// String names the library and its version (cuBLAS's 120805 is 12.8.5).
func (b *blas) String() string {
	return fmt.Sprintf("cuBLAS %d.%d.%d (%s)", b.version/10000, b.version/100%100, b.version%100, b.path)
}

// gemm is C (f32, m rows of ldc in column-major terms) = Aᵀ·B for A (f16,
// k × m, lda) and B (f16, k × n, ldb): with A a row-major weight of m rows
// of k and B n row-major activation rows of k, C is the n × m row-major
// product (each token's row of outputs, ldc apart).
func (b *blas) gemm(m, n, k int, a dptr, lda int, bp dptr, ldb int, c dptr, ldc int) error {
	if r := C.hy_blas_gemm(&b.b, C.int(m), C.int(n), C.int(k), C.CUdeviceptr(a), C.int(lda), C.CUdeviceptr(bp), C.int(ldb), C.CUdeviceptr(c), C.int(ldc)); r != 0 {
		return fmt.Errorf("cublasGemmEx (%d×%d×%d): status %d", m, n, k, int(r))
	}
	return nil
}

// onBlas reports whether a prefill mat-mul of n tokens of weight type t,
// rows (of every weight of the launch) and row length cols runs on cuBLAS.
func (d *Device) onBlas(t quant.Type, rows, cols, n int) bool {
	return d.blas != nil && d.useBlas && blasTakes(t, rows, cols, n, mmtMin)
}

// blasMMT is launchMMT's product on cuBLAS: x (n rows, already rounded to
// f16 at d.mmtX) times each weight, into its y. A weight is decoded to f16
// in slices of rows that fit blasScratchMax (F16 weights are read as they
// are). It reports false, having launched nothing, where the scratch cannot
// be had (the caller runs mmt instead).
func (d *Device) blasMMT(tk *typed, ws []mvWeight, n int) (bool, error) {
	cols := ws[0].w.w.Cols
	direct := ws[0].w.typ == quant.F16 // rows of halves, lda their stride
	slice := 0
	if !direct {
		most := 0
		for _, m := range ws {
			most = max(most, m.w.w.Rows)
		}
		slice = int(min(int64(most), max(blasScratchMax/(2*int64(cols)), 64)))
		if need := 2 * int64(slice) * int64(cols); need > d.nw16 {
			if err := d.regrow(&d.w16, need); err != nil {
				return false, nil
			}
			d.nw16 = need
		}
	}
	for _, m := range ws {
		rows := m.w.w.Rows
		if direct {
			if err := d.blas.gemm(rows, n, cols, m.w.ptr, m.w.rowBytes/2, d.mmtX, cols, m.y.ptr, rows); err != nil {
				return true, err
			}
			continue
		}
		for r0 := 0; r0 < rows; r0 += slice {
			sl := min(slice, rows-r0)
			pieces := int64(sl) * int64(cols/8)
			a := d.args().ptr(uintptr(m.w.ptr)).i64(int64(m.w.rowBytes)).ptr(uintptr(d.w16)).i32(r0).i32(sl).i32(cols)
			if err := launch(tk.deq16, int((pieces+255)/256), 1, 256, a); err != nil {
				return true, err
			}
			if err := d.blas.gemm(sl, n, cols, d.w16, cols, d.mmtX, cols, m.y.ptr+dptr(4*r0), rows); err != nil {
				return true, err
			}
		}
	}
	return true, nil
}
