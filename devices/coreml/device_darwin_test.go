//go:build darwin

package coreml

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hybrid/devices"
	"hybrid/ops"
	"hybrid/quant"
)

// These tests need a Mac with CoreML; they are compiled, unverified on a Mac
// (the project's CI runs on Linux).

func openDevice(t *testing.T) *Device {
	t.Helper()
	d, err := New(CPUAndNeuralEngine, t.TempDir())
	if err != nil {
		t.Skipf("no CoreML: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func runDevice(t *testing.T, d *Device, op *ops.Op, wdata []byte, st ops.Step, outLen int, ins ...[]float32) []float32 {
	t.Helper()
	if op.Weight != nil {
		if err := d.LoadWeight(op.Weight, wdata); err != nil {
			t.Fatal(err)
		}
	}
	var bufs []devices.Buffer
	for _, x := range ins {
		b, err := d.Alloc(len(x))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Write(b, x); err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
	}
	ob, _ := d.Alloc(outLen)
	if err := d.Run(op, st, bufs, ob); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, outLen)
	if err := d.Read(out, ob); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDeviceMatchesCPU runs each op on CoreML and compares it with the CPU
// device. The bounds are wider than the evaluator's: the Neural Engine's
// accumulation inside a dot product or a mean is not documented, so a sum of
// k fp16 products is allowed 2^-7 of Σ|x·w| (fp16 accumulation in blocks),
// and each element-wise result 8 fp16 roundings.
func TestDeviceMatchesCPU(t *testing.T) {
	d := openDevice(t)
	r := rand.New(rand.NewPCG(12, 12))
	n, k, m := 2, 256, 32
	st := ops.Step{Tokens: make([]int32, n)}

	wdata := quantized(t, quant.Q4_0, randVec(r, m*k, 0.05), m, k)
	mm := &ops.Op{Kind: ops.MatMul, Name: "blk.0.ffn_up", Weight: &ops.Weight{Name: "w", Type: quant.Q4_0, Rows: m, Cols: k}}
	x := randVec(r, n*k, 1)
	got := runDevice(t, d, mm, wdata, st, n*m, x)
	want := runCPU(t, mm, wdata, st, n*m, x)
	wf := make([]float32, m*k)
	quant.Dequantize(quant.Q4_0, wdata, wf)
	compare(t, "coreml mat_mul", got, want, func(i int) float64 {
		row, col := i/m, i%m
		s := 0.0
		for e := 0; e < k; e++ {
			s += math.Abs(float64(x[row*k+e]) * float64(wf[col*k+e]))
		}
		return 0x1p-7 * s
	}, func(int) float64 { return 1 })

	norm := &ops.Op{Kind: ops.RMSNorm, Name: "blk.0.attn_norm", Eps: 1e-5, Weight: &ops.Weight{Name: "n", Type: quant.F32, Rows: 1, Cols: k}}
	nw := quantized(t, quant.F32, randVec(r, k, 0.5), 1, k)
	x = randVec(r, n*k, 300)
	got = runDevice(t, d, norm, nw, st, n*k, x)
	want = runCPU(t, norm, nw, st, n*k, x)
	compare(t, "coreml rms_norm", got, want, func(i int) float64 {
		return 16*u16*math.Abs(float64(want[i])) + 1e-3
	}, func(i int) float64 { return math.Abs(float64(want[i])) + 1e-30 })

	a, b := randVec(r, n*k, 2), randVec(r, n*k, 2)
	for _, op := range []*ops.Op{{Kind: ops.Add, Name: "add"}, {Kind: ops.SiLUMul, Name: "silu_mul"}} {
		got = runDevice(t, d, op, nil, st, n*k, a, b)
		want = runCPU(t, op, nil, st, n*k, a, b)
		compare(t, "coreml "+op.Kind.String(), got, want, func(i int) float64 {
			return 8 * u16 * (math.Abs(float64(a[i])) + math.Abs(float64(b[i])) + math.Abs(float64(want[i])))
		}, func(i int) float64 { return math.Abs(float64(want[i])) + 1e-30 })
	}

	// Every model is now compiled in the cache, and a second device finds
	// them there.
	ents, _ := filepath.Glob(filepath.Join(d.cache.dir, "*.mlmodelc"))
	if len(ents) != 4 {
		t.Fatalf("cache holds %v, want 4 compiled models", ents)
	}
	if left, _ := filepath.Glob(filepath.Join(d.cache.dir, "*.mlmodel")); len(left) != 0 {
		t.Fatalf("sources left in the cache: %v", left)
	}
}

func TestDeviceInfoAndRefusals(t *testing.T) {
	d := openDevice(t)
	info := d.Info()
	if info.Kind != "coreml" || info.Name != "coreml" || info.Precision != "f16" || !strings.Contains(info.Detail, "unverified") {
		t.Fatalf("info %+v", info)
	}
	if err := d.Supports(&ops.Op{Kind: ops.Attention, Name: "attn"}); err == nil {
		t.Fatal("attention supported")
	}
	b, _ := d.Alloc(4)
	if err := d.Run(&ops.Op{Kind: ops.RoPE, Name: "rope"}, ops.Step{Tokens: []int32{0}}, []devices.Buffer{b}, b); err == nil {
		t.Fatal("rope ran")
	}
	if _, err := os.Stat(d.cache.dir); err != nil {
		t.Fatal(err)
	}
}
