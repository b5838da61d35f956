package kernels

import (
	"fmt"

	"hybrid/quant"
)

// kernel is how one weight type is multiplied: how activations are prepared
// and the row loop that consumes them.
type kernel struct {
	// block is the activation block size the kernel's quantized input uses:
	// 32 or 256, or 0 for the float types, which take x as it is.
	block int
	// rows sets y[r] = W_r·x for r < len(y), W_r being the stride bytes at
	// w[r*stride:].
	rows func(w []byte, stride int, x *xrow, y []float32)
	// round, for F16 and BF16, rounds each activation to the weight's
	// precision first, as llama.cpp converts activations to the weight's
	// vec_dot type before it multiplies.
	round func(float32) float32
	// q81: the activations are ggml's Q8_1 (Q4_1 and Q5_1 weights), whose
	// block sum is stored rounded to binary16; otherwise xrow.s is exact.
	q81 bool
	// rowsN, if set, replaces rows for a batch of two or more inputs (the
	// float types, which llama.cpp multiplies in another order then).
	rowsN func(w []byte, stride int, x *xrow, y []float32)
	// rowsNFor, if set, says whether rowsN applies to a batch of n inputs
	// against rows weight rows (IQ4_XS's panel order needs eight or more
	// inputs, and rows in groups of eight); unset, it applies from two.
	rowsNFor func(n, rows int) bool
	// gemm, if set, multiplies batches of gemmMin or more inputs (gemm.go).
	gemm *gemmSpec
	// rows4, if set, multiplies a batch's inputs four at a time
	// (batch4.go): Q6_K's as rows does each, bit for bit, Q2_K's in
	// llama.cpp's repacked GEMM order, which it uses for the first n − n%4
	// inputs of a batch (kquant2_go.go).
	rows4 rows4Func
	// amx6: batches of gemmMin or more inputs go to gemm6 where AMX runs
	// (Q6_K, amx6.go).
	amx6 bool
}

// kernelFor holds the kernel of each supported type; the portable Go ones are
// installed below and the assembly ones replace them in init where the CPU
// has the features they need.
var kernelFor = map[quant.Type]*kernel{
	quant.F32:  {block: 0, rows: rowLoop(dotVecF32Go), rowsN: rowLoop(dotTinyF32Go)},
	quant.F16:  {block: 0, rows: rowLoop(dotVecF16Go), rowsN: rowLoop(dotTinyF16Go), round: roundF16},
	quant.BF16: {block: 0, rows: rowLoop(dotBF16Go), round: roundBF16},
	quant.Q4_0: {block: 32, rows: rowLoop(dotQ4_0Go)},
	quant.Q4_1: {block: 32, rows: rowLoop(dotQ4_1Go), q81: true},
	quant.Q5_0: {block: 32, rows: rowLoop(dotQ5_0Go)},
	quant.Q5_1: {block: 32, rows: rowLoop(dotQ5_1Go), q81: true},
	quant.Q8_0: {block: 32, rows: rowLoop(dotQ8_0Go)},
	quant.Q4_K: {block: 256, rows: rowLoop(dotQ4_KGo)},
	quant.Q5_K: {block: 256, rows: rowLoop(dotQ5_KGo)},
	quant.Q6_K: {block: 256, rows: rowLoop(dotQ6_KGo), amx6: true},
	// Q2_K's rows4 is llama.cpp's GEMM order, which differs from its GEMV
	// order (rows) as llama.cpp's own do (kquant2_go.go).
	quant.Q2_K:   {block: 256, rows: rowLoop(dotQ2_KGo), rows4: q2_KRows4Go},
	quant.Q3_K:   {block: 256, rows: rowLoop(dotQ3_KGo)},
	quant.IQ4_NL: {block: 32, rows: rowLoop(dotIQ4_NLGo)},
	quant.IQ4_XS: {block: 256, rows: rowLoop(dotIQ4_XSGo), rowsN: rowLoop(dotIQ4_XSPanelGo), rowsNFor: iqpApplies},
}

func roundF16(x float32) float32  { return quant.F16ToF32(quant.F32ToF16(x)) }
func roundBF16(x float32) float32 { return quant.BF16ToF32(quant.F32ToBF16(x)) }

// portable keeps the Go kernels so that tests can compare the assembly ones
// with them.
var portable = func() map[quant.Type]kernel {
	m := map[quant.Type]kernel{}
	for t, k := range kernelFor {
		m[t] = *k
	}
	return m
}()

// rowLoop turns a one-row dot product into a row-range kernel.
func rowLoop(dot func(w []byte, x *xrow) float32) func(w []byte, stride int, x *xrow, y []float32) {
	return func(w []byte, stride int, x *xrow, y []float32) {
		for r := range y {
			y[r] = dot(w[r*stride:(r+1)*stride], x)
		}
	}
}

// MatVec sets y[r] = W[r]·x for the rows×cols weight matrix W of type t stored
// row after row in w (GGUF's layout of a [cols, rows] tensor). It panics if t
// is not supported or the lengths do not fit, which are the caller's bugs.
func MatVec(p *Pool, t quant.Type, w []byte, rows, cols int, x, y []float32) {
	MatMul(p, t, w, rows, cols, x, 1, y)
}

// MatMul sets y[i*rows+r] = W[r]·x[i] for the n rows x[i] of the n×cols
// row-major x, W as in MatVec; y is n×rows row-major. Activations are
// quantized once, then each worker takes a range of weight rows and, a tile
// of rows small enough for L1/L2 at a time, multiplies it by all n inputs, so
// weights are read from memory once whatever n is.
func MatMul(p *Pool, t quant.Type, w []byte, rows, cols int, x []float32, n int, y []float32) {
	k := check(t, w, rows, cols, x, n, y)
	p.matMul(k, w, rows, cols, x, n, y)
}

// matMul runs kernel k; tests call it directly to compare kernels.
func (p *Pool) matMul(k *kernel, w []byte, rows, cols int, x []float32, n int, y []float32) {
	s := &p.scratch
	xs := s.prepare(p, k, x, n, cols)
	if k.gemm != nil && n >= gemmMin {
		p.gemm(k.gemm, w, rows, cols, xs, y)
		return
	}
	if k.amx6 && gemmAMX6 != nil && n >= amxMin {
		p.gemm6(w, rows, cols, xs, y)
		return
	}
	stride := len(w) / rows
	s.mm = matTask{k: k, w: w, stride: stride, x: xs, rows: rows, y: y, tiles: s.batch4(p, k, xs, cols)}
	s.mm.tile = max(1, tileBytes/stride)
	align := 1
	if n == 1 {
		// One input: no re-reads to keep in cache, and a worker's whole
		// range is one call, so a kernel can read it in several streams;
		// chunks of at least minChunkBytes, so that a small matrix (a
		// decode step's k and v) is not claimed a row at a time by 16
		// threads.
		s.mm.tile, align = rows, max(1, minChunkBytes/stride)
	}
	p.runTask(&s.mm, rows, align)
	s.mm = matTask{}
}

// minChunkBytes is the least a worker takes of a decode step's weights at a
// time.
const minChunkBytes = 16 << 10

// tileBytes is how many weight bytes MatMul multiplies by all its inputs
// before moving on: well inside a core's L2, so that the re-reads for the
// second and later inputs hit cache.
const tileBytes = 32 << 10

// matTask is MatMul's parallel work over weight rows.
type matTask struct {
	k      *kernel
	w      []byte
	stride int
	tile   int
	x      []xrow
	rows   int
	y      []float32
	tiles  []byte // the inputs in groups of four for k.rows4, or nil
}

func (m *matTask) run(lo, hi int) {
	groups, nb := 0, len(m.x[0].d)
	if m.tiles != nil {
		groups = len(m.x) / 4
	}
	for t := lo; t < hi; t += m.tile {
		te := min(t+m.tile, hi)
		w := m.w[t*m.stride : te*m.stride]
		for g := range groups {
			tile := m.tiles[g*len(m.tiles)/groups : (g+1)*len(m.tiles)/groups]
			m.k.rows4(w, m.stride, te-t, tile, nb, m.y[4*g*m.rows+t:], m.rows)
		}
		rows := m.k.rows
		if m.k.rowsN != nil && len(m.x) > 1 && (m.k.rowsNFor == nil || m.k.rowsNFor(len(m.x), m.rows)) {
			rows = m.k.rowsN
		}
		for i := 4 * groups; i < len(m.x); i++ {
			rows(w, m.stride, &m.x[i], m.y[i*m.rows+t:i*m.rows+te])
		}
	}
}

// scratch is a Pool's reusable space for prepared activations.
type scratch struct {
	f  []float32
	q  []int8
	d  []float32
	s  []float32
	bs []int16
	x  []xrow
	mm matTask
	qt quantTask

	tiles  []inTile
	t4     []byte // batch4's tiles
	tt     tile4Task
	lt     layoutTask
	off    []int32
	offK   []int32 // MatVecs: a Q4_K matrix's offsets beside a Q4_0 one's
	parts  []vecPart
	vt     vecsTask
	ktiles []kTile
	pt     packedTask
	fm     fileMatrix
	ft     fillTask
	gt     gemmTask
	ax     amxInputs
	fa     amxFillTask
	axk    amxKInputs
	kt     amxKTask
	ax6    amx6Inputs
	t6     amx6Task
	panels chan *panel // one per thread, for the GEMM's unpacked rows
}

// check validates MatMul's arguments and returns t's kernel.
func check(t quant.Type, w []byte, rows, cols int, x []float32, n int, y []float32) *kernel {
	k := kernelFor[t]
	if k == nil {
		panic(fmt.Sprintf("kernels: weight type %s is not supported", t))
	}
	rb, err := quant.RowBytes(t, cols)
	if err != nil {
		panic(fmt.Sprintf("kernels: %v", err))
	}
	switch {
	case rows <= 0 || n <= 0:
		panic(fmt.Sprintf("kernels: %d×%d weight times %d inputs", rows, cols, n))
	case len(w) != rows*rb:
		panic(fmt.Sprintf("kernels: %s weight of %d×%d is %d bytes, not %d", t, rows, cols, len(w), rows*rb))
	case len(x) != n*cols:
		panic(fmt.Sprintf("kernels: input has %d values, not %d×%d", len(x), n, cols))
	case len(y) != n*rows:
		panic(fmt.Sprintf("kernels: output has %d values, not %d×%d", len(y), n, rows))
	}
	return k
}

// prepare returns the n inputs in the form k consumes, quantizing them into
// the scratch buffers, over the pool when there are several.
func (s *scratch) prepare(p *Pool, k *kernel, x []float32, n, cols int) []xrow {
	if cap(s.x) < n {
		s.x = make([]xrow, n)
	}
	xs := s.x[:n]
	if k.block == 0 {
		if k.round != nil {
			s.f = grow(s.f, len(x))
			for i, v := range x {
				s.f[i] = k.round(v)
			}
			x = s.f
		}
		for i := range xs {
			xs[i] = xrow{f: x[i*cols : (i+1)*cols]}
		}
		return xs
	}
	total, blocks := n*cols, n*cols/k.block
	s.q = grow(s.q, total)
	s.d = grow(s.d, blocks)
	s.s = grow(s.s, blocks)
	s.bs = grow(s.bs, total/16)
	nb := cols / k.block
	for i := range xs {
		xs[i] = xrow{
			f:  x[i*cols : (i+1)*cols],
			q:  s.q[i*cols : (i+1)*cols],
			d:  s.d[i*nb : (i+1)*nb],
			s:  s.s[i*nb : (i+1)*nb],
			bs: s.bs[i*cols/16 : (i+1)*cols/16],
		}
	}
	s.qt = quantTask{x: xs, block: k.block, q81: k.q81}
	p.runTask(&s.qt, n, 1)
	s.qt = quantTask{}
	return xs
}

func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// quantTask quantizes activation rows in parallel.
type quantTask struct {
	x     []xrow
	block int
	q81   bool
}

func (q *quantTask) run(lo, hi int) {
	for i := lo; i < hi; i++ {
		if q.block == 32 {
			quantize32(q.x[i].f, &q.x[i], q.q81)
		} else {
			quantize256(q.x[i].f, &q.x[i])
		}
	}
}
