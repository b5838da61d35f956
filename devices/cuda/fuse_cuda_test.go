//go:build cuda

package cuda_test

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"hybrid/devices"
	"hybrid/devices/cpu"
	"hybrid/devices/cuda"
	"hybrid/models/llama"
	"hybrid/models/synth"
	"hybrid/ops"
	"hybrid/quant"
	"hybrid/runtime"
)

// TestFusedDecodeIsExact runs whole models on GPU devices, one launching
// every op alone, on the compute_80 modules launched plainly, and others
// fusing decode steps (fuse_cuda.go), on Hopper as programmatic dependent
// launches of the compute_90 modules (kernels_cuda.go), in lockstep on
// the same tokens, and checks that every step's logits are identical bit for
// bit, that fusion happened, and that the GPU's logits stay close to the CPU
// device's (same greedy token, or a near tie). The synthetic stories15m files
// cover every weight type the kernels are instantiated for, mixed within a
// file where the recipe mixes them (Q4_K_M: Q4_K and Q6_K).
func TestFusedDecodeIsExact(t *testing.T) {
	for _, typ := range []string{"Q4_0", "Q4_K_M", "Q4_K_M/256", "Q5_K_M/256", "Q8_0", "Q5_K_M", "Q6_K", "F16", "Q4_1", "Q5_0", "Q5_1", "BF16", "F32"} {
		t.Run(typ, func(t *testing.T) {
			m := storiesModel(t, typ, 1)
			// plain launches each op alone on eight warps a block, wide
			// fuses on sixteen (where its types have mvw_<type>), and wide2
			// too, with mvw2_<type> wherever its type has one (the others
			// only where a launch's rows fill two blocks a multiprocessor).
			// plain also runs the compute_80 modules launched plainly,
			// where the others on Hopper run the compute_90 ones, whose
			// decode mat-vecs are programmatic dependent launches.
			plain, fused, wide, wide2 := openGPU(t), openGPU(t), openGPU(t), openGPU(t)
			if pdl, err := cuda.UsePlainModules(plain); err != nil {
				t.Fatal(err)
			} else if typ == "Q4_0" {
				t.Logf("fused decode as programmatic dependent launches: %v", pdl)
			}
			cuda.SetFuse(plain, false)
			cuda.SetMVWarps(plain, 8)
			cuda.SetMVWarps(fused, 8)
			cuda.SetMVWarps(wide, 16)
			cuda.SetMVWarps(wide2, 16)
			cuda.SetTwoBlocks(wide2, true)
			const ctx, steps = 64, 16
			var execs []*runtime.Executor
			for _, d := range []devices.Device{plain, fused, cpu.New("cpu", 0), wide, wide2} {
				e, err := runtime.NewExecutor(m, d, ctx)
				if err != nil {
					t.Fatal(err)
				}
				execs = append(execs, e)
			}
			tok := []int32{1, 400, 22, 17, 900}
			pos := 0
			var worst float64
			for s := range steps {
				var lg [5][]float32
				for i, e := range execs {
					var l []float32
					var err error
					if s == 0 {
						l, err = e.Prefill(tok, pos)
					} else {
						l, err = e.Forward(tok, pos)
					}
					if err != nil {
						t.Fatal(err)
					}
					lg[i] = slices.Clone(l)
				}
				for j := range lg[0] {
					if math.Float32bits(lg[0][j]) != math.Float32bits(lg[1][j]) {
						t.Fatalf("step %d: logit %d: fused %v, unfused %v", s, j, lg[1][j], lg[0][j])
					}
					if math.Float32bits(lg[0][j]) != math.Float32bits(lg[3][j]) {
						t.Fatalf("step %d: logit %d: fused on sixteen warps a block %v, unfused on eight %v", s, j, lg[3][j], lg[0][j])
					}
					if math.Float32bits(lg[0][j]) != math.Float32bits(lg[4][j]) {
						t.Fatalf("step %d: logit %d: fused on sixteen warps a block, two blocks a multiprocessor, %v, unfused on eight %v", s, j, lg[4][j], lg[0][j])
					}
				}
				e, top := relErr(lg[0], lg[2])
				worst = max(worst, e)
				// f32 sums in other orders, and the CPU's 8-bit activations
				// for quantized weights, move logits by up to a few 1e-3 of
				// the largest: a greedy pick may flip only on a closer tie.
				if e > 2e-2 {
					t.Fatalf("step %d: GPU logits differ from the CPU's by %.2g of max|logit|", s, e)
				}
				g, c := argmax(lg[0]), argmax(lg[2])
				if g != c && math.Abs(float64(lg[2][g]-lg[2][c])) > 2*e*top {
					t.Fatalf("step %d: GPU picks %d (%v), CPU %d (%v): not a near tie", s, g, lg[2][g], c, lg[2][c])
				}
				pos += len(tok)
				tok = []int32{g}
			}
			f, alone := cuda.Fused(fused)
			if f == 0 {
				t.Fatalf("nothing was fused (%d ops alone)", alone)
			}
			if f2, _ := cuda.Fused(plain); f2 != 0 {
				t.Fatalf("fusion off, yet %d fused units", f2)
			}
			// Each launch of a decode step (the first run and the graph's
			// capture; replays are not counted) turned q and k in the
			// mat-vecs of every layer whose q, k and v are of one type
			// (Q4_K_M gives some layers' v more bits).
			one := 0
			for l := range m.Config.Layers {
				ty := func(n string) quant.Type { return m.Types[fmt.Sprintf("blk.%d.attn_%s.weight", l, n)] }
				if ty("q") == ty("k") && ty("k") == ty("v") {
					one++
				}
			}
			if r := cuda.MVRopes(fused); one > 0 && (r == 0 || r%one != 0) {
				t.Fatalf("%d mat-vec launches with their rope, want a multiple of %d (the layers of %d with q, k, v of one type)", r, one, m.Config.Layers)
			}
			// Where the gate and up are Q4_0 or Q8_0 and so is the down
			// projection, on Hopper (programmatic dependent launches)
			// each layer's down input was staged once.
			for _, d := range []*cuda.Device{wide, wide2} {
				if q := cuda.SiLUQ8(d); (typ == "Q4_0" || typ == "Q8_0") && cuda.PDL(d) && !cuda.NoSiLUQ8() && q == 0 {
					t.Fatalf("no gate and up launch staged the down projection's input")
				}
			}
			t.Logf("%s: fused and unfused logits identical over %d steps (%d fused units, %d ops alone); vs CPU max %.2g of max|logit|", typ, steps, f, alone, worst)
		})
	}
}

// relErr is max|a-b| / max|b|, and max|b|.
func relErr(a, b []float32) (float64, float64) {
	var d, m float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
		m = max(m, math.Abs(float64(b[i])))
	}
	return d / m, m
}

func argmax(v []float32) int32 {
	b := 0
	for i, x := range v {
		if x > v[b] {
			b = i
		}
	}
	return int32(b)
}

// TestFusedPrefill prefills a 200-token prompt on two GPU devices, one
// launching every op alone and one fusing the prompt's mat-muls of one input
// into one tensor-core launch (fuseMMT: q, k and v; gate and up), and checks
// that fusion happened and that both stay close to the CPU device's logits.
func TestFusedPrefill(t *testing.T) {
	for _, typ := range []string{"Q4_0", "Q4_K_M", "Q8_0", "F16"} {
		t.Run(typ, func(t *testing.T) {
			m := storiesModel(t, typ, 2)
			plain, fused := openGPU(t), openGPU(t)
			cuda.SetFuse(plain, false)
			tok := make([]int32, 200)
			for i := range tok {
				tok[i] = int32(10 + i*37%900)
			}
			var lg [3][]float32
			for i, d := range []devices.Device{plain, fused, cpu.New("cpu", 0)} {
				e, err := runtime.NewExecutor(m, d, 256)
				if err != nil {
					t.Fatal(err)
				}
				l, err := e.Prefill(tok, 0)
				if err != nil {
					t.Fatal(err)
				}
				lg[i] = slices.Clone(l)
			}
			f, _ := cuda.Fused(fused)
			if f == 0 {
				t.Fatal("no prompt mat-muls were fused")
			}
			// These random-weight models amplify the order of sums: the
			// CPU device's assembly and purego builds, whose sums differ
			// only in order, give this prefill's logits 8-9e-3 of
			// max|logit| apart for the quantized files (3e-4 for F16).
			// So the logits are held to the CPU's tolerance here, and
			// TestFusedMatMuls compares the launches themselves.
			e, _ := relErr(lg[1], lg[0])
			t.Logf("%s: %d fused units; fused vs unfused %.2g of max|logit|", typ, f, e)
			for i, l := range lg[:2] {
				if e, _ := relErr(l, lg[2]); e > 2e-2 {
					t.Fatalf("prefill (fused %v) differs from the CPU's by %.2g of max|logit|", i == 1, e)
				}
			}
		})
	}
}

// TestFusedBatchIsExact runs batched decode steps of several sequences
// (ForwardRows) on two GPU devices, one launching every op alone and one
// fusing them (matchMVB: the RMSNorm or SiLU·mul in the quantization's
// launch, the residual add in the tensor-core mat-vec's; the rows' RoPE and
// cache append in one launch), and on a third that decodes each sequence
// alone; every row's logits must be identical bit for bit on all three,
// with mvt's blocks of each type's own warps, and of 4, 8 and 16 (Q4_0 and
// Q8_0). 3 rows run Q4_0 on mvb (dp4a), 20 rows two tiles of mvt.
func TestFusedBatchIsExact(t *testing.T) {
	defer cuda.SetMVTWarps(0)
	for _, typ := range []string{"Q4_0", "Q4_K_M", "Q4_K_M/256", "Q8_0", "Q6_K", "Q6_K/256", "Q5_K_M"} {
		m := storiesModel(t, typ, 3)
		for _, warps := range []int{0, 4, 8, 16} {
			for _, n := range []int{3, 4, 20} {
				t.Run(fmt.Sprintf("%s/warps=%d/rows=%d", typ, warps, n), func(t *testing.T) {
					cuda.SetMVTWarps(warps)
					batchIsExact(t, m, n, typ)
				})
			}
		}
	}
}

func batchIsExact(t *testing.T, m *llama.Model, n int, typ string) {
	gpus := [3]*cuda.Device{openGPU(t), openGPU(t), openGPU(t)} // unfused, fused, one sequence at a time
	cuda.SetFuse(gpus[0], false)
	const cells, steps = 32, 4
	var execs [3]*runtime.Executor
	for i, g := range gpus {
		e, err := runtime.NewExecutor(m, g, n*cells)
		if err != nil {
			t.Fatal(err)
		}
		execs[i] = e
	}
	next := make([]int32, n)
	rows := make([]ops.Row, n)
	for s := range n {
		prompt := []int32{1}
		for k := range 1 + s%5 {
			prompt = append(prompt, int32(20+(37*s+11*k)%900))
		}
		for _, e := range execs {
			if _, err := e.ForwardSeq(prompt, 0, s*cells); err != nil {
				t.Fatal(err)
			}
		}
		next[s], rows[s] = int32(5+s), ops.Row{Pos: len(prompt), Base: s * cells}
	}
	v := m.Config.Vocab
	for step := range steps {
		var lg [3][]float32
		for i, e := range execs[:2] {
			l, err := e.ForwardRows(next, rows)
			if err != nil {
				t.Fatal(err)
			}
			lg[i] = slices.Clone(l)
		}
		for s, r := range rows {
			l, err := execs[2].ForwardSeq([]int32{next[s]}, r.Pos, r.Base)
			if err != nil {
				t.Fatal(err)
			}
			lg[2] = append(lg[2], l...)
		}
		for j := range lg[0] {
			b := math.Float32bits(lg[0][j])
			if b != math.Float32bits(lg[1][j]) || b != math.Float32bits(lg[2][j]) {
				t.Fatalf("step %d, row %d, logit %d: unfused %v, fused %v, the sequence alone %v", step, j/v, j%v, lg[0][j], lg[1][j], lg[2][j])
			}
		}
		for s := range rows {
			next[s] = argmax(lg[1][s*v : (s+1)*v])
			rows[s].Pos++
		}
	}
	joined := cuda.BatchJoined(gpus[1])
	if joined == 0 {
		t.Fatalf("%s at %d rows: no batched mat-vec launch did its norm, SiLU·mul or residual add", typ, n)
	}
	if j := cuda.BatchJoined(gpus[0]); j != 0 {
		t.Fatalf("fusion off, yet %d joined launches", j)
	}
	t.Logf("%s, %d rows: unfused, fused and one sequence at a time identical over %d steps (%d joined launches)", typ, n, steps, joined)
}

// storiesModel writes a synthetic stories15m of file type typ (synth's
// names: Q4_0, Q4_K_M, …) with seed into t's temporary folder and loads it;
// it is closed when t ends.
func storiesModel(t *testing.T, typ string, seed uint64) *llama.Model {
	t.Helper()
	p, err := synth.LookupPreset("stories15m")
	if err != nil {
		t.Fatal(err)
	}
	if name, ok := strings.CutSuffix(typ, "/256"); ok {
		// Rows of whole 256-blocks, so that the K-quant types stay
		// K-quants (stories15m's 288 columns fall back to Q5_0, Q5_1 and
		// Q8_0): a Q4_K_M file's Q4_K and its Q6_K attn_v and ffn_down.
		typ, p.Dim, p.Heads, p.KVHeads, p.FFN = name, 256, 4, 4, 768
	}
	ft, err := synth.LookupFileType(typ)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), typ+".gguf")
	if err := synth.Write(path, synth.Options{Preset: p, Type: ft, Seed: seed}); err != nil {
		t.Fatal(err)
	}
	m, err := llama.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// openGPU opens GPU 0 as a device of its own, closed when t ends, or skips t
// where there is none.
func openGPU(t *testing.T) *cuda.Device {
	t.Helper()
	g, err := cuda.New(0)
	if errors.Is(err, devices.ErrNotAvailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}
