package mpi

import (
	"sync"

	"github.com/gorun/gorun/p2p"
)

// Request-based one-sided operations (MPI-3 §11.3.5: MPI_Rput, MPI_Rget,
// MPI_Raccumulate, MPI_Rget_accumulate). Each starts the same operation as
// its plain form and returns a Request that completes when the operation
// is complete at the origin: Rput's and Raccumulate's origin slice may be
// reused, Rget's and RgetAccumulate's result is in place. Completion at
// the target still takes Flush, Unlock or UnlockAll, as for the plain
// forms. MPI allows them in passive-target epochs only (Lock, LockAll);
// in a Fence or Start epoch they fail with ErrRMASync.
//
// The Request wraps the p2p request that ends the operation at the origin
// (the reply's receive, else the data's send), which the window also
// waits for at Flush and Unlock: rmaShare gives it back to the engine only
// once both the window and the Request's completion call are done with it,
// so a Request completed after the Unlock, or never, stays valid.

// Rput is Put returning a Request (MPI_Rput).
func (w *Win[T]) Rput(origin []T, target, disp int) (_ *Request, err error) {
	defer w.failTo(&err)
	return w.issue("Win.Rput", wkPut, opNone, elemBytes(origin), nil, target, disp, len(origin), true)
}

// Rget is Get returning a Request (MPI_Rget): dst holds the elements once
// the Request completes.
func (w *Win[T]) Rget(dst []T, target, disp int) (_ *Request, err error) {
	defer w.failTo(&err)
	return w.issue("Win.Rget", wkGet, opNone, nil, elemBytes(dst), target, disp, len(dst), true)
}

// Raccumulate is Accumulate returning a Request (MPI_Raccumulate).
func (w *Win[T]) Raccumulate(origin []T, target, disp int, op Op) (_ *Request, err error) {
	defer w.failTo(&err)
	const name = "Win.Raccumulate"
	if err := w.checkOp(name, op, false); err != nil {
		return nil, err
	}
	return w.issue(name, wkAcc, op.kind, elemBytes(origin), nil, target, disp, len(origin), true)
}

// RgetAccumulate is GetAccumulate returning a Request
// (MPI_Rget_accumulate): result holds the old elements once it completes.
func (w *Win[T]) RgetAccumulate(origin, result []T, target, disp int, op Op) (_ *Request, err error) {
	defer w.failTo(&err)
	const name = "Win.RgetAccumulate"
	if err := w.checkOp(name, op, true); err != nil {
		return nil, err
	}
	var data []byte
	if op.kind != opNoOp {
		if len(origin) != len(result) {
			return nil, errorf(ErrCount, name, "origin has %d elements and result %d: they must match", len(origin), len(result))
		}
		data = elemBytes(origin)
	}
	return w.issue(name, wkGetAcc, op.kind, data, elemBytes(result), target, disp, len(result), true)
}

// rmaShare is the joint ownership of a request-based operation's p2p
// request by the window (its pending list) and the Request.
type rmaShare struct {
	mu           sync.Mutex
	window, user bool // each is done with it
}

// drop records that the window (or the Request) is done with the p2p
// request and reports whether the other is too: the caller then releases
// it.
func (s *rmaShare) drop(window bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if window {
		s.window = true
	} else {
		s.user = true
	}
	return s.window && s.user
}

// request returns the Request over r, an operation named op of the
// window whose private communicator is c; check, when not nil, turns
// the reply's length into the operation's error.
func (s *rmaShare) request(c *Comm, e *p2p.Engine, r *p2p.Request, op string, check func(got int) error) *Request {
	q := &Request{r: r, c: c, op: op, elem: 1}
	q.post = func(st Status, err error) error {
		if err == nil && check != nil {
			err = check(st.bytes)
		}
		// The outcome is recorded: q no longer needs r.
		q.r = nil
		if s.drop(false) {
			e.Release(r)
		}
		return err
	}
	return q
}
