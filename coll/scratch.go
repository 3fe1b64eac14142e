package coll

// Scratch returns pooled scratch memory of n bytes, *p[:n], its content
// undefined: the pool the algorithms take theirs from (getBuf). Package
// mpi packs non-contiguous layouts into it. The pool keeps the pointer
// itself, so that a Scratch and ReleaseScratch pair allocates nothing
// once the pool is warm (getBuf and putBuf allocate the pointer on each
// put). nil for n == 0. Give it back with ReleaseScratch once nothing
// reads or writes it any more.
func Scratch(n int) *[]byte {
	if n == 0 {
		return nil
	}
	k := sizeClass(n)
	p, ok := bufPool[k].Get().(*[]byte)
	if !ok {
		b := make([]byte, n, 1<<k)
		p = &b
	}
	*p = (*p)[:n]
	return p
}

// ReleaseScratch returns memory from Scratch to the pool; nil is
// ignored.
func ReleaseScratch(p *[]byte) {
	if p == nil {
		return
	}
	*p = (*p)[:cap(*p)]
	bufPool[sizeClass(cap(*p))].Put(p)
}
