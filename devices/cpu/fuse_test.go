package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"hybrid/devices"
	"hybrid/ops"
	"hybrid/quant"
)

// TestHeldMatVecs runs a decode step's pattern of ops (q, k and v of one
// input; a mat-vec whose input is a held one's output; gate and up of
// another input of other weight types; an add reading two held outputs) on
// a device that holds mat-vecs and on one that does not, and checks every
// output bit for bit; and that a held op has not run before something reads
// the device.
func TestHeldMatVecs(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	const cols = 256
	type mm struct {
		name string
		typ  quant.Type
		rows int
		in   string
	}
	mms := []mm{
		{"q", quant.Q4_0, 256, "x"}, {"k", quant.Q4_0, 16, "x"}, {"v", quant.Q8_0, 16, "x"},
		{"o", quant.Q4_0, 256, "q"}, // reads a held output: runs after the group
		{"gate", quant.Q4_K, 32, "x2"}, {"up", quant.Q6_K, 32, "x2"},
	}
	raws := map[string][]byte{}
	for _, m := range mms {
		rb, _ := quant.RowBytes(m.typ, cols)
		raw := make([]byte, rb*m.rows)
		if err := quant.Quantize(m.typ, randVec(r, m.rows*cols), raw); err != nil {
			t.Fatal(err)
		}
		raws[m.name] = raw
	}
	inputs := map[string][]float32{"x": randVec(r, cols), "x2": randVec(r, cols)}
	outs := map[bool]map[string][]float32{}
	for _, fuse := range []bool{false, true} {
		d := New("cpu", 3)
		d.fuse = fuse
		bufs := map[string]devices.Buffer{}
		for name, v := range inputs {
			b, _ := d.Alloc(len(v))
			if err := d.Write(b, v); err != nil {
				t.Fatal(err)
			}
			bufs[name] = b
		}
		step := ops.Step{Tokens: []int32{1}}
		for _, m := range mms {
			w := &ops.Weight{Name: m.name, Type: m.typ, Rows: m.rows, Cols: cols}
			if err := d.LoadWeight(w, raws[m.name]); err != nil {
				t.Fatal(err)
			}
			bufs[m.name], _ = d.Alloc(m.rows)
			if err := d.Run(&ops.Op{Kind: ops.MatMul, Name: m.name, Weight: w}, step, []devices.Buffer{bufs[m.in]}, bufs[m.name]); err != nil {
				t.Fatal(err)
			}
			if fuse && m.name == "up" {
				// gate and up are held: nothing has read the device.
				for _, name := range []string{"gate", "up"} {
					for i, v := range bufs[name].(*Buffer).F {
						if v != 0 {
							t.Fatalf("%s[%d] is %v before anything read the device: not held", name, i, v)
						}
					}
				}
			}
		}
		bufs["sum"], _ = d.Alloc(32)
		if err := d.Run(&ops.Op{Kind: ops.Add, Name: "sum"}, step, []devices.Buffer{bufs["gate"], bufs["up"]}, bufs["sum"]); err != nil {
			t.Fatal(err)
		}
		outs[fuse] = map[string][]float32{}
		for _, name := range []string{"q", "k", "v", "o", "gate", "up", "sum"} {
			got := make([]float32, bufs[name].Len())
			if err := d.Read(got, bufs[name]); err != nil {
				t.Fatal(err)
			}
			outs[fuse][name] = got
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range outs[false] {
		for i, v := range want {
			if got := outs[true][name][i]; math.Float32bits(got) != math.Float32bits(v) {
				t.Fatalf("%s[%d]: %v held, %v alone", name, i, got, v)
			}
		}
	}
}

// TestHeldMatVecsFlushOnRead: a held mat-vec runs before a Read or Sync
// returns, whichever comes first.
func TestHeldMatVecsFlushOnRead(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	const rows, cols = 32, 64
	rb, _ := quant.RowBytes(quant.Q8_0, cols)
	raw := make([]byte, rb*rows)
	if err := quant.Quantize(quant.Q8_0, randVec(r, rows*cols), raw); err != nil {
		t.Fatal(err)
	}
	w := &ops.Weight{Name: "w", Type: quant.Q8_0, Rows: rows, Cols: cols}
	x := randVec(r, cols)
	d := New("cpu", 2)
	d.fuse = true
	defer d.Close()
	if err := d.LoadWeight(w, raw); err != nil {
		t.Fatal(err)
	}
	want := run(t, d, &ops.Op{Kind: ops.MatMul, Name: "mm", Weight: w}, ops.Step{Tokens: []int32{1}}, rows, x)
	xb, _ := d.Alloc(cols)
	if err := d.Write(xb, x); err != nil {
		t.Fatal(err)
	}
	ob, _ := d.Alloc(rows)
	if err := d.Run(&ops.Op{Kind: ops.MatMul, Name: "mm", Weight: w}, ops.Step{Tokens: []int32{1}}, []devices.Buffer{xb}, ob); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	for i, v := range ob.(*Buffer).F {
		if v != want[i] {
			t.Fatalf("after Sync, output %d is %v, want %v", i, v, want[i])
		}
	}
}

// TestHeldMatVecsNoAllocs: holding a decode step's mat-vecs and running
// them allocates nothing once warm (the group's names are made only for an
// error).
func TestHeldMatVecsNoAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	const rows, cols = 64, 256
	d := New("cpu", 2)
	d.fuse = true
	defer d.Close()
	var ws []*ops.Weight
	for i, typ := range []quant.Type{quant.Q8_0, quant.Q4_0} {
		rb, _ := quant.RowBytes(typ, cols)
		raw := make([]byte, rb*rows)
		if err := quant.Quantize(typ, randVec(r, rows*cols), raw); err != nil {
			t.Fatal(err)
		}
		w := &ops.Weight{Name: fmt.Sprint("w", i), Type: typ, Rows: rows, Cols: cols}
		if err := d.LoadWeight(w, raw); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	xb, _ := d.Alloc(cols)
	y0, _ := d.Alloc(rows)
	y1, _ := d.Alloc(rows)
	in := []devices.Buffer{xb}
	mm0 := &ops.Op{Kind: ops.MatMul, Name: "a", Weight: ws[0]}
	mm1 := &ops.Op{Kind: ops.MatMul, Name: "b", Weight: ws[1]}
	st := ops.Step{Tokens: []int32{1}}
	step := func() {
		if err := d.Run(mm0, st, in, y0); err != nil {
			t.Fatal(err)
		}
		if err := d.Run(mm1, st, in, y1); err != nil {
			t.Fatal(err)
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if a := testing.AllocsPerRun(20, step); a != 0 {
		t.Errorf("a held pair of mat-vecs allocates %v times", a)
	}
}
