package verify

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"hybrid/devices"
	"hybrid/ops"
	"hybrid/quant"
)

// The helpers below are what checking a device against the CPU needs; the
// device packages' own tests (devices/cuda, devices/metal) use them too.

// RunOp loads op's weight if any, writes the inputs, fills the output with
// NaN so that an element the device never writes shows, runs op and reads
// the output back.
func RunOp(d devices.Device, op *ops.Op, st ops.Step, weight []byte, outLen int, ins [][]float32) ([]float32, error) {
	if op.Weight != nil {
		if err := d.LoadWeight(op.Weight, weight); err != nil {
			return nil, err
		}
	}
	var bufs []devices.Buffer
	for _, in := range ins {
		b, err := d.Alloc(len(in))
		if err != nil {
			return nil, err
		}
		if err := d.Write(b, in); err != nil {
			return nil, err
		}
		bufs = append(bufs, b)
	}
	ob, err := d.Alloc(outLen)
	if err != nil {
		return nil, err
	}
	poison := make([]float32, outLen)
	for i := range poison {
		poison[i] = float32(math.NaN())
	}
	if err := d.Write(ob, poison); err != nil {
		return nil, err
	}
	if err := d.Run(op, st, bufs, ob); err != nil {
		return nil, err
	}
	if err := d.Sync(); err != nil {
		return nil, err
	}
	out := make([]float32, outLen)
	if err := d.Read(out, ob); err != nil {
		return nil, err
	}
	return out, nil
}

// RandVec returns n standard normal values.
func RandVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// RandomWeights returns rows×cols standard normal weights encoded as typ
// (rows quantized in parallel; the values depend only on r) and their exact
// decoding.
func RandomWeights(r *rand.Rand, typ quant.Type, rows, cols int) ([]byte, []float32, error) {
	rb, err := quant.RowBytes(typ, cols)
	if err != nil {
		return nil, nil, err
	}
	src := RandVec(r, rows*cols)
	data := make([]byte, rows*rb)
	deq := make([]float32, rows*cols)
	var wg sync.WaitGroup
	errs := make([]error, rows)
	w := runtime.GOMAXPROCS(0)
	for g := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < rows; i += w {
				if err := quant.Quantize(typ, src[i*cols:(i+1)*cols], data[i*rb:(i+1)*rb]); err != nil {
					errs[i] = fmt.Errorf("quantizing %s: %w", typ, err)
					continue
				}
				errs[i] = quant.Dequantize(typ, data[i*rb:(i+1)*rb], deq[i*cols:(i+1)*cols])
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, nil, err
		}
	}
	return data, deq, nil
}

// MaxAbs is max|v|.
func MaxAbs(v []float32) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, math.Abs(float64(x)))
	}
	return m
}

// MaxErr returns the largest |got-want(i)|/scale(i) and where; NaN counts as
// infinite.
func MaxErr(got []float32, want func(i int) float64, scale func(i int) float64) (float64, int) {
	worst, at := 0.0, -1
	for i, g := range got {
		e := math.Abs(float64(g)-want(i)) / scale(i)
		if math.IsNaN(e) {
			e = math.Inf(1)
		}
		if e > worst || at < 0 {
			worst, at = e, i
		}
	}
	return worst, at
}

// NormRel is ‖a-b‖/‖b‖; infinite if a holds a NaN.
func NormRel(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(num / den)
}

// AttentionRef is causal softmax attention in float64 of the query rows q
// (at positions pos, pos+1, …; rows of Heads·HeadDim) over every position's
// keys and values ks, vs (rows of KVHeads·HeadDim): the reference the
// devices' attention kernels are checked against.
func AttentionRef(q, ks, vs []float32, a ops.AttnParams, pos int) []float64 {
	hd, heads, kdim := a.HeadDim, a.Heads, a.KVHeads*a.HeadDim
	n := len(q) / (heads * hd)
	want := make([]float64, len(q))
	scale := 1 / math.Sqrt(float64(hd))
	for i := range n {
		for h := range heads {
			kh := h / (heads / a.KVHeads) * hd
			span := pos + i + 1
			s := make([]float64, span)
			m := math.Inf(-1)
			for j := range span {
				var dot float64
				for f := range hd {
					dot += float64(q[(i*heads+h)*hd+f]) * float64(ks[j*kdim+kh+f])
				}
				s[j] = dot * scale
				m = max(m, s[j])
			}
			var sum float64
			for j := range s {
				s[j] = math.Exp(s[j] - m)
				sum += s[j]
			}
			for f := range hd {
				var o float64
				for j := range span {
					o += s[j] * float64(vs[j*kdim+kh+f])
				}
				want[(i*heads+h)*hd+f] = o / sum
			}
		}
	}
	return want
}
