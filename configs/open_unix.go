//go:build unix

package configs

import "syscall"

// openFlags opens without blocking: a FIFO put where a checked file was
// opens at once (and is then refused) instead of waiting for a writer. A
// regular file reads the same either way.
const openFlags = syscall.O_NONBLOCK
