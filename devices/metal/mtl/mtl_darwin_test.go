//go:build darwin

package mtl

import (
	"errors"
	"math"
	"strings"
	"testing"
	"unsafe"
)

// These tests need a Mac with a Metal GPU; elsewhere on darwin they skip.
// (Compiled on Linux for darwin/arm64; unverified until run on a Mac.)

func gpu(t *testing.T) *Device {
	t.Helper()
	d, err := SystemDefault()
	if errors.Is(err, ErrNoDevice) {
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Release)
	return d
}

const testSource = `
#include <metal_stdlib>
using namespace metal;
struct params { uint n; float scale; };
kernel void scale_add(device const float *a [[buffer(0)]], device const float *b [[buffer(1)]],
                      device float *out [[buffer(2)]], constant params &p [[buffer(3)]],
                      threadgroup float *tg [[threadgroup(0)]],
                      uint i [[thread_position_in_grid]], uint t [[thread_position_in_threadgroup]]) {
    tg[t] = a[i];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (i < p.n) out[i] = tg[t] * p.scale + b[i];
}
`

// TestRoundTrip compiles a kernel, runs it over shared buffers (one of them
// wrapping Go memory without a copy where Metal allows) and checks every
// element and the command buffer's state.
func TestRoundTrip(t *testing.T) {
	d := gpu(t)
	t.Logf("%s: working set %d bytes, unified %v, max buffer %d", d.Name(), d.RecommendedMaxWorkingSetSize(), d.HasUnifiedMemory(), d.MaxBufferLength())
	lib, err := d.NewLibrary(testSource, CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Release()
	p, err := lib.Pipeline("scale_add")
	if err != nil {
		t.Fatal(err)
	}
	if p2, _ := lib.Pipeline("scale_add"); p2 != p {
		t.Fatal("pipeline not cached")
	}
	if p.MaxThreads < 32 || p.ExecWidth <= 0 {
		t.Fatalf("pipeline limits %d threads, width %d", p.MaxThreads, p.ExecWidth)
	}
	const n = 1000
	a, _ := d.NewBuffer(4 * n)
	defer a.Release()
	bHost := make([]float32, n+4096) // Go memory, wrapped if Metal accepts it
	bb := unsafe.Slice((*byte)(unsafe.Pointer(&bHost[0])), 4*n)
	b, boff, err := d.NewBufferNoCopy(bb)
	if err != nil {
		t.Logf("no-copy refused (%v): copying", err)
		if b, err = d.NewBufferWithBytes(bb); err != nil {
			t.Fatal(err)
		}
		boff = 0
	}
	defer b.Release()
	out, _ := d.NewBuffer(4 * n)
	defer out.Release()
	av := unsafe.Slice((*float32)(a.Contents()), n)
	bv := unsafe.Slice((*float32)(unsafe.Add(b.Contents(), boff)), n)
	for i := range n {
		av[i], bv[i] = float32(i), float32(2*i)
	}
	q, err := d.NewQueue()
	if err != nil {
		t.Fatal(err)
	}
	defer q.Release()
	cb, err := q.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Release()
	enc, err := cb.Encoder()
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Release()
	params := make([]byte, 8)
	*(*uint32)(unsafe.Pointer(&params[0])) = n
	*(*float32)(unsafe.Pointer(&params[4])) = 0.5
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(enc.SetPipeline(p))
	must(enc.SetBuffer(a, 0, 0))
	must(enc.SetBuffer(b, boff, 1))
	must(enc.SetBuffer(out, 0, 2))
	must(enc.SetBytes(params, 3))
	must(enc.SetThreadgroupMemory(4*64, 0, int(d.MaxThreadgroupMemoryLength())))
	if err := enc.Dispatch(Size{1, 1, 1}, Size{uint64(p.MaxThreads) + 1, 1, 1}); err == nil {
		t.Fatal("a threadgroup over the kernel's maximum was accepted")
	}
	must(enc.Dispatch(Size{(n + 63) / 64, 1, 1}, Size{64, 1, 1}))
	must(enc.End())
	must(cb.Commit())
	must(cb.Wait())
	if st := cb.Status(); st != StatusCompleted {
		t.Fatalf("status %s", st)
	}
	ov := unsafe.Slice((*float32)(out.Contents()), n)
	for i := range n {
		if want := float32(i)*0.5 + float32(2*i); ov[i] != want {
			t.Fatalf("out[%d] = %g, want %g", i, ov[i], want)
		}
	}
	if g := cb.GPUTime(); g <= 0 || math.IsNaN(g.Seconds()) {
		t.Errorf("GPU time %v", g)
	}
}

// TestCompileError checks that the compiler's message reaches the error.
func TestCompileError(t *testing.T) {
	d := gpu(t)
	_, err := d.NewLibrary("kernel void broken(device float *x [[buffer(0)]]) { x[0] = undeclared_name; }", CompileOptions{})
	if err == nil || !strings.Contains(err.Error(), "undeclared_name") {
		t.Fatalf("compile error %v does not quote the compiler", err)
	}
	lib, err := d.NewLibrary(testSource, CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Release()
	if _, err := lib.Pipeline("no_such_kernel"); err == nil || !strings.Contains(err.Error(), "no_such_kernel") {
		t.Fatalf("missing function: %v", err)
	}
}

// TestNilObjects checks that released and nil objects give errors.
func TestNilObjects(t *testing.T) {
	var e *Encoder
	if err := e.SetBuffer(nil, 0, 0); !errors.Is(err, ErrReleased) {
		t.Fatal(err)
	}
	var cb *CommandBuffer
	if err := cb.Commit(); !errors.Is(err, ErrReleased) {
		t.Fatal(err)
	}
	var l *Library
	if _, err := l.Pipeline("x"); !errors.Is(err, ErrReleased) {
		t.Fatal(err)
	}
	var d *Device
	if _, err := d.NewBuffer(4); !errors.Is(err, ErrReleased) {
		t.Fatal(err)
	}
}
