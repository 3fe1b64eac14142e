package p2p

import (
	"errors"
)

// ErrRevoked: the communicator of the operation was revoked (ULFM's
// MPI_Comm_revoke, package mpi's Comm.Revoke).
var ErrRevoked = errors.New("communicator revoked")

// ErrFreed: the communicator of a receive still pending was freed, and its
// context is about to serve another communicator (Purge).
var ErrFreed = errors.New("communicator freed")

// Revoke fails every posted receive of context ctx that no message has
// matched yet with err (which should wrap ErrRevoked), and every later
// operation on ctx at once. Messages of ctx that arrived unreceived are
// dropped, and so are those that arrive later; a rendezvous offer (RTS)
// among them is refused (a CTS flagged fRevoked), so that its sender
// completes with ErrRevoked instead of waiting. Operations already
// matched (a rendezvous in progress, an eager message arriving) run to
// their end: their buffers are in the transports' hands, and both sides
// are alive (a failed peer fails them as usual). It costs ctx's own
// queued entries only, whatever other contexts hold (matchq.go).
func (e *Engine) Revoke(ctx uint32, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	if e.revoked == nil {
		e.revoked = map[uint32]error{}
	}
	if _, ok := e.revoked[ctx]; ok {
		return
	}
	e.revoked[ctx] = err
	q := e.mq[ctx]
	if q == nil {
		return
	}
	e.dropTags(ctx, q, func(int) bool { return true }, err)
}

// dropTags fails the posted receives of ctx (its queues q) whose tag is
// in, and drops its unexpected messages whose tag is in, refusing the
// rendezvous offers among them; messages claimed by a matched probe stay.
// Revoke and RevokeTags share it; the lock is held.
func (e *Engine) dropTags(ctx uint32, q *matchQ, in func(tag int) bool, err error) {
	failPosted(q, func(r *Request) bool { return in(r.tag) }, err)
	// The refusals go after the filter: a send can fail inline (a TCP
	// write to a dead peer) and report the peer failed, and PeerFailed
	// edits this queue (its half-arrived message), which the filter must
	// not see change under it.
	var refuse []*unexpected
	q.unexp.filter(func(u *unexpected) bool {
		if u.claimed != nil || !in(u.tag) {
			return true
		}
		if u.rts {
			refuse = append(refuse, u)
		}
		return false
	})
	for _, u := range refuse {
		e.refuseRTS(u.src, ctx, u.sreq)
	}
}

// refuseRTS answers the RTS sreq of src on the revoked context ctx with a
// CTS flagged fRevoked; the lock is held.
func (e *Engine) refuseRTS(src int, ctx uint32, sreq uint64) {
	if e.failed[src] != nil {
		return
	}
	r := e.newRequest() // carries the frame; never reused (no Release)
	h := header{kind: kCTS, flags: fRevoked, ctx: ctx, sreq: sreq}
	h.encode(&r.ctl.Hdr)
	e.sendCtl(src, r, &r.ctl)
}

// FailAnySource fails, with err, every posted receive from AnySource on
// ctx, and every later receive or probe from AnySource on ctx until
// AckAnySource: a member of its communicator failed, and the message it
// waits for may have been that member's (ULFM's
// MPI_ERR_PROC_FAILED_PENDING; here the request completes).
func (e *Engine) FailAnySource(ctx uint32, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	if e.anyFail == nil {
		e.anyFail = map[uint32]error{}
	}
	e.anyFail[ctx] = err
	if q := e.mq[ctx]; q != nil {
		failPosted(q, func(r *Request) bool { return r.peer == AnySource }, err)
	}
}

// AckAnySource lets receives and probes from AnySource on ctx go on after
// FailAnySource (MPI_Comm_ack_failed).
func (e *Engine) AckAnySource(ctx uint32) {
	e.mu.Lock()
	delete(e.anyFail, ctx)
	e.mu.Unlock()
}

// matchErr is the error of a receive or probe on ctx from src with tag
// before it looks for a message: revoked (the context, or the tag's range:
// revoketags.go), or an AnySource one after a member's failure; the lock
// is held.
func (e *Engine) matchErr(ctx uint32, src, tag int) error {
	if err := e.tagErr(ctx, tag); err != nil {
		return err
	}
	if src == AnySource && len(e.anyFail) != 0 {
		if err := e.anyFail[ctx]; err != nil {
			return err
		}
	}
	return nil
}

// revokedErr returns the error of operations on ctx if it was revoked;
// the lock is held.
func (e *Engine) revokedErr(ctx uint32) error {
	if len(e.revoked) == 0 {
		return nil
	}
	return e.revoked[ctx]
}

// Revoked reports the error of operations on ctx if it was revoked.
func (e *Engine) Revoked(ctx uint32) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.revokedErr(ctx)
}

// Purge readies context ctx, whose communicator was freed, to serve
// another one: the receives still posted on it fail with err (which should
// wrap ErrFreed), the messages that arrived on it unreceived are dropped
// (a rendezvous offer among them refused, as Revoke refuses them), and
// its matching queues and revocation state are forgotten. Without it the
// next communicator given the context would match what the freed one left
// behind (messages sent on it that nobody received). Messages claimed by a
// matched probe stay with their Message.
func (e *Engine) Purge(ctx uint32, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	if q := e.mq[ctx]; q != nil {
		e.dropTags(ctx, q, func(int) bool { return true }, err)
	}
	delete(e.revoked, ctx)
	delete(e.revTags, ctx)
	delete(e.anyFail, ctx)
	e.dropQ(ctx)
}

// Unrevoke forgets that ctx was revoked, its revoked tag ranges, its
// AnySource failures, and its matching queues if they are empty: its
// communicator was freed, and the context may serve another one later.
func (e *Engine) Unrevoke(ctx uint32) {
	e.mu.Lock()
	delete(e.revoked, ctx)
	delete(e.revTags, ctx)
	delete(e.anyFail, ctx)
	e.dropQ(ctx)
	e.mu.Unlock()
}
