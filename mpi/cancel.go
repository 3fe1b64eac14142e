package mpi

import (
	"context"
	"fmt"
)

// Cancel withdraws a receive that no message has matched yet
// (MPI_Cancel): the request then completes with no error and a status
// whose Cancelled is true, and a message that arrives later goes to
// another receive. A receive that has matched already cannot be
// withdrawn: it completes normally and its status says Cancelled false.
// Complete the request (Wait, Test, ...) in both cases, as in MPI.
//
// Only receives can be cancelled. A send may already wait in the
// receiver's queue (its data or its rendezvous request), and taking it
// back would need a round trip with a receiver that may match it
// meanwhile; MPI-4 deprecates cancelling sends for this reason. Cancel of
// a send, a collective or a persistent request not started fails with
// ErrRequest and leaves the request as it was. Cancel may run in another
// goroutine than the one completing the request (Wait, Test, Waitall...),
// but not meanwhile Start of a persistent request, nor WaitFree or
// WaitallFree (which give the request itself for reuse).
func (q *Request) Cancel() (err error) {
	defer q.failTo(&err)
	if q == nil {
		return errorf(ErrRequest, "Request.Cancel", "nil request")
	}
	if !q.recv {
		return errorf(ErrRequest, "Request.Cancel", "%s cannot be cancelled: only receives can (MPI-4 deprecates cancelling sends)", q.op)
	}
	if q.inactive() {
		return errorf(ErrRequest, "Request.Cancel", "%s request is not started (Start it first)", q.op)
	}
	// Another goroutine may be completing q meanwhile: the engine reads r
	// under its lock, under which the completing side sets r to nil before
	// it gives r back (so that r is never another operation's here), and
	// cancelling a receive that completed does nothing.
	q.c.rt.eng.CancelRecvAt(&q.r)
	return nil
}

// WaitContext is Wait that gives up when ctx ends. A receive still
// unmatched then is withdrawn, as Cancel does, and WaitContext returns an
// error for which errors.Is(err, ctx.Err()) holds: no message is taken by
// it afterwards, and its buffer is the caller's again. A receive that has
// matched is waited for to its end (its bytes are on their way) and
// returned as Wait would, so that the message is not lost.
//
// A send (or a nonblocking collective) cannot be withdrawn: when ctx ends
// first, WaitContext returns an error wrapping ctx.Err() that says so, and
// the request stays in flight: its buffer still belongs to it until a
// later Wait, Test or WaitContext reports its completion.
func (q *Request) WaitContext(ctx context.Context) (Status, error) {
	if q == nil {
		return Status{}, nil
	}
	if q.fin || q.r.WaitStop(ctx.Done()) {
		st, err := q.finish()
		return st, q.fail(err)
	}
	if !q.recv {
		return Status{}, &Error{Class: ErrOther, Op: q.op,
			Err: fmt.Errorf("still in flight, its buffer in use (only receives can be withdrawn): %w", ctx.Err())}
	}
	if !q.c.rt.eng.CancelRecv(q.r) {
		// Matched meanwhile: the message is ours, receive it.
		return q.Wait()
	}
	st, err := q.finish()
	if err != nil {
		return st, q.fail(err)
	}
	return st, &Error{Class: ErrOther, Op: q.op, Err: fmt.Errorf("receive withdrawn: %w", ctx.Err())}
}
