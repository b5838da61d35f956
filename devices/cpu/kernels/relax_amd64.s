//go:build amd64 && !purego

#include "textflag.h"

// func relax()
// One PAUSE: a spinning thread yields its core's issue slots to the other
// hardware thread and slows its own polling loads.
TEXT ·relax(SB), NOSPLIT, $0-0
	PAUSE
	RET
