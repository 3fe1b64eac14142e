package mpi

import (
	"errors"
	"fmt"
	"os"
)

// Errhandler says what happens when a call on a communicator fails
// (MPI_Errhandler). Every call returns its error whatever the handler;
// the handler may in addition act on it first.
type Errhandler struct {
	name  string
	fatal bool
	fn    func(c *Comm, err error)
}

// String is the handler's name.
func (h *Errhandler) String() string { return h.name }

var (
	// ErrorsReturn only returns the error (MPI_ERRORS_RETURN, Go's way).
	// It is every communicator's handler until SetErrhandler.
	ErrorsReturn = &Errhandler{name: "MPI_ERRORS_RETURN"}
	// ErrorsAreFatal ends the job as Abort does (MPI_ERRORS_ARE_FATAL):
	// the error goes to stderr and gorun stops every rank; the exit code
	// is the error's class.
	ErrorsAreFatal = &Errhandler{name: "MPI_ERRORS_ARE_FATAL", fatal: true}
)

// NewErrhandler returns a handler that calls fn with the communicator and
// the error, in the failing call's goroutine, before the call returns the
// error (MPI_Comm_create_errhandler). fn may call this package; an error
// of such a call on the same communicator calls fn again.
func NewErrhandler(fn func(c *Comm, err error)) *Errhandler {
	return &Errhandler{name: "user errhandler", fn: fn}
}

// SetErrhandler sets c's error handler (MPI_Comm_set_errhandler).
// Communicators made from c (Dup, Idup, Split, SplitType, Create,
// CreateGroup, IntercommCreate, Merge, the topologies, a window's) start
// with c's handler.
//
// The handler is applied to the errors of every call on c: point-to-point
// calls (Send, Recv, Isend, Irecv, Sendrecv, Probe, Iprobe, the buffered
// and ready forms, SendObj, RecvObj, Mprobe, Improbe, Mrecv, Imrecv), the
// completion calls of c's requests (Wait, Test, WaitContext, Waitall,
// Waitany, Waitsome, Testall, Testany, Testsome; for several requests,
// the handler of the first failed request's communicator, given the
// *RequestErrors), Start, Free and Cancel of a request; the blocking
// collectives, the start of the nonblocking and persistent ones (their
// runs' errors come with the completion calls) and the neighbourhood
// collectives; the constructors; the topology calls (CartCreate,
// CartGet, CartCoords, CartRank, CartShift, CartSub, DistGraphCreate,
// DistGraphCreateAdjacent, DistGraphNeighbors); the attribute calls; the
// ULFM calls (Revoke, AckFailed, Agree, Shrink); and windows' calls
// (WinCreate, WinAllocate, then Put, Get, the accumulates, the
// synchronisation calls, Sync and Free, through the window's handler,
// which it took from c at WinCreate: Win.SetErrhandler changes it). Not yet: the GPU
// forms (SendGPU & co.) and the Group calls, which involve no
// communicator. An error reaches a handler once: the error of a
// collective that a call runs inside (a Split's Allgather) reaches it as
// that collective's error, and not again when the outer call returns it.
func (c *Comm) SetErrhandler(h *Errhandler) error {
	if err := c.checkLive("Comm.SetErrhandler"); err != nil {
		return c.fail(err)
	}
	if h == nil {
		return c.fail(errorf(ErrArg, "Comm.SetErrhandler", "nil error handler"))
	}
	c.eh.Store(h)
	return nil
}

// Errhandler returns c's error handler (MPI_Comm_get_errhandler).
func (c *Comm) Errhandler() *Errhandler {
	if c == nil {
		return ErrorsReturn
	}
	if h := c.eh.Load(); h != nil {
		return h
	}
	return ErrorsReturn
}

// inherit gives d c's error handler (MPI: a new communicator takes its
// parent's).
func (d *Comm) inherit(c *Comm) {
	if h := c.eh.Load(); h != nil {
		d.eh.Store(h)
	}
}

// fail is where the errors of calls on c leave the package: it applies
// c's handler to err and returns err. An error is handled once: an error
// of a nested call (a Split's Allgather) that went through a handler
// already does not go through one again when the outer call returns it.
// Its test for no error is inlined into every call.
func (c *Comm) fail(err error) error {
	if err == nil {
		return nil
	}
	return c.failSlow(err)
}

// failSlow is fail of an error.
func (c *Comm) failSlow(err error) error {
	if c == nil || handled(err) {
		return err
	}
	if e, ok := err.(*Error); ok {
		e.handled = true
	}
	h := c.eh.Load()
	switch {
	case h == nil:
	case h.fatal:
		fmt.Fprintf(os.Stderr, "%v (MPI_ERRORS_ARE_FATAL on %s, rank %d)\n", err, c.name, c.rank)
		abortJob(int(classOf(err)), "MPI_ERRORS_ARE_FATAL on "+c.name)
	case h.fn != nil:
		h.fn(c, err)
	}
	return err
}

// failTo is fail for a deferred call on a named error result:
// defer c.failTo(&err).
func (c *Comm) failTo(err *error) { *err = c.fail(*err) }

// handled reports whether err, or an *Error it wraps, went through a
// handler.
func handled(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if e, ok := err.(*Error); ok && e.handled {
			return true
		}
	}
	return false
}
