//go:build !linux

package kernels

// futexes is futex_linux.go's; elsewhere the pool uses channels.
type futexes struct{}

func newFutexes(int) *futexes                   { return nil }
func (*futexes) run(*Pool, task, int, int, int) {}
func (*futexes) close()                         {}
func (p *Pool) workFutex()                      {}
