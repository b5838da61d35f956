//go:build cuda

package cuda

// SetFuse turns decode-step fusion, and a step's segments, on or off for d
// (tests compare both).
func SetFuse(d *Device, on bool) { d.do(func() error { d.noFuse, d.noSeg = !on, !on; return nil }) }

// Segments returns how many batches d handed to its thread without waiting.
func Segments(d *Device) int {
	var n int
	d.do(func() error { n = d.stats.segments; return nil })
	return n
}

// Fused returns how many fused units and single ops d has launched.
func Fused(d *Device) (fused, alone int) {
	d.do(func() error { fused, alone = d.stats.fused, d.stats.alone; return nil })
	return
}

// MVRopes returns how many q, k, v mat-vec launches with their RoPE and
// cache append (fuseMVRope) d has made.
func MVRopes(d *Device) int {
	var n int
	d.do(func() error { n = d.stats.mvRopes; return nil })
	return n
}
