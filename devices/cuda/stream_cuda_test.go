//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"hybrid/devices"
	"hybrid/ops"
	"hybrid/quant"
	"hybrid/verify"
)

// mat is a weight twice over: res to make resident, str to stream, the
// same bytes.
type mat struct {
	res, str *ops.Weight
	data     []byte
}

type matShape struct {
	typ        quant.Type
	rows, cols int
}

// streamMats makes a random weight of each shape, named prefix+"res"+i and
// prefix+"str"+i.
func streamMats(t *testing.T, r *rand.Rand, prefix string, shapes []matShape) []mat {
	t.Helper()
	var ms []mat
	for i, sh := range shapes {
		data, _ := quantized(t, r, sh.typ, sh.rows, sh.cols)
		ms = append(ms, mat{
			res:  &ops.Weight{Name: fmt.Sprintf("%sres%d", prefix, i), Type: sh.typ, Rows: sh.rows, Cols: sh.cols},
			str:  &ops.Weight{Name: fmt.Sprintf("%sstr%d", prefix, i), Type: sh.typ, Rows: sh.rows, Cols: sh.cols},
			data: data,
		})
	}
	return ms
}

// TestStreamWeight multiplies with weights streamed into the two slots
// (growing them, and reusing each) and requires the results bit for bit
// those of the same weights made resident: the same kernels read the same
// bytes, copied from pinned pages (a weight of 1 MiB or more) or through the
// staging buffer. A weight evicted by two later streams is no longer there
// to run.
func TestStreamWeight(t *testing.T) {
	g := gpu(t)
	r := rand.New(rand.NewPCG(5, 6))
	const n = 77 // a prompt's tensor-core tiles
	ms := streamMats(t, r, "", []matShape{{quant.Q4_0, 512, 256}, {quant.Q4_K, 2048, 1024}, {quant.Q8_0, 1024, 2048}, {quant.Q3_K, 512, 11008},
		{quant.Q6_K, 512, 11008}})
	run := func(w *ops.Weight, x []float32) ([]float32, error) {
		in, err := g.Alloc(len(x))
		if err != nil {
			return nil, err
		}
		defer g.Free(in)
		out, err := g.Alloc(n * w.Rows)
		if err != nil {
			return nil, err
		}
		defer g.Free(out)
		if err := g.Write(in, x); err != nil {
			return nil, err
		}
		op := &ops.Op{Kind: ops.MatMul, Name: "mm." + w.Name, Weight: w}
		if err := g.Run(op, ops.Step{Tokens: make([]int32, n)}, []devices.Buffer{in}, out); err != nil {
			return nil, err
		}
		y := make([]float32, n*w.Rows)
		return y, g.Read(y, out)
	}
	check := func(m mat) {
		t.Helper()
		x := verify.RandVec(r, n*m.res.Cols)
		want, err := run(m.res, x)
		if err != nil {
			t.Fatal(err)
		}
		got, err := run(m.str, x)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: element %d streamed %g, resident %g", m.str.Name, i, got[i], want[i])
			}
		}
	}
	for _, m := range ms {
		if err := g.LoadWeight(m.res, m.data); err != nil {
			t.Fatal(err)
		}
	}
	// Less the slots an earlier test grew (TestStreamKV keeps a cache there).
	var before int64
	if err := g.do(func() error { before = g.slots2.size[0] + g.slots2.size[1]; return nil }); err != nil {
		t.Fatal(err)
	}
	used := g.MemoryUsed() - before
	stream := func(m mat) {
		t.Helper()
		if err := g.StreamWeight(m.str, m.data); err != nil {
			t.Fatal(err)
		}
	}
	stream(ms[0])
	check(ms[0])
	stream(ms[1]) // the other slot
	stream(ms[2]) // slot 0 again, grown: ms[0] is gone
	check(ms[1])
	check(ms[2])
	if _, err := run(ms[0].str, verify.RandVec(r, n*ms[0].str.Cols)); err == nil || !strings.Contains(err.Error(), "not loaded") {
		t.Fatalf("running with an evicted streamed weight: %v", err)
	}
	stream(ms[0]) // slot 1, which holds ms[1]
	check(ms[0])
	check(ms[2])
	// Streaming a resident weight changes nothing: both slots keep theirs.
	if err := g.StreamWeight(ms[1].res, ms[1].data); err != nil {
		t.Fatal(err)
	}
	check(ms[0])
	check(ms[2])
	// The Q4_K weight (1.2 MB) is copied from its pinned pages, the Q4_0
	// one (74 KB) through the staging buffer.
	var pinned pinnedRange
	if err := g.do(func() error { pinned = g.slots2.pinned[ms[1].str.Name]; return nil }); err != nil {
		t.Fatal(err)
	}
	if pinned.n == 0 || pinned.n > len(ms[1].data) {
		t.Errorf("%s: %d of its %d bytes pinned", ms[1].str.Name, pinned.n, len(ms[1].data))
	}
	// Q3_K rows of 11008 columns (4730 bytes) take a 4736-byte stride on
	// the device: copied row by row from the pinned pages (cuMemcpy2D).
	stream(ms[3])
	check(ms[3])
	check(ms[0])
	if err := g.do(func() error { pinned = g.slots2.pinned[ms[3].str.Name]; return nil }); err != nil {
		t.Fatal(err)
	}
	if pinned.n == 0 {
		t.Errorf("%s: nothing pinned", ms[3].str.Name)
	}
	// Q6_K rows (9030 bytes) are regrouped (layout.go: 10080 bytes, 48
	// blocks), all through the edge buffer: nothing pinned.
	stream(ms[4])
	check(ms[4])
	check(ms[3])
	if err := g.do(func() error { pinned = g.slots2.pinned[ms[4].str.Name]; return nil }); err != nil {
		t.Fatal(err)
	}
	if pinned.n != 0 {
		t.Errorf("%s: %d bytes pinned, regrouped rows go through the edge buffer", ms[4].str.Name, pinned.n)
	}
	var slots int64
	if err := g.do(func() error { slots = g.slots2.size[0] + g.slots2.size[1]; return nil }); err != nil {
		t.Fatal(err)
	}
	if max2 := 2 * int64(512*10080+16); slots > max2 {
		t.Errorf("the slots hold %d bytes, more than two of the largest weight (%d)", slots, max2)
	}
	if g.MemoryUsed() < used+slots {
		t.Errorf("memory in use %d does not count the slots' %d bytes", g.MemoryUsed()-used, slots)
	}
}

// TestStreamWeightQueued streams twelve weights in turn, each multiplied as
// soon as it is streamed, with nothing read back until all are queued: the
// copies run on their own stream while the kernels before them run, so a
// copy into a slot must wait for the kernel that read the slot's last
// weight, and a kernel for its weight's copy. Every product is the resident
// weight's bit for bit; the second half of the rounds with a prompt's
// attention between (the slots then hold a streamed KV cache).
func TestStreamWeightQueued(t *testing.T) {
	g := gpu(t)
	r := rand.New(rand.NewPCG(7, 8))
	const n = 64
	ms := streamMats(t, r, "q", []matShape{{quant.Q4_0, 4096, 1024}, {quant.Q8_0, 256, 1024}, {quant.Q6_K, 1024, 11008}, {quant.Q4_K, 3072, 1024}})
	for _, m := range ms {
		if err := g.LoadWeight(m.res, m.data); err != nil {
			t.Fatal(err)
		}
	}
	a := ops.AttnParams{Heads: 8, KVHeads: 2, HeadDim: 64, Context: 512}
	attn := &ops.Op{Kind: ops.Attention, Name: "queued.attn", Layer: 900, Attn: a}
	const rounds = 12
	var bufs []devices.Buffer
	defer func() {
		for _, b := range bufs {
			g.Free(b)
		}
	}()
	buf := func(elems int) devices.Buffer {
		b, err := g.Alloc(elems)
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
		return b
	}
	st := ops.Step{Tokens: make([]int32, n)}
	mul := func(w *ops.Weight, in, out devices.Buffer) {
		if err := g.Run(&ops.Op{Kind: ops.MatMul, Name: "mm." + w.Name, Weight: w}, st, []devices.Buffer{in}, out); err != nil {
			t.Fatal(err)
		}
	}
	type product struct {
		m        mat
		in       devices.Buffer
		got, res devices.Buffer
	}
	var ps []product
	qkv := [3]devices.Buffer{buf(n * a.Heads * a.HeadDim), buf(n * a.KVHeads * a.HeadDim), buf(n * a.KVHeads * a.HeadDim)}
	for i, x := range [][]float32{verify.RandVec(r, n*a.Heads*a.HeadDim), verify.RandVec(r, n*a.KVHeads*a.HeadDim), verify.RandVec(r, n*a.KVHeads*a.HeadDim)} {
		if err := g.Write(qkv[i], x); err != nil {
			t.Fatal(err)
		}
	}
	ao := buf(n * a.Heads * a.HeadDim)
	for i := range rounds {
		m := ms[i%len(ms)]
		p := product{m: m, in: buf(n * m.res.Cols), got: buf(n * m.res.Rows), res: buf(n * m.res.Rows)}
		if err := g.Write(p.in, verify.RandVec(r, n*m.res.Cols)); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	for i, p := range ps {
		if err := g.StreamWeight(p.m.str, p.m.data); err != nil {
			t.Fatal(err)
		}
		mul(p.m.str, p.in, p.got)
		if i >= rounds/2 && i%2 == 0 {
			if err := g.StreamKV(attn, st, nil, nil); err != nil {
				t.Fatal(err)
			}
			if err := g.Run(attn, st, qkv[:], ao); err != nil {
				t.Fatal(err)
			}
			kdim := a.KVHeads * a.HeadDim
			if err := g.StreamedKV(attn, st, make([]uint16, n*kdim), make([]uint16, n*kdim)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range ps {
		mul(p.m.res, p.in, p.res)
	}
	for i, p := range ps {
		got, want := make([]float32, n*p.m.res.Rows), make([]float32, n*p.m.res.Rows)
		if err := g.Read(got, p.got); err != nil {
			t.Fatal(err)
		}
		if err := g.Read(want, p.res); err != nil {
			t.Fatal(err)
		}
		for j := range want {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
				t.Fatalf("round %d, %s: element %d streamed %g, resident %g", i, p.m.str.Name, j, got[j], want[j])
			}
		}
	}
}
