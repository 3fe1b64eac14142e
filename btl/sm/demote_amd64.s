#include "textflag.h"

// func demote(p unsafe.Pointer, n int)
TEXT ·demote(SB),NOSPLIT,$0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
loop:
	CMPQ CX, $0
	JLE done
	BYTE $0x0F; BYTE $0x1C; BYTE $0x00 // CLDEMOTE (AX)
	ADDQ $64, AX
	SUBQ $64, CX
	JMP loop
done:
	RET

// func cpuid7ecx() uint32
TEXT ·cpuid7ecx(SB),NOSPLIT,$0-4
	MOVL $7, AX
	MOVL $0, CX
	CPUID
	MOVL CX, ret+0(FP)
	RET
