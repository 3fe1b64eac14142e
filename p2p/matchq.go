package p2p

// Matching queues per context. Each context (communicator; package mpi
// gives a communicator two: point-to-point and collective) has its own
// posted-receive and unexpected-message queues, so that matching scans
// only that context's entries, and revoking a communicator or failing its
// AnySource receives touches that communicator's queues only: O(its own
// entries), whatever the other communicators hold. A peer's failure is
// the exception: it concerns every context (PeerFailed walks them all).
//
// MPI's rules all hold within a context, the only place they apply:
// non-overtaking per (source, tag, context) is the FIFO order of one
// queue, and AnySource or AnyTag match within the receive's context only.
//
// A context's queues are made on its first message or receive and live
// until its communicator is freed (Unrevoke), when they are dropped if
// empty: dropping them whenever they run empty would allocate on nearly
// every message of in-order traffic (TestWindowAllocs). A freed context
// that still holds entries (messages nobody received, as MPI allows)
// keeps its queues, as the single queue kept them before.

// matchQ is one context's matching queues.
type matchQ struct {
	posted queue[*Request]    // receives no message matched yet, oldest first
	unexp  queue[*unexpected] // arrived messages no receive took yet, oldest first
}

func (q *matchQ) empty() bool { return q.posted.len() == 0 && q.unexp.len() == 0 }

// q returns the matching queues of ctx, made on first use; the lock is
// held.
func (e *Engine) q(ctx uint32) *matchQ {
	if q := e.lookQ(ctx); q != nil {
		return q
	}
	q := &matchQ{}
	e.mq[ctx] = q
	return q
}

// lookQ returns the matching queues of ctx, nil if it has none; the lock
// is held. The last context looked up is remembered: nearly every
// receive and arrival of a program is on one context, and the map lookup
// was 4% of a receiver's time at the 8-byte message rate.
func (e *Engine) lookQ(ctx uint32) *matchQ {
	if e.lastQ != nil && e.lastCtx == ctx {
		return e.lastQ
	}
	q := e.mq[ctx]
	if q != nil {
		e.lastCtx, e.lastQ = ctx, q
	}
	return q
}

// dropQ forgets the queues of ctx if they are empty; the lock is held.
func (e *Engine) dropQ(ctx uint32) {
	if q := e.mq[ctx]; q != nil && q.empty() {
		delete(e.mq, ctx)
		if e.lastQ == q {
			e.lastQ = nil
		}
	}
}

// Contexts reports how many contexts have matching queues: those with a
// receive or message since their last Unrevoke (for tests and debugging).
func (e *Engine) Contexts() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.mq)
}
