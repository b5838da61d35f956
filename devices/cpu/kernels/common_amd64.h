// Definitions shared by the assembly kernels.

// HSUM leaves the sum of Y0's 8 lanes in X0's lane 0, using X1.
#define HSUM \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS       X1, X0, X0 \
	VPERMILPS    $0x0e, X0, X1 \
	VADDPS       X1, X0, X0 \
	VPERMILPS    $0x01, X0, X1 \
	VADDSS       X1, X0, X0
