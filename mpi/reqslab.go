package mpi

import (
	"sync"
	"sync/atomic"
)

// Point-to-point Requests come from slabs: one allocation per reqSlabLen
// requests instead of one each. Allocating the 152-byte Request was 10-11%
// of the time of an Isend and of an Irecv at the 8-byte message rate
// (pprof of examples/osu/mbw_mr at np=2, bench/README.md). A slab stays
// alive while any of its requests is referenced, and no request is handed
// out twice unless WaitallFree gave it back (the caller's entries set to
// nil), so what the caller holds keeps its meaning (repeated Waits
// agree). (Isend's sends that complete within the call share one
// completed request instead: pt2pt.go, sentReq.)
const reqSlabLen = 32

type reqSlab struct {
	reqs [reqSlabLen]Request
	next atomic.Int32 // the next free index; past the end once used up
}

var curSlab atomic.Pointer[reqSlab]

// freed holds the requests WaitallFree gave back, for newRequest to hand
// out again, and nFreed about how many it holds: an empty sync.Pool's Get
// scans every P (hundreds of ns at GOMAXPROCS 64), so newRequest looks
// only when some are there. (sync.Pool may drop some at a collection:
// the count is then high, and Get finds none and allocates.)
var (
	freed  sync.Pool
	nFreed atomic.Int64
)

// newRequest returns a zero Request of its own, safe to call from any
// goroutine: one WaitallFree gave back, or a new one.
func newRequest(c *Comm, op string, elem int) *Request {
	if nFreed.Load() > 0 {
		nFreed.Add(-1)
		if q, _ := freed.Get().(*Request); q != nil {
			q.c, q.op, q.elem, q.reusable = c, op, elem, true
			return q
		}
	}
	for {
		s := curSlab.Load()
		if s != nil {
			if i := s.next.Add(1) - 1; i < reqSlabLen {
				q := &s.reqs[i]
				q.c, q.op, q.elem, q.reusable = c, op, elem, true
				return q
			}
		}
		n := new(reqSlab)
		n.next.Store(1)
		if curSlab.CompareAndSwap(s, n) {
			q := &n.reqs[0]
			q.c, q.op, q.elem, q.reusable = c, op, elem, true
			return q
		}
	}
}

// release sets the entries of reqs, all reported complete, to nil
// (persistent requests stay) and gives the point-to-point ones back to
// newRequest; the communicator's shared completed send request and
// requests of other kinds (collectives) are only dropped.
func release(reqs []*Request) {
	for i, q := range reqs {
		if q == nil || q.pers != nil {
			continue
		}
		reqs[i] = nil
		if q.reusable && q.r == nil && q.rel == nil {
			*q = Request{}
			freed.Put(q)
			nFreed.Add(1)
		}
	}
}
