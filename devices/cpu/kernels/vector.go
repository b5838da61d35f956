package kernels

// Dot returns the dot product of a and b[:len(a)] (attention's q·k). It is
// bound by the loads when the vectors are in cache; the vector version does
// 32 multiply-adds per iteration.
func Dot(a, b []float32) float32 { return dot(a, b) }

// Axpy adds a*x to y[:len(x)] (attention's weighted sum of values).
func Axpy(a float32, x, y []float32) { axpy(a, x, y) }

// dot and axpy are the fastest implementations this CPU has.
var (
	dot  = dotGo
	axpy = axpyGo
)
