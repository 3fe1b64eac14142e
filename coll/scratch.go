package coll

// Scratch returns n bytes of pooled scratch memory, its content
// undefined: the pool the algorithms take theirs from. Package mpi packs
// non-contiguous layouts into it. Give it back with ReleaseScratch once
// nothing reads or writes it any more.
func Scratch(n int) []byte { return getBuf(n) }

// ReleaseScratch returns a slice from Scratch to the pool.
func ReleaseScratch(b []byte) { putBuf(b) }
