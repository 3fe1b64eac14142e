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
func (e *Engine) IsendNow(ctx uint32, dst, tag int, m btl.Mem) (*Request, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, err := e.isendNew(ctx, dst, tag, m, false)
	if err == nil && r.done.Load() && r.err == nil && r.frames == 0 {
		r.reset()
		return nil, nil
	}
	return r, err
}
