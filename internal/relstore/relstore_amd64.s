//go:build amd64 && !race

#include "textflag.h"

// func Store32(p *uint32, v uint32)
TEXT ·Store32(SB), NOSPLIT, $0-12
	MOVQ	p+0(FP), AX
	MOVL	v+8(FP), BX
	MOVL	BX, (AX)
	RET
