//go:build cuda

package cuda

// SetFuse turns decode-step fusion on or off for d (tests compare both).
func SetFuse(d *Device, on bool) { d.do(func() error { d.noFuse = !on; return nil }) }

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
