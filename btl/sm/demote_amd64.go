package sm

import "unsafe"

// demote hints, with CLDEMOTE, that the n bytes at p (whole lines) go to
// the shared last-level cache: the consumer reading them next then finds
// them there instead of fetching each line from this core's own caches.
//
//go:noescape
func demote(p unsafe.Pointer, n int)

func cpuid7ecx() uint32

// canDemote: the CPU has CLDEMOTE (CPUID.7.0:ECX bit 25). Elsewhere the
// instruction is a NOP; it is not issued at all.
var canDemote = cpuid7ecx()&(1<<25) != 0
