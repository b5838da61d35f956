package cuda

import (
	"slices"
	"testing"

	"hybrid/quant"
)

// TestBlasPaths checks where cuBLAS is looked for: HYBRID_CUBLAS's path
// alone, none for "0", else CUDA 13's library before 12's and 11's and the
// loader's search before the toolkit's directory.
func TestBlasPaths(t *testing.T) {
	if got := blasPaths("/opt/x/libcublas.so.12"); !slices.Equal(got, []string{"/opt/x/libcublas.so.12"}) {
		t.Fatalf("HYBRID_CUBLAS=/opt/x/libcublas.so.12: %v", got)
	}
	if got := blasPaths("0"); got != nil {
		t.Fatalf("HYBRID_CUBLAS=0: %v, want none", got)
	}
	got := blasPaths("")
	at := func(p string) int {
		i := slices.Index(got, p)
		if i < 0 {
			t.Fatalf("%s not among %v", p, got)
		}
		return i
	}
	if !(at("libcublas.so.13") < at("libcublas.so.12") && at("libcublas.so.12") < at("libcublas.so.11") &&
		at("libcublas.so.11") < at("/usr/local/cuda/lib64/libcublas.so.13")) {
		t.Fatalf("order: %v", got)
	}
}

// TestBlasTakes checks which prompt mat-muls take cuBLAS: from blasMin
// tokens, or from the tensor cores' least for weights of blasBig elements;
// never F32 weights, rows of a part of 32, or prompts under the least.
func TestBlasTakes(t *testing.T) {
	const least = 32
	for _, c := range []struct {
		t             quant.Type
		rows, cols, n int
		want          bool
	}{
		{quant.Q4_K, 2048, 2048, blasMin, true},
		{quant.Q4_K, 2048, 2048, blasMin - 1, false}, // small weight, short prompt: the own kernel
		{quant.Q4_K, 11008, 4096, least, true},       // large weight: from the least
		{quant.Q4_K, 11008, 4096, least - 1, false},  // under the tensor cores
		{quant.Q6_K, 5632, 2048, 64, true},           // 11.5M elements
		{quant.F32, 11008, 4096, 512, false},         // F32 keeps the f32 kernels
		{quant.F16, 4096, 4096, 512, true},
		{quant.F16, 300, 172, 512, false}, // rows of a part of 32
	} {
		if got := blasTakes(c.t, c.rows, c.cols, c.n, least); got != c.want {
			t.Errorf("%s %dx%d at %d tokens: cuBLAS %v, want %v", c.t, c.rows, c.cols, c.n, got, c.want)
		}
	}
}
