package kernels

import "time"

// ReadBandwidth measures how fast the pool's threads together read memory:
// each streams its share of a buffer of size bytes (far larger than the
// caches) through a plain sum, four places of it at once where the assembly
// runs, as the decode kernels stream weights (on the 16-core Xeon host one
// stream per thread read 45-66 GB/s at 8 threads, less than llama.cpp's
// Q8_0 decode moved there); the
// best of reps passes, in bytes per second. It is the ceiling a decode step's
// weight traffic is judged against.
func ReadBandwidth(p *Pool, size int, reps int) float64 {
	const chunk = 1 << 20
	size = max(size/chunk, p.threads) * chunk
	buf := make([]uint64, size/8)
	p.Run(len(buf)/(chunk/8), func(lo, hi int) { // touch every page first
		for i := lo * chunk / 8; i < hi*chunk/8; i += 512 {
			buf[i] = uint64(i)
		}
	})
	var best float64
	for range max(reps, 1) {
		t := time.Now()
		// Contiguous shares, one per thread, as a mat-vec splits rows.
		n := p.threads
		p.Run(n, func(lo, hi int) {
			for s := lo; s < hi; s++ {
				part := buf[s*len(buf)/n : (s+1)*len(buf)/n]
				sink.v += readSum(part)
			}
		})
		best = max(best, float64(size)/time.Since(t).Seconds())
	}
	return best
}

var sink struct{ v uint64 }

// readSumGo is readSum's portable form.
func readSumGo(b []uint64) uint64 {
	var s0, s1, s2, s3 uint64
	for len(b) >= 4 {
		s0 += b[0]
		s1 += b[1]
		s2 += b[2]
		s3 += b[3]
		b = b[4:]
	}
	for _, v := range b {
		s0 += v
	}
	return s0 + s1 + s2 + s3
}
