//go:build cuda

package cuda

import "strconv"

// SetFuse turns decode-step fusion on or off for d (tests compare both).
func SetFuse(d *Device, on bool) { d.do(func() error { d.noFuse = !on; return nil }) }

// UsePlainModules reloads d's kernels as a GPU before Hopper has them: the
// compute_80 fused and attention modules, launched plainly, not as
// programmatic dependent launches. It reports whether d had the compute_90
// ones. Call it before anything runs on d.
func UsePlainModules(d *Device) (bool, error) {
	var had bool
	err := d.do(func() error {
		had = d.k.pdl
		d.k.unload()
		var err error
		d.k, err = loadKernels(8)
		return err
	})
	return had, err
}

// Fused returns how many fused units and single ops d has launched.
func Fused(d *Device) (fused, alone int) {
	d.do(func() error { fused, alone = d.stats.fused, d.stats.alone; return nil })
	return
}

// SetMVWarps makes d's decode mat-vecs of mvwTypes take w warps a block
// (8 or 16), or mvWarps's default for 0.
func SetMVWarps(d *Device, w int) { d.do(func() error { d.mvWarpsSet = w; return nil }) }

// SetTwoBlocks makes every wide decode mat-vec of d whose type has
// mvw2_<type> take it (on), or twoBlocks's rule (off).
func SetTwoBlocks(d *Device, on bool) { d.do(func() error { d.twoSet = on; return nil }) }

// MVRopes returns how many q, k, v mat-vec launches with their RoPE and
// cache append (fuseMVRope) d has made.
func MVRopes(d *Device) int {
	var n int
	d.do(func() error { n = d.stats.mvRopes; return nil })
	return n
}

// SetMVTWarps makes every batched tensor-core mat-vec take w warps a block
// (4, 8 or 16), or its type's own (mvtWarps) for 0.
func SetMVTWarps(w int) {
	mvtWarpsEnv = ""
	if w > 0 {
		mvtWarpsEnv = strconv.Itoa(w)
	}
}

// BatchJoined returns how many of d's launches for batched steps joined
// ops: a mat-vec launch with the RMSNorm or SiLUMul before it or the
// residual add after it (matchMVB), or the rows' RoPE and cache append.
func BatchJoined(d *Device) int {
	var n int
	d.do(func() error { n = d.stats.batchJoined; return nil })
	return n
}

// SiLUQ8 returns how many of d's gate and up launches also staged the down
// projection's input (q8Pair).
func SiLUQ8(d *Device) int {
	var n int
	d.do(func() error { n = d.stats.siluQ8; return nil })
	return n
}

// PDL reports whether d's decode mat-vecs are programmatic dependent
// launches (the compute_90 modules, on Hopper and later).
func PDL(d *Device) bool {
	var on bool
	d.do(func() error { on = d.k.pdl; return nil })
	return on
}

// NoSiLUQ8 reports whether HYBRID_CUDA_SILU_Q8=0 turned q8Pair off.
func NoSiLUQ8() bool { return noSiLUQ8 }
