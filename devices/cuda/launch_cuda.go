//go:build cuda

package cuda

// Launches, streams, graphs, pinned host memory and event timing (the rest
// of the driver calls are in driver_cuda.go). These run on the device's
// thread like the rest.

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <string.h>

// hy_launch launches f on stream s with shmem bytes of dynamic shared
// memory and n parameters whose values sit in 8-byte slots of args (an int or
// float parameter reads the low bytes); with pdl as a programmatic dependent
// launch (it may start once the launch before lets it, and waits for that
// launch in griddepcontrol.wait).
static CUresult hy_launch(CUfunction f, unsigned gx, unsigned gy, unsigned bx, unsigned shmem, void *args, int n, CUstream s, int pdl) {
	void *p[32];
	for (int i = 0; i < n && i < 32; i++) p[i] = (char *)args + 8 * i;
	if (pdl) {
		CUlaunchAttribute at;
		memset(&at, 0, sizeof at);
		at.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
		at.value.programmaticStreamSerializationAllowed = 1;
		CUlaunchConfig c;
		memset(&c, 0, sizeof c);
		c.gridDimX = gx, c.gridDimY = gy, c.gridDimZ = 1, c.blockDimX = bx, c.blockDimY = 1, c.blockDimZ = 1;
		c.sharedMemBytes = shmem, c.hStream = s, c.attrs = &at, c.numAttrs = 1;
		return cuLaunchKernelEx(&c, f, p, 0);
	}
	return cuLaunchKernel(f, gx, gy, 1, bx, 1, 1, shmem, s, p, 0);
}

// hy_occupancy is how many blocks of bx threads and shmem bytes of dynamic
// shared memory of f one multiprocessor holds at once.
static CUresult hy_occupancy(int *n, CUfunction f, int bx, size_t shmem) { return cuOccupancyMaxActiveBlocksPerMultiprocessor(n, f, bx, shmem); }

// The device's stream synchronises with the legacy default stream (which
// the synchronous copies of driver_cuda.go use), so the order of all its
// work is kept.
static CUresult hy_stream_create(CUstream *s) { return cuStreamCreate(s, CU_STREAM_DEFAULT); }
static void hy_stream_destroy(CUstream s) { cuStreamDestroy(s); }
static CUresult hy_dtod(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { return cuMemcpyDtoDAsync(dst, src, n, s); }

// Graph capture and replay of a step's launches on stream s.
static CUresult hy_capture_begin(CUstream s) { return cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED); }
static CUresult hy_capture_end(CUstream s, CUgraph *g) { return cuStreamEndCapture(s, g); }
static CUresult hy_instantiate(CUgraphExec *e, CUgraph g) { return cuGraphInstantiateWithFlags(e, g, 0); }
static CUresult hy_graph_launch(CUgraphExec e, CUstream s) { return cuGraphLaunch(e, s); }
static void hy_graph_free(CUgraph g, CUgraphExec e) {
	if (e) cuGraphExecDestroy(e);
	if (g) cuGraphDestroy(g);
}

// Copies on a stream of their own (streamed weights) and the events that
// order them with the device's stream.
static CUresult hy_htod_async(CUdeviceptr d, const void *s, size_t n, CUstream st) { return cuMemcpyHtoDAsync(d, s, n, st); }
static CUresult hy_dtoh_async(void *d, CUdeviceptr s, size_t n, CUstream st) { return cuMemcpyDtoHAsync(d, s, n, st); }
static CUresult hy_event_new(CUevent *e) { return cuEventCreate(e, CU_EVENT_DISABLE_TIMING); }
static CUresult hy_event_timed(CUevent *e) { return cuEventCreate(e, CU_EVENT_DEFAULT); }
static CUresult hy_record_on(CUevent e, CUstream s) { return cuEventRecord(e, s); }
static CUresult hy_wait_event(CUstream s, CUevent e) { return cuStreamWaitEvent(s, e, 0); }
static CUresult hy_event_sync(CUevent e) { return cuEventSynchronize(e); }
static void hy_event_destroy(CUevent e) { cuEventDestroy(e); }

static CUresult hy_host_alloc(void **p, size_t n) { return cuMemAllocHost(p, n); }
static CUresult hy_host_free(void *p) { return cuMemFreeHost(p); }

static CUresult hy_event_pair(CUevent *a, CUevent *b) {
	CUresult r = cuEventCreate(a, CU_EVENT_DEFAULT);
	if (r) return r;
	return cuEventCreate(b, CU_EVENT_DEFAULT);
}
static CUresult hy_record(CUevent e) { return cuEventRecord(e, 0); }
static CUresult hy_elapsed_on(CUevent a, CUevent b, float *ms) { return cuEventElapsedTime(ms, a, b); }
static CUresult hy_elapsed(CUevent a, CUevent b, float *ms) {
	CUresult r = cuEventSynchronize(b);
	if (r) return r;
	return cuEventElapsedTime(ms, a, b);
}
static void hy_event_free(CUevent a, CUevent b) { cuEventDestroy(a); cuEventDestroy(b); }
static const char *hy_err(CUresult r) {
	const char *s = 0;
	cuGetErrorName(r, &s);
	return s ? s : "unknown CUDA error";
}
*/
import "C"

import (
	"fmt"
	"math"
	"time"
	"unsafe"
)

// kernel is a loaded function; fn is the driver's handle.
type kernel struct {
	name    string
	fn      C.CUfunction
	threads int  // a block's threads where the kernel sets them (wideMV), else 0
	pdl     bool // launched as a programmatic dependent launch (launchMV, where kernels.pdl)
}

// maxArgs is the most parameters a kernel takes (hy_launch's array).
const maxArgs = 32

// args collects one launch's parameters in the device's slot array; the
// device's thread owns it, so a launch allocates nothing.
type args struct {
	slot *[maxArgs]uint64
	n    int
	s    stream
}

func (a *args) ptr(p uintptr) *args { a.slot[a.n] = uint64(p); a.n++; return a }
func (a *args) i32(v int) *args     { a.slot[a.n] = uint64(uint32(int32(v))); a.n++; return a }
func (a *args) i64(v int64) *args   { a.slot[a.n] = uint64(v); a.n++; return a }
func (a *args) f32(v float32) *args { a.slot[a.n] = uint64(math.Float32bits(v)); a.n++; return a }

// stream is a CUDA stream of the device's context.
type stream struct{ s C.CUstream }

func newStream() (stream, error) {
	var s stream
	if r := C.hy_stream_create(&s.s); r != 0 {
		return s, fmt.Errorf("cuStreamCreate: %s", C.GoString(C.hy_err(r)))
	}
	return s, nil
}

func (s stream) destroy() {
	if s.s != nil {
		C.hy_stream_destroy(s.s)
	}
}

// copyDtoD queues a device-to-device copy of n bytes on s.
func (s stream) copyDtoD(dst, src uintptr, n int) error {
	if r := C.hy_dtod(C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(n), s.s); r != 0 {
		return fmt.Errorf("cuMemcpyDtoDAsync(%d bytes): %s", n, C.GoString(C.hy_err(r)))
	}
	return nil
}

// copyHtoD queues a copy of n bytes from pinned host memory at src to dst
// on s.
func (s stream) copyHtoD(dst dptr, src unsafe.Pointer, n int) error {
	if r := C.hy_htod_async(C.CUdeviceptr(dst), src, C.size_t(n), s.s); r != 0 {
		return fmt.Errorf("cuMemcpyHtoDAsync(%d bytes): %s", n, C.GoString(C.hy_err(r)))
	}
	return nil
}

// copyDtoH queues a copy of n bytes from src to pinned host memory at dst
// on s.
func (s stream) copyDtoH(dst unsafe.Pointer, src dptr, n int) error {
	if r := C.hy_dtoh_async(dst, C.CUdeviceptr(src), C.size_t(n), s.s); r != 0 {
		return fmt.Errorf("cuMemcpyDtoHAsync(%d bytes): %s", n, C.GoString(C.hy_err(r)))
	}
	return nil
}

// wait makes the work queued on s after it wait for e.
func (s stream) wait(e event) error {
	if r := C.hy_wait_event(s.s, e.e); r != 0 {
		return fmt.Errorf("cuStreamWaitEvent: %s", C.GoString(C.hy_err(r)))
	}
	return nil
}

// event marks a point in a stream's work.
type event struct{ e C.CUevent }

func newEvent() (event, error) {
	var e event
	if r := C.hy_event_new(&e.e); r != 0 {
		return e, fmt.Errorf("cuEventCreate: %s", C.GoString(C.hy_err(r)))
	}
	return e, nil
}

// newTimedEvent returns an event that keeps the time it was reached
// (elapsed).
func newTimedEvent() (event, error) {
	var e event
	if r := C.hy_event_timed(&e.e); r != 0 {
		return e, fmt.Errorf("cuEventCreate: %s", C.GoString(C.hy_err(r)))
	}
	return e, nil
}

// elapsed is the device's time from a to b, two timed events both reached.
func elapsed(a, b event) (time.Duration, error) {
	var ms C.float
	if r := C.hy_elapsed_on(a.e, b.e, &ms); r != 0 {
		return 0, fmt.Errorf("cuEventElapsedTime: %s", C.GoString(C.hy_err(r)))
	}
	return time.Duration(float64(ms) * 1e6), nil
}

// record marks the work queued on s so far.
func (e event) record(s stream) error {
	if r := C.hy_record_on(e.e, s.s); r != 0 {
		return fmt.Errorf("cuEventRecord: %s", C.GoString(C.hy_err(r)))
	}
	return nil
}

// sync waits on the host for the work e marks.
func (e event) sync() error {
	if r := C.hy_event_sync(e.e); r != 0 {
		return fmt.Errorf("cuEventSynchronize: %s", C.GoString(C.hy_err(r)))
	}
	return nil
}

func (e event) destroy() {
	if e.e != nil {
		C.hy_event_destroy(e.e)
	}
}

// graph is an instantiated CUDA graph of captured launches.
type graph struct {
	g    C.CUgraph
	e    C.CUgraphExec
	bufs []dptr // the activation buffers its batch reads and writes (dropGraphs)
}

// capture records what f queues on s into a graph instead of running it.
// f's error, or the capture's, leaves nothing captured or run.
func (s stream) capture(f func() error) (*graph, error) {
	if r := C.hy_capture_begin(s.s); r != 0 {
		return nil, fmt.Errorf("cuStreamBeginCapture: %s", C.GoString(C.hy_err(r)))
	}
	ferr := f()
	var g graph
	if r := C.hy_capture_end(s.s, &g.g); r != 0 {
		g.free()
		if ferr != nil {
			return nil, ferr
		}
		return nil, fmt.Errorf("cuStreamEndCapture: %s", C.GoString(C.hy_err(r)))
	}
	if ferr != nil {
		g.free()
		return nil, ferr
	}
	if r := C.hy_instantiate(&g.e, g.g); r != 0 {
		g.free()
		return nil, fmt.Errorf("cuGraphInstantiate: %s", C.GoString(C.hy_err(r)))
	}
	return &g, nil
}

func (g *graph) launch(s stream) error {
	if r := C.hy_graph_launch(g.e, s.s); r != 0 {
		return fmt.Errorf("cuGraphLaunch: %s", C.GoString(C.hy_err(r)))
	}
	return nil
}

func (g *graph) free() {
	C.hy_graph_free(g.g, g.e)
	g.g, g.e = nil, nil
}

// launch runs k on a gx×gy grid of bx-thread blocks on a's stream.
func launch(k kernel, gx, gy, bx int, a *args) error { return launchShared(k, gx, gy, bx, 0, a) }

// launchShared is launch with shmem bytes of dynamic shared memory per block.
func launchShared(k kernel, gx, gy, bx, shmem int, a *args) error {
	if r := C.hy_launch(k.fn, C.uint(gx), C.uint(gy), C.uint(bx), C.uint(shmem), unsafe.Pointer(&a.slot[0]), C.int(a.n), a.s.s, C.int(b2i(k.pdl))); r != 0 {
		return fmt.Errorf("launch %s (%d×%d blocks of %d): %s", k.name, gx, gy, bx, C.GoString(C.hy_err(r)))
	}
	return nil
}

// wave is the most blocks of bx threads and shmem bytes of dynamic shared
// memory of k that the GPU runs at once (one wave), at least one.
func (d *Device) wave(k kernel, bx, shmem int) (int, error) {
	key := occKey{k.fn, bx, shmem}
	if n, ok := d.occ[key]; ok {
		return n, nil
	}
	var n C.int
	if r := C.hy_occupancy(&n, k.fn, C.int(bx), C.size_t(shmem)); r != 0 {
		return 0, fmt.Errorf("cuOccupancyMaxActiveBlocksPerMultiprocessor %s: %s", k.name, C.GoString(C.hy_err(r)))
	}
	w := max(1, int(n)*d.sms)
	if d.occ == nil {
		d.occ = map[occKey]int{}
	}
	d.occ[key] = w
	return w, nil
}

// occKey is a kernel's launch shape, for wave.
type occKey struct {
	fn        C.CUfunction
	bx, shmem int
}

// hostAlloc returns n bytes of page-locked host memory.
func hostAlloc(n int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if r := C.hy_host_alloc(&p, C.size_t(n)); r != 0 {
		return nil, fmt.Errorf("cuMemAllocHost(%d): %s", n, C.GoString(C.hy_err(r)))
	}
	return p, nil
}

func hostFree(p unsafe.Pointer) {
	if p != nil {
		C.hy_host_free(p)
	}
}

// replayTimer times graph replays on the GPU for HYBRID_CUDA_DEBUG: an event
// pair recorded around each replay, read when the device's thread next
// waits for the GPU (collect), so that timing does not serialise them.
type replayTimer struct {
	pairs [][2]C.CUevent
	used  int
	n     int
	total time.Duration
}

func (t *replayTimer) start(s stream) {
	if t.used == len(t.pairs) {
		var p [2]C.CUevent
		if r := C.hy_event_pair(&p[0], &p[1]); r != 0 {
			return
		}
		t.pairs = append(t.pairs, p)
	}
	C.hy_record_on(t.pairs[t.used][0], s.s)
}

func (t *replayTimer) stop(s stream) {
	if t.used < len(t.pairs) {
		C.hy_record_on(t.pairs[t.used][1], s.s)
		t.used++
	}
}

// collect adds the recorded replays' times (waiting for them).
func (t *replayTimer) collect() {
	for _, p := range t.pairs[:t.used] {
		var ms C.float
		if C.hy_event_sync(p[1]) == 0 && C.hy_elapsed_on(p[0], p[1], &ms) == 0 {
			t.n++
			t.total += time.Duration(float64(ms) * 1e6)
		}
	}
	t.used = 0
}

func (t *replayTimer) free() {
	for _, p := range t.pairs {
		C.hy_event_free(p[0], p[1])
	}
	t.pairs, t.used = nil, 0
}

// timeOnGPU runs f (which enqueues work) between two events and returns the
// GPU time between them. Call it on the device's thread.
func timeOnGPU(f func() error) (time.Duration, error) {
	var a, b C.CUevent
	if r := C.hy_event_pair(&a, &b); r != 0 {
		return 0, fmt.Errorf("cuEventCreate: %s", C.GoString(C.hy_err(r)))
	}
	defer C.hy_event_free(a, b)
	C.hy_record(a)
	if err := f(); err != nil {
		return 0, err
	}
	C.hy_record(b)
	var ms C.float
	if r := C.hy_elapsed(a, b, &ms); r != 0 {
		return 0, fmt.Errorf("cuEventElapsedTime: %s", C.GoString(C.hy_err(r)))
	}
	return time.Duration(float64(ms) * 1e6), nil
}
