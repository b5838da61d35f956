package quant

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"testing"
)

// golden is testdata/llamacpp.golden.gz, written by testdata/gen_golden.c from
// llama.cpp's own ggml_quantize_chunk (no importance matrix, so the *_ref
// quantizers) and type_traits.to_float.
type golden struct {
	sets    []goldenSet
	records []goldenRecord
}

type goldenSet struct {
	name string
	x    []float32
}

type goldenRecord struct {
	t     Type
	op    uint32 // 0 quantize a set, 1 dequantize its output (hash), 2 dequantize raw blocks
	set   int
	n     int
	bytes []byte
	out   []float32
	hash  uint64
}

func readGolden(t *testing.T) *golden {
	t.Helper()
	f, err := os.Open("testdata/llamacpp.golden.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	r := &goldenReader{b: raw}
	if string(r.next(4)) != "QGLD" {
		t.Fatal("golden: bad magic")
	}
	g := &golden{}
	for range r.u32() {
		name := string(r.next(int(r.u32())))
		g.sets = append(g.sets, goldenSet{name, r.f32s(int(r.u32()))})
	}
	for range r.u32() {
		rec := goldenRecord{t: Type(r.u32()), op: r.u32()}
		switch rec.op {
		case 0:
			rec.set = int(r.u32())
			rec.bytes = r.next(int(r.u32()))
		case 1:
			rec.set = int(r.u32())
			rec.hash = binary.LittleEndian.Uint64(r.next(8))
		case 2:
			rec.n = int(r.u32())
			rec.bytes = r.next(int(r.u32()))
			rec.out = r.f32s(rec.n)
		default:
			t.Fatalf("golden: bad op %d", rec.op)
		}
		g.records = append(g.records, rec)
	}
	if r.err != nil || len(r.b) != 0 {
		t.Fatalf("golden: malformed file (%v, %d bytes left)", r.err, len(r.b))
	}
	return g
}

type goldenReader struct {
	b   []byte
	err error
}

func (r *goldenReader) next(n int) []byte {
	if n > len(r.b) {
		r.err = io.ErrUnexpectedEOF
		n = len(r.b)
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *goldenReader) u32() uint32 {
	p := r.next(4)
	if len(p) < 4 {
		return 0
	}
	return binary.LittleEndian.Uint32(p)
}

func (r *goldenReader) f32s(n int) []float32 {
	p := r.next(4 * n)
	x := make([]float32, len(p)/4)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
	}
	return x
}

func f32Bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// firstBlockDiff names the first block where two encodings differ.
func firstBlockDiff(t Type, got, want []byte) string {
	bb := t.BlockBytes()
	for i := 0; i < len(got) && i < len(want); i += bb {
		e := min(i+bb, len(got), len(want))
		if !bytes.Equal(got[i:e], want[i:e]) {
			return fmt.Sprintf("block %d:\n got %x\nwant %x", i/bb, got[i:e], want[i:e])
		}
	}
	return "lengths differ"
}

// TestGoldenLlamaCpp checks Quantize and Dequantize bit for bit against the
// outputs llama.cpp produced for the same inputs: no tolerance at all.
func TestGoldenLlamaCpp(t *testing.T) {
	g := readGolden(t)
	quantized := map[[2]int][]byte{}
	for _, rec := range g.records {
		switch rec.op {
		case 0:
			set := g.sets[rec.set]
			t.Run(fmt.Sprintf("quantize/%s/%s", rec.t, set.name), func(t *testing.T) {
				got := make([]byte, len(rec.bytes))
				if err := Quantize(rec.t, set.x, got); err != nil {
					t.Fatal(err)
				}
				quantized[[2]int{int(rec.t), rec.set}] = rec.bytes
				if !bytes.Equal(got, rec.bytes) {
					t.Errorf("differs from llama.cpp at %s", firstBlockDiff(rec.t, got, rec.bytes))
				}
			})
		case 1:
			set := g.sets[rec.set]
			t.Run(fmt.Sprintf("dequantize/%s/%s", rec.t, set.name), func(t *testing.T) {
				src := quantized[[2]int{int(rec.t), rec.set}]
				got := make([]float32, len(set.x))
				if err := Dequantize(rec.t, src, got); err != nil {
					t.Fatal(err)
				}
				h := fnv.New64a()
				h.Write(f32Bytes(got))
				if h.Sum64() != rec.hash {
					t.Errorf("FNV-1a of output %#x, llama.cpp's %#x", h.Sum64(), rec.hash)
				}
			})
		case 2:
			t.Run(fmt.Sprintf("dequantize/%s/random-blocks", rec.t), func(t *testing.T) {
				got := make([]float32, rec.n)
				if err := Dequantize(rec.t, rec.bytes, got); err != nil {
					t.Fatal(err)
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(rec.out[i]) {
						t.Fatalf("element %d (block %d): got %g (%#x), llama.cpp %g (%#x)", i, i/rec.t.BlockSize(),
							got[i], math.Float32bits(got[i]), rec.out[i], math.Float32bits(rec.out[i]))
					}
				}
			})
		}
	}
}
