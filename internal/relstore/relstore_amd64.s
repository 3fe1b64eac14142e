//go:build amd64 && !race

#include "textflag.h"

// func Store32(p *uint32, v uint32)
TEXT ·Store32(SB), NOSPLIT, $0-12
	MOVQ	p+0(FP), AX
	MOVL	v+8(FP), BX
	MOVL	BX, (AX)
	RET

// func Store64(p *uint64, v uint64)
TEXT ·Store64(SB), NOSPLIT, $0-16
	MOVQ	p+0(FP), AX
	MOVQ	v+8(FP), BX
	MOVQ	BX, (AX)
	RET
