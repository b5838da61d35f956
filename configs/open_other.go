//go:build !unix

package configs

// openFlags is none where a FIFO cannot be opened without blocking: the
// check before opening is all there is.
const openFlags = 0
