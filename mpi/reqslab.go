package mpi

import (
	"sync/atomic"

	"github.com/gorun/gorun/p2p"
)

// Point-to-point Requests come from slabs: one allocation per reqSlabLen
// requests instead of one each. Allocating the Request (then 152 bytes) was 10-11%
// of the time of an Isend and of an Irecv at the 8-byte message rate
// (pprof of examples/osu/mbw_mr at np=2, bench/README.md). A slab stays
// alive while any of its requests is referenced, and no request is handed
// out twice unless WaitallFree gave it back (the caller's entries set to
// nil; ownRequest), so what the caller holds keeps its meaning (repeated Waits
// agree). (Isend's sends that complete within the call share one
// completed request instead: pt2pt.go, sentReq.)
const reqSlabLen = 32

type reqSlab struct {
	reqs [reqSlabLen]Request
	next atomic.Int32 // the next free index; past the end once used up
}

var curSlab atomic.Pointer[reqSlab]

// newRequest returns a new zero Request, safe to call from any goroutine.
func newRequest(c *Comm, op string, elem int) *Request {
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

// ownRequest returns the public request of r, an engine request just
// started (nil: ProcNull, complete at once): the one WaitallFree left
// with r (give) when r comes back from the engine's free list, else a new
// one. The free list keeps the pair together, so that reusing the public
// request costs nothing more than taking the engine's from the list: a
// list of its own (a sync.Pool, and a count of what it held) was 20% of
// a receiver's time at the 8-byte message rate.
func ownRequest(c *Comm, op string, elem int, r *p2p.Request) *Request {
	if r != nil {
		if q, ok := r.TakeKept().(*Request); ok {
			q.c, q.op, q.elem, q.reusable = c, op, elem, true
			return q.startedOwn(r)
		}
	}
	return newRequest(c, op, elem).startedOwn(r)
}
