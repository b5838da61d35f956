//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"hybrid/ops"
	"hybrid/quant"
	"hybrid/verify"
)

// TestDecodeMatVec times the decode mat-vec (launchMV) at the shapes of
// TinyLlama's and Llama-7B's layers as a decode step runs it: one CUDA
// graph of back-to-back launches over copies of the weight that together
// exceed the 50 MB L2, replayed, with the GPU's time taken by events; with
// the grid of one wave (mvWave), with a block for every eight rows, and
// with sixteen warps a block (mvw_<type>). It logs µs per mat-vec and
// weight bytes per second, and checks that every variant computes the same
// products.
func TestDecodeMatVec(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	g := gpu(t)
	r := rand.New(rand.NewPCG(21, 22))
	shapes := []struct {
		rows, cols int
		silu       bool // gate and up, as one launch with SiLU·mul
		norm       bool // the input RMS-normalised first
	}{
		{2560, 2048, false, false}, {2560, 2048, false, true}, {2048, 2048, false, false}, {5632, 2048, true, false}, {5632, 2048, true, true},
		{2048, 5632, false, false}, {4096, 4096, false, false}, {12288, 4096, false, true}, {11008, 4096, true, false}, {4096, 11008, false, false},
	}
	type variant struct {
		name  string
		wave  bool
		warps int // a block's (mvWarps), where the type has mvw_<type>
	}
	vs := []variant{{"one-wave", true, 8}, {"all-blocks", false, 8}, {"wide", true, 16}}
	defer func(w bool) { mvWave = w }(mvWave)
	defer func() { g.mvWarpsSet = 0 }()
	only := os.Getenv("HYBRID_MATVEC_ONLY") // "Q4_K 4096x11008": one type and shape, or several split by commas
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q4_K, quant.Q6_K, quant.Q8_0} {
		for _, sh := range shapes {
			if only != "" && !slices.Contains(strings.Split(only, ","), fmt.Sprintf("%s %dx%d", typ, sh.rows, sh.cols)) {
				continue
			}
			data, _ := quantized(t, r, typ, sh.rows, sh.cols)
			nws := 1
			if sh.silu {
				nws = 2
			}
			copies := min(64, max(4, int(256<<20/(nws*len(data)))))
			ws := make([][]mvWeight, copies)
			x, err := g.Alloc(sh.cols)
			if err != nil {
				t.Fatal(err)
			}
			g.Write(x, verify.RandVec(r, sh.cols))
			var nw uintptr
			var nout *Buffer
			if sh.norm {
				b, err := g.Alloc(sh.cols)
				if err != nil {
					t.Fatal(err)
				}
				g.Write(b, verify.RandVec(r, sh.cols))
				o, err := g.Alloc(sh.cols)
				if err != nil {
					t.Fatal(err)
				}
				nw, nout = uintptr(b.(*Buffer).ptr), o.(*Buffer)
			}
			var ys []*Buffer
			for range 3 {
				y, err := g.Alloc(sh.rows)
				if err != nil {
					t.Fatal(err)
				}
				ys = append(ys, y.(*Buffer))
			}
			for c := range copies {
				for j := range nws {
					w := &ops.Weight{Name: fmt.Sprintf("mv.%s.%dx%d.%d.%d", typ, sh.rows, sh.cols, c, j), Type: typ, Rows: sh.rows, Cols: sh.cols}
					if err := g.LoadWeight(w, data); err != nil {
						t.Fatal(err)
					}
					ws[c] = append(ws[c], mvWeight{g.weights[w.Name], ys[j]})
				}
			}
			mode := mvPlain
			if sh.silu {
				mode = mvSiLU
			}
			line := fmt.Sprintf("MATVEC %-5s %5dx%-5d x%d %-4s %-4s %2d copies:", typ, sh.rows, sh.cols, nws, map[bool]string{false: "", true: "silu"}[sh.silu], map[bool]string{false: "", true: "norm"}[sh.norm], copies)
			var outs [][]float32
			for _, v := range vs {
				mvWave, g.mvWarpsSet = v.wave, v.warps
				var el time.Duration
				const reps = 5
				err := g.do(func() (err error) {
					el, err = replayTime(g, reps, func() error {
						for c := range copies {
							if err := g.launchMV(x.(*Buffer), nw, nout, 1e-5, ws[c], mode, nil, ys[2], nil, q8None); err != nil {
								return err
							}
						}
						return nil
					})
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				per := el / time.Duration(reps*copies)
				line += fmt.Sprintf("  %s %.2f µs %.0f GB/s", v.name, per.Seconds()*1e6, float64(nws*len(data))/per.Seconds()/1e9)
				out := make([]float32, sh.rows)
				g.Read(out, ys[0])
				outs = append(outs, out)
			}
			for i := 1; i < len(outs); i++ {
				for j := range outs[0] {
					if outs[i][j] != outs[0][j] {
						t.Fatalf("%s %dx%d: row %d is %v under %s, %v under %s", typ, sh.rows, sh.cols, j, outs[i][j], vs[i].name, outs[0][j], vs[0].name)
					}
				}
			}
			t.Log(line)
		}
	}
}

// TestDecodeAttention times a decode step's attention at depths 256 to
// 4096 (one layer: TinyLlama's 32 query heads on 4 KV heads of 64, and
// Llama-7B's 32 heads of 128) as a decode step runs it, in a replayed CUDA
// graph, and logs µs per layer and the cache bytes read per second.
func TestDecodeAttention(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	g := gpu(t)
	r := rand.New(rand.NewPCG(23, 24))
	for c, a := range []ops.AttnParams{{Heads: 32, KVHeads: 4, HeadDim: 64, Context: 4200}, {Heads: 32, KVHeads: 32, HeadDim: 128, Context: 4200}} {
		op := &ops.Op{Kind: ops.Attention, Name: "attn", Layer: 400 + c, Attn: a}
		kdim := a.KVHeads * a.HeadDim
		const fill = 4096
		runOp(t, g, op, ops.Step{Tokens: make([]int32, fill), Pos: 0}, nil, fill*a.Heads*a.HeadDim,
			verify.RandVec(r, fill*a.Heads*a.HeadDim), verify.RandVec(r, fill*kdim), verify.RandVec(r, fill*kdim))
		q, _ := g.Alloc(a.Heads * a.HeadDim)
		g.Write(q, verify.RandVec(r, a.Heads*a.HeadDim))
		out, _ := g.Alloc(a.Heads * a.HeadDim)
		for _, most := range []int{0, 8, 4, 2, 1} {
			if most > 0 && most < 8 && most >= a.Heads/a.KVHeads {
				continue // the same launch as at most 8
			}
			g.gqaHeads = most
			label := fmt.Sprintf("at most %d", most)
			if most == 0 {
				label = "the default"
			}
			line := fmt.Sprintf("ATTENTION %d/%d heads of %d, %s a block:", a.Heads, a.KVHeads, a.HeadDim, label)
			for _, depth := range []int{16, 256, 512, 1024, 2048, 4096} {
				const reps, per = 5, 20
				var el time.Duration
				err := atDepth(g, op, depth, func(c *kvCache) (err error) {
					el, err = replayTime(g, reps, func() error {
						for range per {
							if err := g.attend(op, 1, q.(*Buffer), out.(*Buffer), c); err != nil {
								return err
							}
						}
						return nil
					})
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				us := el.Seconds() * 1e6 / (reps * per)
				line += fmt.Sprintf("  d%d %.2f µs %.0f GB/s", depth, us, float64(2*2*depth*kdim)/us/1e3)
			}
			t.Log(line)
		}
		g.gqaHeads = 0
	}
}

// atDepth runs run on g's thread with op's cache and a step at position
// depth-1 uploaded, so that a row's attention spans depth keys (and
// attendG chooses its grid for that span).
func atDepth(g *Device, op *ops.Op, depth int, run func(c *kvCache) error) error {
	return g.do(func() error {
		c, err := g.kvFor(op)
		if err != nil {
			return err
		}
		if err := g.uploadStep(depth-1, nil); err != nil {
			return err
		}
		g.span = depth
		defer func() { g.span = 0 }()
		return run(c)
	})
}

// TestAttendGShortSpans checks attention_g's grid: TinyLlama's 8 query
// heads a KV head take one head a block (32 blocks a row) while no row
// sees more than attgShortKeys keys, two beyond that or where the span is
// not known, and Llama-7B's one head a KV head one block either way.
func TestAttendGShortSpans(t *testing.T) {
	d := &Device{k: &kernels{}} // attendG's choice only: no GPU
	tiny := ops.AttnParams{Heads: 32, KVHeads: 4, HeadDim: 64}
	llama := ops.AttnParams{Heads: 32, KVHeads: 32, HeadDim: 128}
	for _, c := range []struct {
		a            ops.AttnParams
		st           ops.Step
		wantGroups   int
		wantShortKey bool
	}{
		{tiny, ops.Step{Tokens: []int32{0}, Pos: 0}, 8, true},
		{tiny, ops.Step{Tokens: []int32{0}, Pos: attgShortKeys - 1}, 8, true},
		{tiny, ops.Step{Tokens: []int32{0}, Pos: attgShortKeys}, 4, false},
		{tiny, ops.Step{Tokens: []int32{0, 0, 0}, Pos: attgShortKeys - 2}, 4, false},
		{tiny, ops.Step{Tokens: []int32{0, 0}, Rows: []ops.Row{{Pos: 5}, {Pos: attgShortKeys - 1, Base: 4096}}}, 8, true},
		{tiny, ops.Step{Tokens: []int32{0, 0}, Rows: []ops.Row{{Pos: 5}, {Pos: 4000, Base: 4096}}}, 4, false},
		{llama, ops.Step{Tokens: []int32{0}, Pos: 10}, 1, true},
		{llama, ops.Step{Tokens: []int32{0}, Pos: 4000}, 1, false},
	} {
		d.span = stepSpan(c.st)
		if d.shortSpan() != c.wantShortKey {
			t.Errorf("%+v: short span %v, want %v", c.st, d.shortSpan(), c.wantShortKey)
		}
		if _, groups, ok := d.attendG(c.a); !ok || groups != c.wantGroups {
			t.Errorf("%d/%d heads, %+v: %d blocks a KV head (applies %v), want %d", c.a.Heads, c.a.KVHeads, c.st, groups, ok, c.wantGroups)
		}
	}
	d.span = 0
	if _, groups, _ := d.attendG(tiny); groups != 4 {
		t.Errorf("span unknown: %d blocks a KV head, want 4", groups)
	}
}

// TestAttentionHeadsExact checks that a few rows' attention by KV head
// (attention_g) gives every query head the same output bit for bit however
// many of a KV head's query heads a block takes (8, 4, 2, 1: gqaHeads), at
// depths of one part and of several (flash-decoding's merge), for one row
// and for three.
func TestAttentionHeadsExact(t *testing.T) {
	g := gpu(t)
	defer func() { g.gqaHeads = 0 }()
	r := rand.New(rand.NewPCG(25, 26))
	for c, a := range []ops.AttnParams{{Heads: 32, KVHeads: 4, HeadDim: 64, Context: 4200}, {Heads: 64, KVHeads: 8, HeadDim: 128, Context: 4200}, {Heads: 14, KVHeads: 2, HeadDim: 64, Context: 4200}} {
		op := &ops.Op{Kind: ops.Attention, Name: "attn", Layer: 500 + c, Attn: a}
		kdim := a.KVHeads * a.HeadDim
		const fill = 4096
		runOp(t, g, op, ops.Step{Tokens: make([]int32, fill), Pos: 0}, nil, fill*a.Heads*a.HeadDim,
			verify.RandVec(r, fill*a.Heads*a.HeadDim), verify.RandVec(r, fill*kdim), verify.RandVec(r, fill*kdim))
		for _, n := range []int{1, 3} {
			q, _ := g.Alloc(n * a.Heads * a.HeadDim)
			g.Write(q, verify.RandVec(r, n*a.Heads*a.HeadDim))
			out, _ := g.Alloc(n * a.Heads * a.HeadDim)
			for _, depth := range []int{16, 300, 4000} {
				var want []float32
				for _, most := range []int{8, 4, 2, 1} {
					g.gqaHeads = most
					err := atDepth(g, op, depth, func(c *kvCache) error {
						if err := g.attend(op, n, q.(*Buffer), out.(*Buffer), c); err != nil {
							return err
						}
						return synchronize()
					})
					if err != nil {
						t.Fatal(err)
					}
					got := make([]float32, n*a.Heads*a.HeadDim)
					g.Read(got, out)
					if want == nil {
						want = got
						continue
					}
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%d/%d heads of %d, %d rows at depth %d: out[%d] = %v with at most %d heads a block, %v with 8",
								a.Heads, a.KVHeads, a.HeadDim, n, depth, i, got[i], most, want[i])
						}
					}
				}
			}
		}
	}
}

// replayTime captures what queue launches as one CUDA graph, replays it
// once to warm up, then reps times, and returns the GPU's time for the reps
// replays (events). Call it on the device's thread.
func replayTime(g *Device, reps int, queue func() error) (time.Duration, error) {
	gr, err := g.stream.capture(queue)
	if err != nil {
		return 0, err
	}
	defer gr.free()
	if err := gr.launch(g.stream); err != nil {
		return 0, err
	}
	return timeOnGPU(func() error {
		for range reps {
			if err := gr.launch(g.stream); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestMVPreIsExact checks mvp_ (the decode mat-vec whose warps load their
// first row's first trips before they wait for the launch before) against
// mvw_ (noPre) bit for bit, plain and with the residual add, at TinyLlama's
// o and down shapes, at fewer rows than warps, and at rows shorter than
// the trips it loads ahead; and mvsp_q4_0 (gate and up with SiLU·mul, their
// first rows' first trip loaded ahead) at TinyLlama's gate and up; and that
// launchMV took them where they apply (Hopper; mvp_ for launches of at most
// one block a multiprocessor).
func TestMVPreIsExact(t *testing.T) {
	g := gpu(t)
	r := rand.New(rand.NewPCG(33, 34))
	defer func(p bool) { noPre = p }(noPre)
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q6_K} {
		for _, sh := range []struct {
			rows, cols int
			mode       int
		}{{2048, 2048, mvPlain}, {2048, 5632, mvAdd}, {300, 2048, mvAdd}, {2048, 256, mvPlain}, {5632, 2048, mvSiLU}, {200, 2048, mvSiLU}} {
			name := fmt.Sprintf("%s/%dx%d/mode=%d", typ, sh.rows, sh.cols, sh.mode)
			t.Run(name, func(t *testing.T) {
				nw := 1
				if sh.mode == mvSiLU {
					nw = 2
				}
				var ws []*weight
				for j := range nw {
					data, _ := quantized(t, r, typ, sh.rows, sh.cols)
					w := &ops.Weight{Name: fmt.Sprintf("mvpre.%s.%d", name, j), Type: typ, Rows: sh.rows, Cols: sh.cols}
					if err := g.LoadWeight(w, data); err != nil {
						t.Fatal(err)
					}
					ws = append(ws, g.weights[w.Name])
				}
				buf := func(n int, v []float32) *Buffer {
					b, err := g.Alloc(n)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { g.Free(b) })
					if v != nil {
						if err := g.Write(b, v); err != nil {
							t.Fatal(err)
						}
					}
					return b.(*Buffer)
				}
				x, res := buf(sh.cols, verify.RandVec(r, sh.cols)), buf(sh.rows, verify.RandVec(r, sh.rows))
				// The products (one a weight) and the sum (MV_ADD's residual
				// add, MV_SILU's SiLU·mul).
				run := func(pre bool) (outs [][]float32, pres int) {
					noPre = !pre
					var mw []mvWeight
					var bs []*Buffer
					for _, w := range ws {
						b := buf(sh.rows, nil)
						mw, bs = append(mw, mvWeight{w, b}), append(bs, b)
					}
					sb := buf(sh.rows, nil)
					p0 := mvPres(g)
					if err := g.do(func() error { return g.launchMV(x, 0, nil, 0, mw, sh.mode, res, sb, nil, q8None) }); err != nil {
						t.Fatal(err)
					}
					if sh.mode != mvPlain {
						bs = append(bs, sb)
					}
					for _, b := range bs {
						o := make([]float32, sh.rows)
						if err := g.Read(o, b); err != nil {
							t.Fatal(err)
						}
						outs = append(outs, o)
					}
					return outs, mvPres(g) - p0
				}
				want, n0 := run(false)
				got, n1 := run(true)
				pre := 0
				switch {
				case !g.k.pdl || g.mvWarps() != 16:
				case sh.mode == mvSiLU:
					if typ == quant.Q4_0 {
						pre = 1
					}
				case (sh.rows+15)/16 <= g.sms:
					pre = 1
				}
				if n0 != 0 || n1 != pre {
					t.Fatalf("launches with loads ahead: %d with noPre, %d without, want %d (programmatic dependent launches %v)", n0, n1, pre, g.k.pdl)
				}
				for o := range want {
					for i := range want[o] {
						if math.Float32bits(got[o][i]) != math.Float32bits(want[o][i]) {
							t.Fatalf("output %d, row %d: loaded ahead %v, mvw_ %v", o, i, got[o][i], want[o][i])
						}
					}
				}
			})
		}
	}
}
