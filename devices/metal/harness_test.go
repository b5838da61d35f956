package metal

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"hybrid/devices"
	"hybrid/devices/cpu"
	"hybrid/models/llama"
	"hybrid/ops"
	"hybrid/quant"
	"hybrid/verify"
)

// The harness runs the kernels' MSL (Source, exactly what the Mac compiles)
// as C++ under harness/msl_shim.h, executing the dispatch plans of
// PlanSized: the same kernel names, bindings, params bytes, grids,
// threadgroup sizes and threadgroup memory. Every op kind and every weight
// type is checked against devices/cpu (the oracle) on random inputs; where
// the CPU rounds differently on purpose (8-bit or f16 activations for
// quantized weights, f16 query and accumulator in decode attention) the
// kernels are also checked tightly against a float64 transcription of the
// definition. The tolerances, and why, are next to each check.
//
// What this does not show: Apple's compiler and GPU. The math library is
// glibc's, not Apple's precise functions (both within a few ulp), and the
// 8×8 matrix multiply-accumulate of the shim sums in k order. What runs on
// the Mac is compiled from the same source but unverified there.

// harness is one running harness process.
type harness struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Reader
	stderr  *bytes.Buffer
	kernels map[string]harnessKernel
	consts  map[string]int
	used    map[string]bool // kernels that test plans ran
	dead    error           // set once the process has stopped answering
}

// harnessKernel is a kernel's calling convention as the compiled harness
// deduced it from the MSL signature.
type harnessKernel struct {
	buffers, params int
	shared          bool
}

// startHarness compiles the harness into a temporary directory and starts
// it. Without g++ it skips, or fails where the CI variable is set. Extra g++
// flags may be given in HYBRID_METAL_HARNESS_FLAGS (e.g. "-fsanitize=undefined
// -fno-sanitize-recover=all" to look for undefined behaviour in the kernels).
func startHarness(t *testing.T) *harness {
	t.Helper()
	if runtime.GOOS != "linux" {
		// The shim is written for GNU g++ on Linux (ucontext, _Float16,
		// glibc's type names); on a Mac the kernels run on the GPU itself.
		t.Skipf("skipping: the kernels' CPU harness is built for Linux, not %s", runtime.GOOS)
	}
	gpp, err := exec.LookPath("g++")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("g++ is needed to run the Metal kernels on the CPU harness (CI is set): %v", err)
		}
		t.Skipf("skipping: no g++ to build the Metal kernels' harness: %v", err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"kernels.metal":          Source,
		"metal_stdlib":           "// The harness's stand-in: msl_shim.h provides the library.\n",
		"metal_simdgroup":        "",
		"metal_simdgroup_matrix": "",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, err := filepath.Abs(filepath.Join("harness", "harness.cpp"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "harness")
	// -ffp-contract=off: products are rounded before they are added unless a
	// kernel calls fma, so decoders compute exactly what quant.Dequantize does.
	args := []string{"-std=c++17", "-O2", "-ffp-contract=off", "-Wall", "-Wno-attributes", "-I", dir, "-o", bin, src}
	args = append(args, strings.Fields(os.Getenv("HYBRID_METAL_HARNESS_FLAGS"))...)
	build := exec.Command(gpp, args...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the harness: %v\n%s", err, out)
	} else if len(out) > 0 {
		t.Fatalf("the kernels compile with warnings:\n%s", out)
	}
	h := &harness{cmd: exec.Command(bin), stderr: &bytes.Buffer{}, used: map[string]bool{}}
	h.cmd.Stderr = h.stderr
	if h.in, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	h.out = bufio.NewReader(stdout)
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if h.dead == nil {
			h.in.Write([]byte{'Q'})
			h.in.Close()
			h.cmd.Wait()
		}
	})
	h.list(t)
	return h
}

// list reads the harness's kernels and constants.
func (h *harness) list(t *testing.T) {
	t.Helper()
	if _, err := h.in.Write([]byte{'L'}); err != nil {
		t.Fatal(err)
	}
	h.kernels, h.consts = map[string]harnessKernel{}, map[string]int{}
	for {
		line, err := h.out.ReadString('\n')
		if err != nil {
			t.Fatalf("harness list: %v (%s)", err, h.stderr)
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 1 && f[0] == "end":
			return
		case len(f) == 5 && f[0] == "kernel":
			nb, _ := strconv.Atoi(f[2])
			ps, _ := strconv.Atoi(f[3])
			h.kernels[f[1]] = harnessKernel{buffers: nb, params: ps, shared: f[4] == "1"}
		case len(f) == 3 && f[0] == "const":
			v, _ := strconv.Atoi(f[2])
			h.consts[f[1]] = v
		default:
			t.Fatalf("harness list: unexpected line %q", line)
		}
	}
}

// run executes plan on the buffers (by role) and returns every buffer after
// it. The harness checks each dispatch's buffer count, params size and
// threadgroup memory against the kernel's signature before running.
func (h *harness) run(plan []Dispatch, bufs map[Role][]byte) (map[Role][]byte, error) {
	if h.dead != nil {
		return nil, h.dead
	}
	var roles []Role
	for r := range bufs {
		roles = append(roles, r)
	}
	slices.Sort(roles)
	index := map[Role]int{}
	var req []byte
	le := binary.LittleEndian
	req = append(req, 'R')
	req = le.AppendUint32(req, uint32(len(roles)))
	for i, r := range roles {
		index[r] = i
		req = le.AppendUint64(req, uint64(len(bufs[r])))
		req = append(req, bufs[r]...)
	}
	req = le.AppendUint32(req, uint32(len(plan)))
	for _, d := range plan {
		h.used[d.Kernel] = true
		req = le.AppendUint32(req, uint32(len(d.Kernel)))
		req = append(req, d.Kernel...)
		req = le.AppendUint32(req, uint32(len(d.Buffers)))
		for _, b := range d.Buffers {
			i, ok := index[b.Role]
			if !ok {
				return nil, fmt.Errorf("%s binds %s, which the test did not provide", d.Kernel, b.Role)
			}
			req = le.AppendUint32(req, uint32(i))
			req = le.AppendUint64(req, uint64(b.Offset))
		}
		req = le.AppendUint32(req, uint32(len(d.Params)))
		req = append(req, d.Params...)
		for _, g := range d.Groups {
			req = le.AppendUint32(req, uint32(g))
		}
		for _, n := range d.Threads {
			req = le.AppendUint32(req, uint32(n))
		}
		req = le.AppendUint32(req, uint32(d.Shared))
	}
	if _, err := h.in.Write(req); err != nil {
		return nil, h.died(err)
	}
	var status uint32
	if err := binary.Read(h.out, le, &status); err != nil {
		return nil, h.died(err)
	}
	if status != 0 {
		var n uint32
		binary.Read(h.out, le, &n)
		msg := make([]byte, n)
		io.ReadFull(h.out, msg)
		return nil, fmt.Errorf("harness refused the plan: %s", msg)
	}
	res := map[Role][]byte{}
	for _, r := range roles {
		b := make([]byte, len(bufs[r]))
		if _, err := io.ReadFull(h.out, b); err != nil {
			return nil, h.died(err)
		}
		res[r] = b
	}
	return res, nil
}

// died records that the harness stopped answering and returns why: it waits
// for the process, so that what it said on stderr is complete.
func (h *harness) died(err error) error {
	h.in.Close()
	werr := h.cmd.Wait()
	h.dead = fmt.Errorf("the harness died (%v; %v):\n%s", err, werr, h.stderr)
	return h.dead
}

func f32bytes(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func bytesF32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// quantized returns rows×cols random weights in type typ and their exact
// decoding.
func quantized(t *testing.T, r *rand.Rand, typ quant.Type, rows, cols int) ([]byte, []float32) {
	t.Helper()
	data, deq, err := verify.RandomWeights(r, typ, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	return data, deq
}

// onMetal runs op through its dispatch plan in the harness: weight (if any),
// the inputs, a NaN-poisoned output (so that an unwritten element shows),
// token ids, and for Attention the caches kc and vc, which it updates.
func onMetal(t *testing.T, h *harness, op *ops.Op, st ops.Step, weight []byte, out int, kc, vc *[]byte, ins ...[]float32) []float32 {
	t.Helper()
	lens := make([]int, len(ins))
	for i, in := range ins {
		lens[i] = len(in)
	}
	plan, err := PlanSized(op, st, lens, out)
	if err != nil {
		t.Fatal(err)
	}
	bufs := map[Role][]byte{}
	for i, in := range ins {
		bufs[RoleIn0+Role(i)] = f32bytes(in)
	}
	if weight != nil {
		bufs[RoleWeight] = weight
	}
	poison := make([]float32, out)
	for i := range poison {
		poison[i] = float32(math.NaN())
	}
	bufs[RoleOut] = f32bytes(poison)
	if op.Kind == ops.Embed {
		var tok []byte
		for _, id := range st.Tokens {
			tok = binary.LittleEndian.AppendUint32(tok, uint32(id))
		}
		bufs[RoleTokens] = tok
	}
	if op.Kind == ops.Attention {
		bufs[RoleKCache], bufs[RoleVCache] = *kc, *vc
	}
	res, err := h.run(plan, bufs)
	if err != nil {
		t.Fatal(err)
	}
	if op.Kind == ops.Attention {
		*kc, *vc = res[RoleKCache], res[RoleVCache]
	}
	return bytesF32(res[RoleOut])
}

// onCPU runs op on the CPU device (verify.RunOp).
func onCPU(t *testing.T, d devices.Device, op *ops.Op, st ops.Step, weight []byte, out int, ins ...[]float32) []float32 {
	t.Helper()
	res, err := verify.RunOp(d, op, st, weight, out, ins)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// results collects one line per checked kernel for the summary the test
// logs at its end.
type results []string

func (r *results) add(format string, args ...any) { *r = append(*r, fmt.Sprintf(format, args...)) }

var allTypes = []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q8_0, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q4_K, quant.Q5_K, quant.Q6_K}

// TestKernelsOnHarness builds the harness once and runs every op kind's plan
// in it; see the comment at the top of the file.
func TestKernelsOnHarness(t *testing.T) {
	h := startHarness(t)
	ref := cpu.New("cpu", 1)
	defer ref.Close()
	var sum results
	parts := []struct {
		name string
		f    func(t *testing.T)
	}{
		{"layout", func(t *testing.T) { testLayout(t, h) }},
		{"matmul", func(t *testing.T) { testMatMul(t, h, ref, &sum) }},
		{"embed", func(t *testing.T) { testEmbed(t, h, ref, &sum) }},
		{"rms_norm", func(t *testing.T) { testNorm(t, h, ref, &sum) }},
		{"rope", func(t *testing.T) { testRoPE(t, h, ref, &sum) }},
		{"add_bias", func(t *testing.T) { testAddBias(t, h, ref, &sum) }},
		{"attention", func(t *testing.T) { testAttention(t, h, ref, &sum) }},
		{"elementwise", func(t *testing.T) { testElementwise(t, h, ref, &sum) }},
		{"refused", func(t *testing.T) { testRefused(t, h) }},
		{"graph", func(t *testing.T) { testGraph(t, h, ref, &sum) }},
	}
	ran := 0
	for _, p := range parts {
		t.Run(p.name, func(t *testing.T) {
			ran++
			p.f(t)
		})
	}
	if t.Failed() {
		return
	}
	t.Logf("results (harness: the kernels' MSL as C++ on this CPU):\n%s", strings.Join(sum, "\n"))
	if ran < len(parts) {
		return // a -run filter left parts out
	}
	// Every kernel in the source was run by some plan above.
	var unused []string
	for name := range h.kernels {
		if !h.used[name] {
			unused = append(unused, name)
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Errorf("kernels no test plan ran: %v", unused)
	}
}

// testLayout checks that the constants and params structs the plans encode
// are the ones the compiled kernels declare.
func testLayout(t *testing.T, h *harness) {
	want := map[string]int{"MV_NR": mvNR, "MV_NSG": mvNSG, "MM_BM": mmBM, "MM_BN": mmBN, "MM_BK": mmBK, "MM_NSG": mmNSG,
		"ATT_NSG": attNSG, "ATT_MAXT": attMaxT, "ROPE_MAX_PAIRS": ropeMaxPairs}
	for name, v := range want {
		if got, ok := h.consts[name]; !ok || got != v {
			t.Errorf("%s is %d in common.h, %d in dispatch.go", name, got, v)
		}
	}
	sizes := map[string]int{
		"matvec_": binary.Size(matParams{}), "matmul_": binary.Size(matParams{}), "embed_": binary.Size(embedParams{}),
		"rms_norm_": binary.Size(normParams{}), "rope": binary.Size(ropeParams{}), "kv_store": binary.Size(attnParams{}),
		"attention": binary.Size(attnParams{}), "silu_mul": binary.Size(eltParams{}), "add_f32": binary.Size(eltParams{}),
		"copy_f32": binary.Size(eltParams{}), "add_bias_": binary.Size(biasParams{}),
	}
	for name, k := range h.kernels {
		found := false
		for prefix, size := range sizes {
			if strings.HasPrefix(name, prefix) {
				found = true
				if k.params != size {
					t.Errorf("kernel %s: params struct of %d bytes in MSL, %d in Go", name, k.params, size)
				}
			}
		}
		if !found {
			t.Errorf("kernel %s: no Go params struct known for it", name)
		}
	}
	if len(h.kernels) < 40 {
		t.Errorf("the harness registers %d kernels", len(h.kernels))
	}
}

// testMatMul checks mat-vec (n = 1 and 3) and the tiled matmul (n = 37: a
// whole tile of 32 tokens and a partial one; 72 rows: a whole tile of 64 and
// a partial one) for every weight type.
//
// Against float64 dot products of the decoded weights: the kernels decode
// exactly as quant.Dequantize and accumulate in f32; recursive f32 summation
// of k terms is within k·2⁻²⁴·Σ|w·x| (Higham), so that bound is the
// tolerance (3e-5 at k = 512; the errors seen are far smaller).
//
// Against the CPU device, by ‖metal−cpu‖/‖cpu‖: 1e-5 for F32 (both f32); for
// the other types the CPU rounds activations as llama.cpp does (to f16, bf16,
// or 8-bit blocks: up to ~1% per product, averaging out over k), so 2e-2,
// the project's agreement rule for quantized models.
func testMatMul(t *testing.T, h *harness, ref devices.Device, sum *results) {
	r := rand.New(rand.NewPCG(1, 2))
	const rows, cols = 72, 512
	for _, typ := range allTypes {
		data, deq := quantized(t, r, typ, rows, cols)
		w := &ops.Weight{Name: "w." + typ.String(), Type: typ, Rows: rows, Cols: cols}
		for _, n := range []int{1, 3, 37} {
			t.Run(fmt.Sprintf("%s/n=%d", typ, n), func(t *testing.T) {
				x := verify.RandVec(r, n*cols)
				op := &ops.Op{Kind: ops.MatMul, Name: "mm", Weight: w}
				st := ops.Step{Tokens: make([]int32, n)}
				got := onMetal(t, h, op, st, data, n*rows, nil, nil, x)
				want, mag := make([]float64, n*rows), make([]float64, n*rows)
				for tk := range n {
					for row := range rows {
						var s, m float64
						for k, wv := range deq[row*cols : (row+1)*cols] {
							p := float64(wv) * float64(x[tk*cols+k])
							s += p
							m += math.Abs(p)
						}
						want[tk*rows+row], mag[tk*rows+row] = s, m
					}
				}
				tol := float64(cols) * 0x1p-24
				e, i := verify.MaxErr(got, func(i int) float64 { return want[i] }, func(i int) float64 { return mag[i] })
				if e > tol {
					t.Fatalf("out[%d] = %g, want %g: error %.3g of Σ|w·x| > %.3g", i, got[i], want[i], e, tol)
				}
				cpuOut := onCPU(t, ref, op, st, data, n*rows, x)
				ctol := 2e-2
				if typ == quant.F32 {
					ctol = 1e-5
				}
				ce := verify.NormRel(got, cpuOut)
				if ce > ctol {
					t.Fatalf("‖metal−cpu‖/‖cpu‖ = %.3g > %g", ce, ctol)
				}
				plan, _ := PlanSized(op, st, []int{len(x)}, n*rows)
				sum.add("%-12s %-5s n=%-2d  vs float64 %.2g of Σ|w·x| (tol %.2g); vs cpu ‖Δ‖/‖cpu‖ %.2g (tol %g)",
					plan[0].Kernel, typ, n, e, tol, ce, ctol)
			})
		}
	}
}

// testEmbed checks the token gather for every type: both devices decode with
// quant.Dequantize's roundings, so they must agree exactly.
func testEmbed(t *testing.T, h *harness, ref devices.Device, sum *results) {
	r := rand.New(rand.NewPCG(3, 4))
	const vocab, cols = 24, 512
	st := ops.Step{Tokens: []int32{7, 0, 23, 7, 11}, Pos: 3}
	for _, typ := range allTypes {
		t.Run(typ.String(), func(t *testing.T) {
			data, _ := quantized(t, r, typ, vocab, cols)
			op := &ops.Op{Kind: ops.Embed, Name: "embed", Weight: &ops.Weight{Name: "tok." + typ.String(), Type: typ, Rows: vocab, Cols: cols}}
			got := onMetal(t, h, op, st, data, len(st.Tokens)*cols, nil, nil)
			want := onCPU(t, ref, op, st, data, len(st.Tokens)*cols)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("out[%d] = %g, cpu %g (must be bit-identical)", i, got[i], want[i])
				}
			}
			sum.add("%-12s %-5s bit-identical to cpu", "embed_"+weightKernels[typ], typ)
		})
	}
}

// testNorm checks rms_norm with f32, f16 and bf16 scale vectors, over whole
// rows and per head (heads > 0: rows of heads·cols features, each head of
// cols normalised on its own, as Qwen3's Q and K norms; the plan runs the
// same kernel over rows×heads rows of one head). The kernel sums squares in
// f32 (the CPU in float64): ~1e-7 relative in the scale, then two f32
// products: 1e-5 relative.
func testNorm(t *testing.T, h *harness, ref devices.Device, sum *results) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, typ := range []quant.Type{quant.F32, quant.F16, quant.BF16} {
		for _, sh := range []struct{ rows, cols, heads int }{{3, 320, 0}, {1, 2048, 0}, {2, 40, 0}, {3, 128, 4}, {1, 64, 2}, {5, 40, 3}} {
			t.Run(fmt.Sprintf("%s/%dx%d/heads=%d", typ, sh.rows, sh.cols, sh.heads), func(t *testing.T) {
				data, _ := quantized(t, r, typ, 1, sh.cols)
				op := &ops.Op{Kind: ops.RMSNorm, Name: "norm", Eps: 1e-5, PerHead: sh.heads > 0,
					Weight: &ops.Weight{Name: fmt.Sprintf("norm.%s.%d.%d", typ, sh.cols, sh.heads), Type: typ, Rows: 1, Cols: sh.cols}}
				x := verify.RandVec(r, sh.rows*max(sh.heads, 1)*sh.cols)
				st := ops.Step{Tokens: make([]int32, sh.rows)}
				got := onMetal(t, h, op, st, data, len(x), nil, nil, x)
				want := onCPU(t, ref, op, st, data, len(x), x)
				e, i := verify.MaxErr(got, func(i int) float64 { return float64(want[i]) }, func(i int) float64 { return math.Abs(float64(want[i])) + 1e-30 })
				if e > 1e-5 {
					t.Fatalf("out[%d] = %g, cpu %g (relative error %.3g > 1e-5)", i, got[i], want[i], e)
				}
				sum.add("%-12s %-5s %dx%d heads=%d  vs cpu relative %.2g (tol 1e-5)", "rms_norm_"+normKernels[typ], typ, sh.rows, sh.cols, sh.heads, e)
			})
		}
	}
}

// testRoPE checks rope at several positions, with all and part of each
// head's features rotated, in normal and NEOX pairing, without and with
// frequency factors (random in [1, 40], the range of Llama 3's; one case has
// 128, the most the params hold). θ is formed identically on both sides (the
// same stepping, then one IEEE f32 division by the factor) and glibc's sinf
// and cosf are within an ulp of the CPU's sincosf: outputs agree to a few ulp
// of the input's size, 2e-6 of max|x| (Apple's precise sin and cos are also
// within a few ulp; that Apple's f32 division without fast math is correctly
// rounded, as the harness's is, is not checked here).
func testRoPE(t *testing.T, h *harness, ref devices.Device, sum *results) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct {
		rows, pos, heads, hd, dims int
		neox, freqs                bool
	}{
		{3, 0, 4, 64, 64, false, false}, {1, 900, 4, 64, 32, false, false}, {5, 17, 2, 32, 16, false, false}, {2, 4000, 3, 128, 128, false, false},
		{3, 0, 4, 64, 64, true, false}, {1, 900, 4, 64, 32, true, false}, {5, 17, 2, 32, 16, true, false}, {2, 4000, 3, 128, 128, true, false},
		{3, 5, 4, 64, 64, false, true}, {2, 3000, 2, 128, 96, false, true}, {3, 5, 4, 64, 64, true, true}, {2, 3000, 2, 128, 96, true, true},
		{1, 1234, 1, 256, 256, true, true},
	} {
		t.Run(fmt.Sprintf("pos=%d/n=%d/hd=%d/dims=%d/neox=%v/freqs=%v", c.pos, c.rows, c.hd, c.dims, c.neox, c.freqs), func(t *testing.T) {
			x := verify.RandVec(r, c.rows*c.heads*c.hd)
			op := &ops.Op{Kind: ops.RoPE, Name: "rope", Rope: ops.RopeParams{HeadDim: c.hd, Dims: c.dims, Base: 10000, Neox: c.neox}}
			if c.freqs {
				op.Rope.Base = 500000
				op.Rope.Freqs = make([]float32, c.dims/2)
				for i := range op.Rope.Freqs {
					op.Rope.Freqs[i] = 1 + 39*r.Float32()
				}
			}
			st := ops.Step{Tokens: make([]int32, c.rows), Pos: c.pos}
			got := onMetal(t, h, op, st, nil, len(x), nil, nil, x)
			want := onCPU(t, ref, op, st, nil, len(x), x)
			scale := verify.MaxAbs(x)
			e, i := verify.MaxErr(got, func(i int) float64 { return float64(want[i]) }, func(int) float64 { return scale })
			if e > 2e-6 {
				t.Fatalf("out[%d] = %g, cpu %g (error %.3g of max|x| > 2e-6)", i, got[i], want[i], e)
			}
			sum.add("%-12s pos=%d n=%d hd=%d dims=%d neox=%v freqs=%v  vs cpu %.2g of max|x| (tol 2e-6)", "rope", c.pos, c.rows, c.hd, c.dims, c.neox, c.freqs, e)
		})
	}
}

// testAddBias checks add_bias with f32, f16 and bf16 biases, on sizes that
// are not a multiple of the threadgroup. Both devices decode the bias
// exactly to f32 and add once in f32: they must agree bit for bit.
func testAddBias(t *testing.T, h *harness, ref devices.Device, sum *results) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, typ := range []quant.Type{quant.F32, quant.F16, quant.BF16} {
		for _, sh := range []struct{ rows, cols int }{{3, 200}, {1, 1536}, {7, 40}} {
			t.Run(fmt.Sprintf("%s/%dx%d", typ, sh.rows, sh.cols), func(t *testing.T) {
				data, _ := quantized(t, r, typ, 1, sh.cols)
				op := &ops.Op{Kind: ops.AddBias, Name: "bias",
					Weight: &ops.Weight{Name: fmt.Sprintf("bias.%s.%d", typ, sh.cols), Type: typ, Rows: 1, Cols: sh.cols}}
				x := verify.RandVec(r, sh.rows*sh.cols)
				st := ops.Step{Tokens: make([]int32, sh.rows)}
				got := onMetal(t, h, op, st, data, len(x), nil, nil, x)
				want := onCPU(t, ref, op, st, data, len(x), x)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("out[%d] = %g, cpu %g (must be bit-identical)", i, got[i], want[i])
					}
				}
				sum.add("%-12s %-5s %dx%d  bit-identical to cpu", "add_bias_"+normKernels[typ], typ, sh.rows, sh.cols)
			})
		}
	}
}

// testAttention runs a prefill, a decode step and a step of several tokens
// over one layer's cache, for two head layouts (one whose head size is not a
// multiple of 32).
//
// The cache must hold exactly the f16 rounding of every key and value.
// Against float64 softmax attention over those f16 keys and values with the
// f32 query: f32 dot products of ≤ 128 terms, expf and a weighted sum over
// ≤ 13 positions, 1e-5 of max|v|. Against the CPU device, whose decode path
// also rounds the query and the value accumulator to f16: 5e-3 of max|v|.
func testAttention(t *testing.T, h *harness, ref devices.Device, sum *results) {
	r := rand.New(rand.NewPCG(9, 10))
	for li, cfg := range []struct {
		a     ops.AttnParams
		steps [][2]int // {pos, n}
	}{
		{ops.AttnParams{Heads: 4, KVHeads: 2, HeadDim: 64, Context: 16}, [][2]int{{0, 7}, {7, 1}, {8, 3}}},
		{ops.AttnParams{Heads: 6, KVHeads: 3, HeadDim: 48, Context: 16}, [][2]int{{0, 4}, {4, 1}, {5, 1}, {6, 6}}},
		{ops.AttnParams{Heads: 2, KVHeads: 1, HeadDim: 128, Context: 8}, [][2]int{{0, 2}, {2, 1}}},
	} {
		a := cfg.a
		op := &ops.Op{Kind: ops.Attention, Name: "attn", Layer: 100 + li, Attn: a}
		kdim := a.KVHeads * a.HeadDim
		kc, vc := make([]byte, CacheBytes(op)), make([]byte, CacheBytes(op))
		var ks, vs []float32 // every position's keys and values so far, rounded to f16
		for _, s := range cfg.steps {
			st := ops.Step{Tokens: make([]int32, s[1]), Pos: s[0]}
			t.Run(fmt.Sprintf("heads=%d/%d/hd=%d/pos=%d/n=%d", a.Heads, a.KVHeads, a.HeadDim, st.Pos, s[1]), func(t *testing.T) {
				n := s[1]
				q, k, v := verify.RandVec(r, n*a.Heads*a.HeadDim), verify.RandVec(r, n*kdim), verify.RandVec(r, n*kdim)
				for i := range k {
					ks = append(ks, quant.F16ToF32(quant.F32ToF16(k[i])))
					vs = append(vs, quant.F16ToF32(quant.F32ToF16(v[i])))
				}
				got := onMetal(t, h, op, st, nil, len(q), &kc, &vc, q, k, v)
				for i := range n * kdim {
					o := 2 * (st.Pos*kdim + i)
					if gk, gv := binary.LittleEndian.Uint16(kc[o:]), binary.LittleEndian.Uint16(vc[o:]); gk != quant.F32ToF16(k[i]) || gv != quant.F32ToF16(v[i]) {
						t.Fatalf("cache element %d: k %#04x v %#04x, want %#04x %#04x", i, gk, gv, quant.F32ToF16(k[i]), quant.F32ToF16(v[i]))
					}
				}
				cpuOut := onCPU(t, ref, op, st, nil, len(q), q, k, v)
				want := verify.AttentionRef(q, ks, vs, a, st.Pos)
				vmax := verify.MaxAbs(vs)
				e, i := verify.MaxErr(got, func(i int) float64 { return want[i] }, func(int) float64 { return vmax })
				if e > 1e-5 {
					t.Fatalf("out[%d] = %g, want %g (error %.3g of max|v| > 1e-5)", i, got[i], want[i], e)
				}
				ce, ci := verify.MaxErr(got, func(i int) float64 { return float64(cpuOut[i]) }, func(int) float64 { return vmax })
				if ce > 5e-3 {
					t.Fatalf("out[%d] = %g, cpu %g (error %.3g of max|v| > 5e-3)", ci, got[ci], cpuOut[ci], ce)
				}
				sum.add("%-12s heads=%d/%d hd=%d pos=%d n=%d  vs float64 %.2g of max|v| (tol 1e-5); vs cpu %.2g (tol 5e-3); cache exact",
					"attention", a.Heads, a.KVHeads, a.HeadDim, st.Pos, n, e, ce)
			})
		}
	}
}

// testElementwise checks silu_mul, add_f32 and last_row's copy_f32 on sizes
// that are not a multiple of the threadgroup.
func testElementwise(t *testing.T, h *harness, ref devices.Device, sum *results) {
	r := rand.New(rand.NewPCG(11, 12))
	const rows, cols = 3, 200
	a, b := verify.RandVec(r, rows*cols), verify.RandVec(r, rows*cols)
	st := ops.Step{Tokens: make([]int32, rows)}
	t.Run("silu_mul", func(t *testing.T) {
		// glibc's expf is correctly rounded, the CPU's within ~1.5 ulp: a few
		// ulp after the division and product, 1e-6 relative.
		op := &ops.Op{Kind: ops.SiLUMul, Name: "silu"}
		got := onMetal(t, h, op, st, nil, len(a), nil, nil, a, b)
		want := onCPU(t, ref, op, st, nil, len(a), a, b)
		e, i := verify.MaxErr(got, func(i int) float64 { return float64(want[i]) }, func(i int) float64 { return math.Abs(float64(want[i])) + 1e-30 })
		if e > 1e-6 {
			t.Fatalf("out[%d] = %g, cpu %g (relative error %.3g > 1e-6)", i, got[i], want[i], e)
		}
		sum.add("%-12s vs cpu relative %.2g (tol 1e-6)", "silu_mul", e)
	})
	t.Run("add", func(t *testing.T) {
		op := &ops.Op{Kind: ops.Add, Name: "add"}
		got := onMetal(t, h, op, st, nil, len(a), nil, nil, a, b)
		want := onCPU(t, ref, op, st, nil, len(a), a, b)
		if !slices.Equal(got, want) {
			t.Fatal("add differs from the CPU's (one f32 rounding each: must be exact)")
		}
		sum.add("%-12s identical to cpu", "add_f32")
	})
	t.Run("last_row", func(t *testing.T) {
		op := &ops.Op{Kind: ops.LastRow, Name: "last"}
		got := onMetal(t, h, op, st, nil, cols, nil, nil, a)
		want := onCPU(t, ref, op, st, nil, cols, a)
		if !slices.Equal(got, want) || !slices.Equal(got, a[(rows-1)*cols:]) {
			t.Fatal("last_row is not the input's last row")
		}
		sum.add("%-12s identical to cpu (last row bound at byte offset %d)", "copy_f32", (rows-1)*cols*4)
	})
}

// testRefused checks that the harness holds plans to the kernels'
// signatures, so that the layout checks above mean something.
func testRefused(t *testing.T, h *harness) {
	op := &ops.Op{Kind: ops.Add, Name: "add"}
	plan, err := PlanSized(op, ops.Step{}, []int{8, 8}, 8)
	if err != nil {
		t.Fatal(err)
	}
	bufs := map[Role][]byte{RoleIn0: make([]byte, 32), RoleIn1: make([]byte, 32), RoleOut: make([]byte, 32)}
	for name, mutate := range map[string]func(d *Dispatch){
		"short params":   func(d *Dispatch) { d.Params = d.Params[:12] },
		"missing buffer": func(d *Dispatch) { d.Buffers = d.Buffers[:2] },
		"unknown kernel": func(d *Dispatch) { d.Kernel = "no_such_kernel" },
		"shared memory":  func(d *Dispatch) { d.Shared = 16 },
	} {
		d := plan[0]
		d.Buffers = slices.Clone(d.Buffers)
		mutate(&d)
		if _, err := h.run([]Dispatch{d}, bufs); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("%s: harness accepted the plan (%v)", name, err)
		}
	}
	if _, err := h.run(plan, bufs); err != nil {
		t.Errorf("the unmodified plan: %v", err)
	}
}

// testGraph runs whole steps of small Llama-family models (two layers,
// grouped-query attention, weights of six types; testModel: plain Llama,
// Llama 3's rope frequency factors, Qwen2's Q/K/V biases and NEOX rope, and
// Qwen3's per-head Q/K norms on top) op by op: a prefill of 6 tokens and two
// decode steps, each device on its own chain of values and its own KV cache,
// every op planned by PlanSized from the graph's value sizes, as the runtime
// presents them. The logits are compared by ‖metal−cpu‖/‖cpu‖: the CPU
// rounds activations to 8 bits before every quantized mat-mul (about 0.5%
// each, seen above) and keeps the query and the decode accumulator in f16;
// over 2 layers that stays under 2e-2, the project's agreement rule. Every
// op but attention is also run on the CPU's inputs and held to its own
// tolerance (checkOp), so the new ops are seen to add nothing to it.
func testGraph(t *testing.T, h *harness, ref devices.Device, sum *results) {
	for i, arch := range testArchs {
		t.Run(arch, func(t *testing.T) { testGraphOf(t, h, ref, sum, arch, uint64(i)) })
	}
}

func testGraphOf(t *testing.T, h *harness, ref devices.Device, sum *results, arch string, seed uint64) {
	r := rand.New(rand.NewPCG(13, 14+seed))
	c, types := testModel(arch)
	weights := map[string][]byte{}
	for _, w := range c.Weights() {
		v := verify.RandVec(r, w.Rows*w.Cols)
		for i := range v {
			if strings.HasSuffix(w.Name, ".bias") {
				v[i] /= 4 // biases of the size of the projections' outputs
			} else if w.Rows == 1 {
				v[i] = 1 + v[i]/8 // norm scales near 1
			} else if w.Name != "token_embd.weight" {
				v[i] /= float32(math.Sqrt(float64(w.Cols)))
			}
		}
		rb, _ := quant.RowBytes(types[w.Name], w.Cols)
		weights[w.Name] = make([]byte, w.Rows*rb)
		if err := quant.Quantize(types[w.Name], v, weights[w.Name]); err != nil {
			t.Fatal(err)
		}
	}
	// The reference device keeps weights by name: each model has its own
	// names.
	names := map[string]string{}
	for name := range weights {
		names[name] = arch + "/" + name
	}
	kv := map[int][2][]byte{}
	pos := 0
	for _, n := range []int{6, 1, 1} {
		g, err := llama.Build(c, types, n, pos, c.Context)
		if err != nil {
			t.Fatal(err)
		}
		st := ops.Step{Tokens: make([]int32, n), Pos: pos}
		for i := range st.Tokens {
			st.Tokens[i] = int32(r.IntN(c.Vocab))
		}
		mv, cv := map[int][]float32{}, map[int][]float32{}
		kinds := map[string]bool{}
		for _, op := range g.Ops {
			var data []byte
			if op.Weight != nil {
				data = weights[op.Weight.Name]
				w := *op.Weight
				w.Name = names[w.Name]
				op.Weight = &w
			}
			kinds[opVariant(op)] = true
			out := g.Values[op.Out].Elems()
			var mins, cins [][]float32
			for _, v := range op.In {
				mins, cins = append(mins, mv[v]), append(cins, cv[v])
			}
			var kc, vc *[]byte
			if op.Kind == ops.Attention {
				caches, ok := kv[op.Layer]
				if !ok {
					caches = [2][]byte{make([]byte, CacheBytes(op)), make([]byte, CacheBytes(op))}
				}
				kc, vc = &caches[0], &caches[1]
			}
			mv[op.Out] = onMetal(t, h, op, st, data, out, kc, vc, mins...)
			if kc != nil {
				kv[op.Layer] = [2][]byte{*kc, *vc}
			}
			cv[op.Out] = onCPU(t, ref, op, st, data, out, cins...)
			if kc == nil {
				// Each op also on the CPU's own inputs, held to its tolerance
				// above, so that the logits' difference is the CPU's
				// deliberate roundings and not a kernel's error at these
				// shapes.
				checkOp(t, op, data, cins, onMetal(t, h, op, st, data, out, nil, nil, cins...), cv[op.Out])
			}
		}
		got, want := mv[g.Output], cv[g.Output]
		e := verify.NormRel(got, want)
		if e > 2e-2 {
			t.Fatalf("%s n=%d pos=%d: logits ‖metal−cpu‖/‖cpu‖ = %.3g > 2e-2", arch, n, pos, e)
		}
		var ks []string
		for k := range kinds {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		sum.add("%-12s %-6s n=%d pos=%d: %d ops, logits vs cpu ‖Δ‖/‖cpu‖ %.2g (tol 2e-2); ops %s", "graph", arch, n, pos, len(g.Ops), e, strings.Join(ks, " "))
		pos += n
	}
}

// checkOp holds one op of a graph, run by both devices on the same inputs
// (in, and weight data), to the tolerance its test above states: exact for
// add_bias, rope (the same angles and roundings), add, last_row and embed;
// 1e-5 relative for rms_norm (f32 against float64 sums); 1e-6 relative for
// silu_mul. Mat-muls are held to float64 dot products of the decoded weight
// instead, within k·2⁻²⁴ of Σ|w·x| (testMatMul): the CPU's 8-bit
// activations miss by more than 2e-2 where a row has outliers (SiLU's
// outputs in the Qwen3 variant: 2.4% seen).
func checkOp(t *testing.T, op *ops.Op, data []byte, in [][]float32, got, want []float32) {
	t.Helper()
	rel := func(tol float64) {
		e, i := verify.MaxErr(got, func(i int) float64 { return float64(want[i]) }, func(i int) float64 { return math.Abs(float64(want[i])) + 1e-30 })
		if e > tol {
			t.Fatalf("%s: out[%d] = %g, cpu %g (relative error %.3g > %g)", op, i, got[i], want[i], e, tol)
		}
	}
	switch op.Kind {
	case ops.RMSNorm:
		rel(1e-5)
	case ops.SiLUMul:
		rel(1e-6)
	case ops.MatMul:
		w := op.Weight
		deq := make([]float32, w.Rows*w.Cols)
		if err := quant.Dequantize(w.Type, data, deq); err != nil {
			t.Fatal(err)
		}
		x := in[0]
		n := len(x) / w.Cols
		exact, mag := make([]float64, n*w.Rows), make([]float64, n*w.Rows)
		for tk := range n {
			for row := range w.Rows {
				var s, m float64
				for k, wv := range deq[row*w.Cols : (row+1)*w.Cols] {
					p := float64(wv) * float64(x[tk*w.Cols+k])
					s += p
					m += math.Abs(p)
				}
				exact[tk*w.Rows+row], mag[tk*w.Rows+row] = s, m
			}
		}
		tol := float64(w.Cols) * 0x1p-24
		if e, i := verify.MaxErr(got, func(i int) float64 { return exact[i] }, func(i int) float64 { return mag[i] }); e > tol {
			t.Fatalf("%s: out[%d] = %g, want %g: error %.3g of Σ|w·x| > %.3g", op, i, got[i], exact[i], e, tol)
		}
	default:
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: out[%d] = %g, cpu %g (must be bit-identical)", op, i, got[i], want[i])
			}
		}
	}
}

// opVariant names op's kind with the variant it is, for the summary.
func opVariant(op *ops.Op) string {
	s := op.Kind.String()
	switch {
	case op.Kind == ops.RMSNorm && op.PerHead:
		s += "(per-head)"
	case op.Kind == ops.RoPE && op.Rope.Neox && op.Rope.Freqs != nil:
		s += "(neox,freqs)"
	case op.Kind == ops.RoPE && op.Rope.Neox:
		s += "(neox)"
	case op.Kind == ops.RoPE && op.Rope.Freqs != nil:
		s += "(freqs)"
	}
	return s
}
