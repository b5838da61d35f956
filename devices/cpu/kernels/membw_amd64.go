//go:build amd64 && !purego

package kernels

//go:noescape
func readSumAVX2(p *uint64, n int) uint64

//go:noescape
func readSum4AVX2(p *uint64, gap, n int) uint64

// readSum sums b in four streams at once, its quarters (readSum4AVX2), and
// what is left over alone.
func readSum(b []uint64) uint64 {
	if !hasAVX2 || len(b) < 32 {
		return readSumGo(b)
	}
	q := len(b) / 4 &^ 7
	s := readSum4AVX2(&b[0], 8*q, q)
	rest := b[4*q:]
	if n := len(rest) &^ 31; n > 0 {
		s += readSumAVX2(&rest[0], n)
		rest = rest[n:]
	}
	return s + readSumGo(rest)
}
