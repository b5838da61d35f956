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
static CUresult hy_mem_info(size_t *free, size_t *total) { return cuMemGetInfo(free, total); }
static CUresult hy_can_peer(int *can, CUdevice a, CUdevice b) { return cuDeviceCanAccessPeer(can, a, b); }
static CUresult hy_enable_peer(CUcontext peer) {
	CUresult r = cuCtxEnablePeerAccess(peer, 0);
	return r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED ? CUDA_SUCCESS : r;
}
static CUresult hy_max_shared(CUfunction f, int n) { return cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, n); }
static CUresult hy_max_threads(int *n, CUfunction f) { return cuFuncGetAttribute(n, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f); }
static CUresult hy_host_register(void *p, size_t n) { return cuMemHostRegister(p, n, CU_MEMHOSTREGISTER_READ_ONLY); }
static CUresult hy_host_unregister(void *p) { return cuMemHostUnregister(p); }
static CUDA_MEMCPY2D hy_htod_rows(CUdeviceptr dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height) {
	CUDA_MEMCPY2D c = {0};
	c.srcMemoryType = CU_MEMORYTYPE_HOST;
	c.srcHost = src;
	c.srcPitch = spitch;
	c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	c.dstDevice = dst;
	c.dstPitch = dpitch;
	c.WidthInBytes = width;
	c.Height = height;
	return c;
}
static CUresult hy_htod_2d(CUdeviceptr dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height) {
	CUDA_MEMCPY2D c = hy_htod_rows(dst, dpitch, src, spitch, width, height);
	return cuMemcpy2D(&c);
}
static CUresult hy_htod_2d_async(CUdeviceptr dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height, CUstream st) {
	CUDA_MEMCPY2D c = hy_htod_rows(dst, dpitch, src, spitch, width, height);
	return cuMemcpy2DAsync(&c, st);
}
static CUresult hy_memcpy_peer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n) {
	return cuMemcpyPeer(dst, dctx, src, sctx, n);
}
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

// multiprocessors returns a GPU's multiprocessor count.
func multiprocessors(dev C.CUdevice) (int, error) {
	var n C.int
	err := cuErr("cuDeviceGetAttribute", C.cuDeviceGetAttribute(&n, C.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev))
	return int(n), err
}

// computeMajor returns a GPU's compute capability's major number (9: Hopper).
func computeMajor(dev C.CUdevice) (int, error) {
	var n C.int
	err := cuErr("cuDeviceGetAttribute", C.cuDeviceGetAttribute(&n, C.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
	return int(n), err
}

// gpuHandle is a GPU as the driver names it.
type gpuHandle = C.CUdevice

// memFreeBytes is the free memory of the current context's GPU, in bytes.
func memFreeBytes() (int64, error) {
	var free, total C.size_t
	err := cuErr("cuMemGetInfo", C.hy_mem_info(&free, &total))
	return int64(free), err
}

// canAccessPeer reports whether GPU a can address GPU b's memory directly.
func canAccessPeer(a, b gpuHandle) (bool, error) {
	var can C.int
	err := cuErr("cuDeviceCanAccessPeer", C.hy_can_peer(&can, a, b))
	return can != 0, err
}

// enablePeer lets the current context address peer's memory.
func enablePeer(peer context) error {
	return cuErr("cuCtxEnablePeerAccess", C.hy_enable_peer(peer.c))
}

// memcpyPeer copies n bytes from src in context sctx to dst in context dctx.
// It is asynchronous to the host and ordered with all work of both contexts
// (and the current one) on streams that synchronise with the legacy default
// stream, as the device's stream does: after what was launched before it,
// before what is launched after it.
func memcpyPeer(dst dptr, dctx context, src dptr, sctx context, n int64) error {
	return cuErr("cuMemcpyPeer", C.hy_memcpy_peer(C.CUdeviceptr(dst), dctx.c, C.CUdeviceptr(src), sctx.c, C.size_t(n)))
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

// hostRegister pins n bytes of host memory at p, which may be a read-only
// mapping of a file, so that copies from it run at the link's DMA rate.
func hostRegister(p unsafe.Pointer, n int64) error {
	return cuErr("cuMemHostRegister", C.hy_host_register(p, C.size_t(n)))
}

func hostUnregister(p unsafe.Pointer) error {
	return cuErr("cuMemHostUnregister", C.hy_host_unregister(p))
}

// memcpyHtoD2D copies rows of width bytes, spitch apart at host src, to
// dpitch apart at device dst (synchronously, ordered after earlier work).
func memcpyHtoD2D(dst dptr, dpitch int, src unsafe.Pointer, spitch, width, rows int) error {
	return cuErr("cuMemcpy2D", C.hy_htod_2d(C.CUdeviceptr(dst), C.size_t(dpitch), src, C.size_t(spitch), C.size_t(width), C.size_t(rows)))
}

// copyHtoD2D is memcpyHtoD2D from pinned host memory queued on s.
func (s stream) copyHtoD2D(dst dptr, dpitch int, src unsafe.Pointer, spitch, width, rows int) error {
	return cuErr("cuMemcpy2DAsync", C.hy_htod_2d_async(C.CUdeviceptr(dst), C.size_t(dpitch), src, C.size_t(spitch), C.size_t(width), C.size_t(rows), s.s))
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

// maxThreads is the most threads a block of k may have: for a kernel with
// __launch_bounds__, the bound it was built for.
func maxThreads(k kernel) (int, error) {
	var n C.int
	if err := cuErr("cuFuncGetAttribute "+k.name, C.hy_max_threads(&n, k.fn)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// allowShared lets k's launches take up to n bytes of dynamic shared memory
// (past the 48 KiB a launch gets without asking).
func allowShared(k kernel, n int) error {
	return cuErr("cuFuncSetAttribute "+k.name, C.hy_max_shared(k.fn, C.int(n)))
}
