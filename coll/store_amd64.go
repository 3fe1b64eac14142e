//go:build amd64 && !race

package coll

// storeRelease stores v into *p, after every store before it (the data
// and last words of a ready line) in the order other CPUs see them: a
// plain MOV on amd64, whose stores become visible in program order (and
// the compiler keeps stores in program order). sync/atomic's store is an
// XCHG there, which stalls until the line, polled by the other ranks, has
// come over. Nobody sleeps on these words waiting to be woken (shmWait
// polls), so no store-load order is needed; readers load them with
// sync/atomic.
func storeRelease(p *uint64, v uint64) { *p = v }
