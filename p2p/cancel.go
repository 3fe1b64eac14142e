package p2p

import "errors"

// Cancelling. A receive can be withdrawn while no message has matched it:
// it is then only an entry of the posted queue, and removing it under the
// lock is the whole cancellation, so no message that arrives later can be
// taken by it. Once matched it runs to its end (the bytes are on their
// way, or a rendezvous is under way with the sender). Sends are not
// cancelled: an eager send may already sit in the receiver's unexpected
// queue, and a rendezvous RTS too, and taking either back would need a
// protocol round trip with a receiver that may have matched it meanwhile
// (MPI-4 deprecates cancelling sends for this reason).

// ErrCancelled: the receive was cancelled before any message matched it.
var ErrCancelled = errors.New("receive cancelled")

// CancelRecv withdraws the receive r if no message has matched it yet and
// reports whether it did; r then completes with ErrCancelled. A request
// that is not a receive, or is matched or complete, is left alone.
func (e *Engine) CancelRecv(r *Request) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cancelRecv(r)
}

// CancelRecvAt is CancelRecv of *at, read under the lock: for a request
// that its owner keeps at *at and may give back from another goroutine
// meanwhile, through WaitReleaseAt, ReleaseAt or ReleaseN, which set *at
// to nil under the lock first. A nil *at is left alone.
func (e *Engine) CancelRecvAt(at **Request) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if *at == nil {
		return false
	}
	return e.cancelRecv(*at)
}

// cancelRecv is CancelRecv with the lock held.
func (e *Engine) cancelRecv(r *Request) bool {
	if !r.recv || r.done.Load() {
		return false
	}
	q := e.mq[r.ctx]
	if q == nil {
		return false
	}
	i := q.posted.index(r)
	if i < 0 {
		return false
	}
	q.posted.remove(i)
	r.st = Status{Source: AnySource, Tag: AnyTag}
	r.complete(ErrCancelled)
	return true
}

// WaitStop is Wait that gives up when stop is closed: it reports whether
// r completed. The stop channel is looked at between polls, so a blocked
// caller notices it within one sleep of the wait's third phase
// (GORUN_WAIT_SLEEP).
func (r *Request) WaitStop(stop <-chan struct{}) bool {
	e := r.e
	w := waiter{e: e}
	for {
		if r.done.Load() {
			return true
		}
		select {
		case <-stop:
			return r.done.Load()
		default:
		}
		e.mu.Lock()
		e.progress()
		e.mu.Unlock()
		if r.done.Load() {
			return true
		}
		w.idle()
	}
}
