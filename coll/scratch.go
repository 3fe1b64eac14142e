package coll

// Scratch returns pooled scratch memory of n bytes, *p[:n], its content
// undefined: the pool the algorithms take theirs from (getBuf). Package
// mpi packs non-contiguous layouts into it. The pool keeps the pointer
// itself, so that a Scratch and ReleaseScratch pair allocates nothing
// once the pool is warm (internal/bufpool). nil for n == 0. Give it back
// with ReleaseScratch once nothing reads or writes it any more.
func Scratch(n int) *[]byte {
	if n == 0 {
		return nil
	}
	return bufPool.GetRef(n)
}

// ReleaseScratch returns memory from Scratch to the pool; nil is
// ignored.
func ReleaseScratch(p *[]byte) { bufPool.PutRef(p) }
