package p2p

import (
	"errors"

	"fmt"
	"github.com/gorun/gorun/btl"
	"slices"
)

// ErrRevoked: the communicator of the operation was revoked (ULFM's
// MPI_Comm_revoke, package mpi's Comm.Revoke).
var ErrRevoked = errors.New("communicator revoked")

// Revoke fails every pending operation on context ctx with err (which
// should wrap ErrRevoked), and every later one at once. Messages of ctx
// that have arrived and were not received are dropped; ones that arrive
// later wait unreceived like any unexpected message (the peers stop
// sending once they learn of the revocation). An RMA transfer in flight
// finishes first, as when a peer fails.
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
	e.failMatching(func(r *Request) bool { return r.ctx == ctx }, err)
	e.unexp = slices.DeleteFunc(e.unexp, func(u *unexpected) bool { return u.ctx == ctx && u.claimed == nil })
}

// FailAnySource fails, with err, every posted receive from AnySource on
// ctx: a member of its communicator failed, and the message it waits for
// may have been that member's (ULFM's MPI_ERR_PROC_FAILED_PENDING; here
// the request completes).
func (e *Engine) FailAnySource(ctx uint32, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	e.failPosted(func(r *Request) bool { return r.ctx == ctx && r.peer == AnySource }, err)
}

// failMatching fails the posted receives and rendezvous in progress that
// match; the lock is held.
func (e *Engine) failMatching(match func(*Request) bool, err error) {
	e.failPosted(match, err)
	for id, r := range e.sends {
		if match(r) {
			delete(e.sends, id)
			e.abandon(r, err)
		}
	}
	for id, r := range e.recvs {
		if !match(r) {
			continue
		}
		delete(e.recvs, id)
		if r.x == nil && r.sg == nil && r.st.Bytes > r.got {
			// Its CTS went: the sender may be sending the DATA already.
			// A stand-in of the accepted size takes it, so that the
			// frame neither lands in the caller's buffer after r failed
			// nor looks like a protocol error.
			st := newRequest(e)
			st.recv, st.ctx, st.rndvPeer, st.id = true, r.ctx, r.rndvPeer, id
			st.st.Bytes, st.got = r.st.Bytes, r.got
			st.mem = btl.HostMem(make([]byte, r.st.Bytes))
			e.recvs[id] = st
		}
		e.abandon(r, err)
	}
}

// failPosted fails the posted receives that match; the lock is held.
func (e *Engine) failPosted(match func(*Request) bool, err error) {
	keep := e.posted[:0]
	for _, r := range e.posted {
		if match(r) {
			r.complete(err)
			continue
		}
		keep = append(keep, r)
	}
	clear(e.posted[len(keep):])
	e.posted = keep
}

// revokedErr returns the error of operations on ctx if it was revoked;
// the lock is held.
func (e *Engine) revokedErr(ctx uint32) error {
	if len(e.revoked) == 0 {
		return nil
	}
	if err, ok := e.revoked[ctx]; ok {
		return fmt.Errorf("%w", err)
	}
	return nil
}

// Revoked reports the error of operations on ctx if it was revoked.
func (e *Engine) Revoked(ctx uint32) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.revokedErr(ctx)
}

// Unrevoke forgets that ctx was revoked: its communicator was freed, and
// the context may serve another one later.
func (e *Engine) Unrevoke(ctx uint32) {
	e.mu.Lock()
	delete(e.revoked, ctx)
	e.mu.Unlock()
}
