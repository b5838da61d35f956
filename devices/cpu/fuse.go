package cpu

import (
	"os"
	"strings"
	"unsafe"

	"hybrid/devices"
	"hybrid/devices/cpu/kernels"
	"hybrid/ops"
	"hybrid/quant"
)

// fuseOff turns the holding of mat-vecs off for a whole process
// (HYBRID_CPU_FUSE=0), to measure what it gains.
var fuseOff = os.Getenv("HYBRID_CPU_FUSE") == "0"

// held is the mat-vecs a device holds back to run together (Run): one
// input x, each op's matrix and output.
type held struct {
	x    []float32
	cols int
	jobs []kernels.VecJob
	ops  opList
	err  error // of a flush no caller could be told of (DropWeight), for the next call
}

// opList names a group's ops in an error, made only when one is.
type opList []*ops.Op

func (l *opList) String() string {
	names := make([]string, len(*l))
	for i, op := range *l {
		names[i] = op.String()
	}
	return strings.Join(names, ", ")
}

// hold takes op into the held group where it is a mat-vec of a quantized
// weight: joined to the group if it multiplies the group's input into an
// output apart from every buffer the group reads and writes, else after
// running the group. It reports whether op was held; an error is the
// group's.
func (d *Device) hold(op *ops.Op, in []devices.Buffer, out devices.Buffer) (bool, error) {
	if !d.fuse || fuseOff || op.Kind != ops.MatMul || op.Weight == nil || len(in) != 1 {
		return false, nil
	}
	xb, err := d.buf(in[0])
	if err != nil {
		return false, nil
	}
	ob, err := d.buf(out)
	if err != nil {
		return false, nil
	}
	d.mu.Lock()
	w := d.weights[op.Weight.Name]
	d.mu.Unlock()
	x, y := xb.F, ob.F
	if w == nil || len(x) != w.w.Cols || len(y) != w.w.Rows || len(x) == 0 || overlap(x, y) || !kernels.SameInput(w.w.Type, w.w.Type) {
		// A batch, an f32/f16 weight (SameInput of a type with itself is
		// false for inputs not quantized), or what run reports.
		return false, nil
	}
	pk, err := d.packedWeight(w)
	if err != nil {
		return false, nil // run reports it
	}
	job := kernels.VecJob{T: w.w.Type, W: w.raw, Rows: w.w.Rows, Y: y}
	if pk != nil {
		job = kernels.VecJob{P: pk, Y: y}
	}
	g := &d.held
	if len(g.jobs) > 0 && !g.joins(x, y, w.w.Type) {
		if err := d.flush(); err != nil {
			return false, err
		}
	}
	if len(g.jobs) == 0 {
		g.x, g.cols = x, w.w.Cols
	}
	g.jobs = append(g.jobs, job)
	g.ops = append(g.ops, op)
	return true, nil
}

// joins reports whether a mat-vec of x into y, of a weight of type t, can
// run in the group.
func (g *held) joins(x, y []float32, t quant.Type) bool {
	if len(x) != len(g.x) || &x[0] != &g.x[0] || overlap(y, g.x) {
		return false
	}
	if !kernels.SameInput(g.jobs[0].Type(), t) {
		return false
	}
	for i := range g.jobs {
		if overlap(y, g.jobs[i].Y) {
			return false
		}
	}
	return true
}

// flush runs the held mat-vecs, if any, as one job, and returns its error
// or one kept from an earlier flush.
func (d *Device) flush() error {
	g := &d.held
	if err := g.err; err != nil {
		g.err = nil
		return err
	}
	if len(g.jobs) == 0 {
		return nil
	}
	err := d.guard(&g.ops, func() error {
		kernels.MatVecs(d.pool, g.x, g.cols, g.jobs)
		return nil
	})
	clear(g.jobs)
	clear(g.ops)
	g.x, g.jobs, g.ops = nil, g.jobs[:0], g.ops[:0]
	return err
}

// flushLater runs the held mat-vecs for a caller that cannot return their
// error, which the next call that can returns.
func (d *Device) flushLater() {
	if err := d.flush(); err != nil {
		d.held.err = err
	}
}

// overlap reports whether a and b share memory.
func overlap(a, b []float32) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return a0 < b0+4*uintptr(len(b)) && b0 < a0+4*uintptr(len(a))
}
