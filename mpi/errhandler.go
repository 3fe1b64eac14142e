package mpi

import (
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
// Communicators made from c (Dup, Idup, Split, SplitType, Create) start
// with c's handler.
//
// The handler is applied to the errors of: Send, Ssend, Recv, Isend,
// Issend, Irecv, Sendrecv, Probe, Iprobe (and what calls them:
// SendrecvReplace, SendObj); the blocking collectives of collective.go
// and the start of every collective (a bad communicator); Dup, Idup (the
// call; the request's errors are the request's), Split, SplitType,
// Create, Free; SetAttr, GetAttr, DeleteAttr. Not yet applied to: the
// completion calls of requests (Wait, Test and their families),
// Mprobe/Mrecv, RecvObj, the GPU forms, nonblocking and neighbourhood
// collectives past their start, topology calls, windows, ULFM calls.
// Errors of collectives that these calls run inside (a Split's Allgather)
// reach the handler as that collective's error.
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
// c's handler to err and returns err.
func (c *Comm) fail(err error) error {
	if err == nil || c == nil {
		return err
	}
	h := c.eh.Load()
	switch {
	case h == nil:
	case h.fatal:
		fmt.Fprintf(os.Stderr, "%v (MPI_ERRORS_ARE_FATAL on %s, rank %d)\n", err, c.name, c.rank)
		Abort(c, int(classOf(err)))
	case h.fn != nil:
		h.fn(c, err)
	}
	return err
}
