package p2p

import "github.com/gorun/gorun/btl"

// IsendNow is IsendMem for a caller that needs no request for a send that
// completed within the call: an eager frame whose bytes the transport took
// at once (copied into a shared-memory ring, written to a socket). Then
// the request goes straight back to the free list, under the same lock,
// and IsendNow returns nil, nil; else it returns the request as IsendMem
// does (a rendezvous, a queued frame, a send that failed on its way).
// Package mpi hands out one completed request for all of those instead of
// a request of their own: at the 8-byte message rate the request's
// allocation, its report in Waitall and its release were a third of a
// sender's time.
//
// It takes host bytes, not a btl.Mem: a Mem does not fit the registers of
// a call with these arguments and is copied through the stack by every
// call that passes it on (so is package mpi's Isend, the message rate's
// send path, shorter).
func (e *Engine) IsendNow(ctx uint32, dst, tag int, b []byte) (*Request, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sendNow(ctx, dst, tag, b) {
		return nil, nil
	}
	r, err := e.isendNew(ctx, dst, tag, btl.HostMem(b), false)
	if err == nil && r.done.Load() && r.err == nil && r.frames == 0 {
		r.reset()
		return nil, nil
	}
	return r, err
}

// sendNow sends an eager message of host memory through its route's
// immediate send (btl.Immediate) when the route has one and takes it: no
// request, no frame, no completion. It reports whether it did; on false
// nothing happened and the caller sends as usual, which also reports
// every error (a failed peer, a revoked context, a closed engine): the
// checks are isend's, repeated here inline rather than shared through a
// function that every send would call. The lock is held.
func (e *Engine) sendNow(ctx uint32, dst, tag int, b []byte) bool {
	rt := e.routes[dst]
	if rt == nil || rt.imm == nil || len(b) > rt.eager || len(rt.held) > 0 ||
		e.closed || e.failed[dst] != nil || e.tagErr(ctx, tag) != nil {
		return false
	}
	h := header{kind: kEager, ctx: ctx, tag: int32(tag), length: uint64(len(b))}
	h.encode(&e.nowHdr)
	return rt.imm.SendNow(&e.nowHdr, b)
}
