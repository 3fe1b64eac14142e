package mpi

import (
	"errors"
	"fmt"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/p2p"
)

// Class is an MPI error class. Each class is itself an error, so that
// errors.Is(err, mpi.ErrTruncate) holds for any error of that class. The
// numbers are MPI's (and ULFM's for process failures).
type Class int

// Error classes.
const (
	ErrBuffer     Class = 1
	ErrCount      Class = 2
	ErrType       Class = 3
	ErrTag        Class = 4
	ErrComm       Class = 5
	ErrRank       Class = 6
	ErrRequest    Class = 7
	ErrRoot       Class = 8
	ErrGroup      Class = 9
	ErrOp         Class = 10
	ErrTopology   Class = 11
	ErrArg        Class = 13
	ErrUnknown    Class = 14
	ErrTruncate   Class = 15
	ErrOther      Class = 16
	ErrIntern     Class = 17
	ErrKeyval     Class = 36
	ErrLockType   Class = 37
	ErrNoMem      Class = 39
	ErrRMASync    Class = 47
	ErrWin        Class = 53
	ErrRMARange   Class = 68
	ErrRMAAttach  Class = 69
	ErrRMAFlavor  Class = 70
	ErrNotInit    Class = 60
	ErrProcFailed Class = 75
)

var classNames = map[Class]string{
	ErrBuffer: "invalid buffer", ErrCount: "invalid count", ErrType: "invalid datatype",
	ErrTag: "invalid tag", ErrComm: "invalid communicator", ErrRank: "invalid rank",
	ErrRequest: "invalid request", ErrRoot: "invalid root", ErrGroup: "invalid group",
	ErrOp: "invalid operation", ErrTopology: "invalid topology",
	ErrArg: "invalid argument", ErrUnknown: "unknown error",
	ErrTruncate: "message truncated", ErrOther: "other error", ErrIntern: "internal error", ErrKeyval: "invalid attribute key",
	ErrNotInit: "mpi not initialized", ErrProcFailed: "process failed",
	ErrLockType: "invalid lock type", ErrNoMem: "out of memory", ErrRMASync: "wrong synchronization of RMA calls",
	ErrWin: "invalid window", ErrRMARange: "target memory outside the window",
	ErrRMAAttach: "memory cannot be attached", ErrRMAFlavor: "wrong kind of window",
}

func (c Class) Error() string {
	if s, ok := classNames[c]; ok {
		return "mpi: " + s
	}
	return fmt.Sprintf("mpi: error class %d", int(c))
}

// Error is an error returned by this package: the operation, its class and
// the underlying cause.
type Error struct {
	Class Class
	Op    string
	Err   error
	// handled: the error went through a communicator's error handler
	// (errhandler.go).
	handled bool
}

func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("mpi: %s: %s", e.Op, classNames[e.Class])
	}
	return fmt.Sprintf("mpi: %s: %v", e.Op, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is e's class.
func (e *Error) Is(target error) bool {
	c, ok := target.(Class)
	return ok && c == e.Class
}

// errorf makes an *Error of class c for operation op.
func errorf(c Class, op, format string, args ...any) error {
	return &Error{Class: c, Op: op, Err: fmt.Errorf(format, args...)}
}

// wrap maps an internal error to its class, once, at the API boundary.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var me *Error
	if errors.As(err, &me) {
		return err
	}
	c := ErrOther
	switch {
	case errors.Is(err, p2p.ErrTruncate):
		c = ErrTruncate
	case errors.Is(err, p2p.ErrRevoked):
		c = ErrRevoked
	case errors.Is(err, p2p.ErrFreed):
		c = ErrComm
	case errors.Is(err, p2p.ErrProcFailed), errors.Is(err, btl.ErrUnreachable):
		c = ErrProcFailed
	case errors.Is(err, p2p.ErrClosed):
		c = ErrNotInit
	case errors.Is(err, p2p.ErrProtocol):
		c = ErrIntern
	case errors.Is(err, p2p.ErrNoDevicePath), errors.Is(err, gpu.ErrNoGPU):
		c = ErrBuffer
	}
	return &Error{Class: c, Op: op, Err: err}
}
