//go:build amd64 && !purego

package kernels

//go:noescape
func readSumAVX2(p *uint64, n int) uint64

func readSum(b []uint64) uint64 {
	if !hasAVX2 || len(b) < 32 {
		return readSumGo(b)
	}
	n := len(b) &^ 31
	return readSumAVX2(&b[0], n) + readSumGo(b[n:])
}
