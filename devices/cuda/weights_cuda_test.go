//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"hybrid/devices"
	"hybrid/ops"
	"hybrid/quant"
	"hybrid/verify"
)

// gpuInUse is the memory the GPU has in use, by every process: what
// nvidia-smi shows, the driver's pages included.
func gpuInUse(t *testing.T, g *Device) int64 {
	t.Helper()
	var free int64
	if err := g.do(func() error {
		var err error
		free, err = memFreeBytes()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return g.total - free
}

// TestLoadWeightsTogether loads a model's worth of small weights with
// LoadWeights, into one allocation, and the same bytes one LoadWeight each:
// every product (a decode row and a prompt's 77) and every norm is bit for
// bit the same, MemoryUsed and MemoryPeak count them, and the GPU's memory
// in use grows by their bytes and at most one driver page more; one
// allocation apiece takes a page or more each.
func TestLoadWeightsTogether(t *testing.T) {
	g := gpu(t)
	r := rand.New(rand.NewPCG(11, 12))
	shapes := []matShape{{quant.Q4_0, 256, 2048}, {quant.Q4_K, 256, 2048}, {quant.Q6_K, 320, 1024},
		{quant.Q8_0, 200, 1024}, {quant.F16, 96, 260}, {quant.F32, 1, 2048}}
	var ws, ones []*ops.Weight
	var data [][]byte
	var bytes int64 // as the device lays them out (weightLayout)
	for i := range 48 {
		sh := shapes[i%len(shapes)]
		b, _ := quantized(t, r, sh.typ, sh.rows, sh.cols)
		w := &ops.Weight{Name: fmt.Sprintf("together%d", i), Type: sh.typ, Rows: sh.rows, Cols: sh.cols}
		ws = append(ws, w)
		ones = append(ones, &ops.Weight{Name: fmt.Sprintf("alone%d", i), Type: sh.typ, Rows: sh.rows, Cols: sh.cols})
		data = append(data, b)
		res, _, err := weightLayout(w, b)
		if err != nil {
			t.Fatal(err)
		}
		bytes += int64(res.rowBytes) * int64(res.w.Rows)
	}
	used, inUse := g.MemoryUsed(), gpuInUse(t, g)
	if err := g.LoadWeights(ws, data); err != nil {
		t.Fatal(err)
	}
	held, grew := g.MemoryUsed()-used, gpuInUse(t, g)-inUse
	// The norms are held as f32 (as many bytes here), the F16 rows padded
	// to 16 bytes, Q6_K's rows of four blocks regrouped into a group of
	// eight (layout.go), each weight at a 256-byte boundary with 16 of slack.
	if held < bytes || held > bytes+int64(len(ws))*(256+16) {
		t.Errorf("LoadWeights of %d bytes holds %d", bytes, held)
	}
	if grew > held+(2<<20) {
		t.Errorf("LoadWeights of %d bytes: the GPU has %d more in use", held, grew)
	}
	// Loading them again changes nothing.
	if err := g.LoadWeights(ws, data); err != nil {
		t.Fatal(err)
	}
	if g.MemoryUsed()-used != held {
		t.Errorf("loading resident weights again took %d bytes more", g.MemoryUsed()-used-held)
	}
	inUse = gpuInUse(t, g)
	for i, w := range ones {
		if err := g.LoadWeight(w, data[i]); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d weights, %d bytes: one allocation took %d bytes of GPU memory, one each %d", len(ws), bytes, grew, gpuInUse(t, g)-inUse)
	if m := g.MemoryPeak(); m.Weights < 2*held || m.Total < m.Weights || m.Runtime <= 0 {
		t.Errorf("MemoryPeak after loading %d bytes twice: %+v", held, m)
	}

	run := func(w *ops.Weight, n int, x []float32) []float32 {
		t.Helper()
		op := &ops.Op{Kind: ops.MatMul, Name: "mm." + w.Name, Weight: w}
		rows := w.Rows
		if w.Rows == 1 {
			op = &ops.Op{Kind: ops.RMSNorm, Name: "norm." + w.Name, Eps: 1e-5, Weight: w}
			rows = w.Cols
		}
		in, err := g.Alloc(len(x))
		if err != nil {
			t.Fatal(err)
		}
		defer g.Free(in)
		out, err := g.Alloc(n * rows)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Free(out)
		if err := g.Write(in, x); err != nil {
			t.Fatal(err)
		}
		if err := g.Run(op, ops.Step{Tokens: make([]int32, n)}, []devices.Buffer{in}, out); err != nil {
			t.Fatal(err)
		}
		y := make([]float32, n*rows)
		if err := g.Read(y, out); err != nil {
			t.Fatal(err)
		}
		return y
	}
	for i, w := range ws {
		for _, n := range []int{1, 77} {
			x := verify.RandVec(r, n*w.Cols)
			want, got := run(ones[i], n, x), run(w, n, x)
			for j := range want {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Fatalf("%s (%s %d×%d), %d rows: element %d is %g loaded together, %g alone", w.Name, w.Type, w.Rows, w.Cols, n, j, got[j], want[j])
				}
			}
		}
	}
}
