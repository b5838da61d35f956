//go:build cuda

package cuda

// The CUDA driver API calls the device makes, through cgo against libcuda.
// hybrid calls the driver itself rather than through a wrapper library: the
// one it used (gorgonia.org/cu) initialises the driver when the program
// starts and exits the process when that fails, so a -tags cuda binary could
// not even say "no GPU" on a machine without one; here cuInit runs when a
// device is first asked for, and its failure is an error that the registry
// reports while hybrid goes on with the devices it has.

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <stdlib.h>

static const char *hy_err_name(CUresult r) {
	const char *s = 0;
	cuGetErrorName(r, &s);
	return s ? s : "unknown CUDA error";
}
static CUresult hy_ctx_create(CUcontext *c, CUdevice d) { return cuCtxCreate(c, CU_CTX_SCHED_AUTO, d); }
static CUresult hy_mem_alloc(CUdeviceptr *p, size_t n) { return cuMemAlloc(p, n); }
static CUresult hy_mem_free(CUdeviceptr p) { return cuMemFree(p); }
static CUresult hy_htod(CUdeviceptr d, const void *s, size_t n) { return cuMemcpyHtoD(d, s, n); }
static CUresult hy_dtoh(void *d, CUdeviceptr s, size_t n) { return cuMemcpyDtoH(d, s, n); }
static CUresult hy_total_mem(size_t *n, CUdevice d) { return cuDeviceTotalMem(n, d); }
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// dptr is a device address.
type dptr uint64

// cuErr turns a driver result into an error naming the call, or nil.
func cuErr(call string, r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	return fmt.Errorf("%s: %s", call, C.GoString(C.hy_err_name(r)))
}

var (
	initOnce sync.Once
	initErr  error
)

// driverInit initialises the driver once; every later call returns the same
// error if it failed (no driver, no GPU, a driver too old).
func driverInit() error {
	initOnce.Do(func() { initErr = cuErr("cuInit", C.cuInit(0)) })
	return initErr
}

// deviceCount is the number of GPUs the driver sees.
func deviceCount() (int, error) {
	if err := driverInit(); err != nil {
		return 0, err
	}
	var n C.int
	if err := cuErr("cuDeviceGetCount", C.cuDeviceGetCount(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// gpuInfo returns GPU ordinal's handle, name and memory in bytes.
func gpuInfo(ordinal int) (C.CUdevice, string, int64, error) {
	var dev C.CUdevice
	if err := cuErr("cuDeviceGet", C.cuDeviceGet(&dev, C.int(ordinal))); err != nil {
		return dev, "", 0, err
	}
	var name [256]C.char
	if err := cuErr("cuDeviceGetName", C.cuDeviceGetName(&name[0], C.int(len(name)), dev)); err != nil {
		return dev, "", 0, err
	}
	var mem C.size_t
	if err := cuErr("cuDeviceTotalMem", C.hy_total_mem(&mem, dev)); err != nil {
		return dev, "", 0, err
	}
	return dev, C.GoString(&name[0]), int64(mem), nil
}

// context is a CUDA context, current on the thread that made it.
type context struct{ c C.CUcontext }

func newContext(dev C.CUdevice) (context, error) {
	var c context
	return c, cuErr("cuCtxCreate", C.hy_ctx_create(&c.c, dev))
}

func (c context) destroy() error { return cuErr("cuCtxDestroy", C.cuCtxDestroy(c.c)) }

// synchronize waits for all work of the current context.
func synchronize() error { return cuErr("cuCtxSynchronize", C.cuCtxSynchronize()) }

func memAlloc(n int64) (dptr, error) {
	var p C.CUdeviceptr
	err := cuErr("cuMemAlloc", C.hy_mem_alloc(&p, C.size_t(n)))
	return dptr(p), err
}

func memFree(p dptr) error { return cuErr("cuMemFree", C.hy_mem_free(C.CUdeviceptr(p))) }

// memcpyHtoD copies n bytes from host src to device dst (synchronously with
// respect to the host for pageable memory, ordered after earlier work).
func memcpyHtoD(dst dptr, src unsafe.Pointer, n int64) error {
	return cuErr("cuMemcpyHtoD", C.hy_htod(C.CUdeviceptr(dst), src, C.size_t(n)))
}

func memcpyDtoH(dst unsafe.Pointer, src dptr, n int64) error {
	return cuErr("cuMemcpyDtoH", C.hy_dtoh(dst, C.CUdeviceptr(src), C.size_t(n)))
}

// module is a loaded PTX module.
type module struct{ m C.CUmodule }

// loadModule JIT-compiles ptx for the current context's GPU.
func loadModule(ptx string) (module, error) {
	cs := C.CString(ptx)
	defer C.free(unsafe.Pointer(cs))
	var m module
	return m, cuErr("cuModuleLoadData", C.cuModuleLoadData(&m.m, unsafe.Pointer(cs)))
}

func (m module) function(name string) (C.CUfunction, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var f C.CUfunction
	return f, cuErr("cuModuleGetFunction "+name, C.cuModuleGetFunction(&f, m.m, cs))
}

func (m module) unload() { C.cuModuleUnload(m.m) }
