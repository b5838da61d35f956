package kernels

import (
	"math/rand/v2"
	"testing"
)

// TestReadSum checks the streaming sum against the portable one at lengths
// around its unrolling.
func TestReadSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 1, 31, 32, 33, 64, 1000, 4099, 4133} {
		b := make([]uint64, n)
		for i := range b {
			b[i] = rng.Uint64()
		}
		if got, want := readSum(b), readSumGo(b); got != want {
			t.Errorf("n=%d: %d, want %d", n, got, want)
		}
	}
}

// TestReadBandwidth checks that the measurement returns a plausible rate.
func TestReadBandwidth(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	if bw := ReadBandwidth(p, 16<<20, 2); !(bw > 1e8 && bw < 1e13) {
		t.Errorf("read bandwidth %g B/s", bw)
	}
}
