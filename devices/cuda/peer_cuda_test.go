//go:build cuda

package cuda

import (
	"math/rand/v2"
	"slices"
	"testing"

	"hybrid/devices"
	"hybrid/ops"
	"hybrid/verify"
)

// TestCopyToPeer checks copies between two GPUs (skipped with fewer): the
// data arrives whole; an op queued on the source before the copy has
// written what is copied; an op queued on the target before the copy has
// read its input before the copy overwrites it; and a copy to a non-CUDA
// device is declined.
func TestCopyToPeer(t *testing.T) {
	devs, err := Open()
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	defer func() {
		for _, d := range devs {
			d.Close()
		}
	}()
	if len(devs) < 2 {
		t.Skipf("skipping: %d GPU", len(devs))
	}
	for _, d := range devs {
		t.Logf("%s: %s", d.Name(), d.Info().Detail)
	}
	a, b := devs[0].(*Device), devs[1].(*Device)
	r := rand.New(rand.NewPCG(1, 2))
	const n = 1 << 20
	x, y := verify.RandVec(r, n), verify.RandVec(r, n)
	alloc := func(d *Device, v []float32) devices.Buffer {
		buf, err := d.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		if v != nil {
			if err := d.Write(buf, v); err != nil {
				t.Fatal(err)
			}
		}
		return buf
	}
	ax, ay, asum := alloc(a, x), alloc(a, y), alloc(a, nil)
	bx, by, bsum := alloc(b, nil), alloc(b, y), alloc(b, nil)
	add := &ops.Op{Kind: ops.Add, Name: "add"}
	// On a: asum = x + y, queued, not yet launched; then the copy to b.
	if err := a.Run(add, ops.Step{}, []devices.Buffer{ax, ay}, asum); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.CopyTo(b, bx, asum, n); !ok || err != nil {
		t.Fatalf("CopyTo: %v, %v", ok, err)
	}
	want := make([]float32, n)
	for i := range want {
		want[i] = x[i] + y[i]
	}
	got := make([]float32, n)
	if err := b.Read(got, bx); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatal("the copy does not hold the sum queued before it on the source")
	}
	// On b: bsum = bx + by queued; then a copy of x over bx: the sum must
	// have read the old bx (x+y), giving x+2y.
	if err := b.Run(add, ops.Step{}, []devices.Buffer{bx, by}, bsum); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.CopyTo(b, bx, ax, n); !ok || err != nil {
		t.Fatalf("CopyTo: %v, %v", ok, err)
	}
	if err := b.Read(got, bsum); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if w := (x[i] + y[i]) + y[i]; got[i] != w {
			t.Fatalf("sum[%d] = %g, want %g: the copy overwrote the target's input before the op queued before it read it", i, got[i], w)
		}
	}
	if err := b.Read(got, bx); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, x) {
		t.Fatal("the second copy did not arrive")
	}
	if ok, _ := a.CopyTo(cpuDev, bx, ax, n); ok {
		t.Fatal("a copy to the CPU device was not declined")
	}
	if _, err := a.CopyTo(b, bx, ax, n+1); err == nil {
		t.Fatal("a copy past the buffers' length was accepted")
	}
}
