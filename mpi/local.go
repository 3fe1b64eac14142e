package mpi

// ReduceLocal sets inout[i] = in[i] op inout[i] for every i, in this
// process, with no communication (MPI_Reduce_local): the same kernels the
// reductions use, for a program that combines partial results itself. in
// and inout must have the same length (ErrCount otherwise); op must be
// defined on T (ErrOp otherwise).
func ReduceLocal[T Element](in, inout []T, op Op) error {
	o, err := bind[T]("ReduceLocal", op)
	if err != nil {
		return err
	}
	if len(in) != len(inout) {
		return errorf(ErrCount, "ReduceLocal", "%d elements in, %d in inout", len(in), len(inout))
	}
	if len(in) > 0 {
		o.Apply(elemBytes(in), elemBytes(inout))
	}
	return nil
}

// ThreadLevel is a level of thread support (MPI_THREAD_SINGLE ...).
type ThreadLevel int

// The levels of thread support, in MPI's order.
const (
	ThreadSingle ThreadLevel = iota
	ThreadFunneled
	ThreadSerialized
	ThreadMultiple
)

func (l ThreadLevel) String() string {
	switch l {
	case ThreadSingle:
		return "MPI_THREAD_SINGLE"
	case ThreadFunneled:
		return "MPI_THREAD_FUNNELED"
	case ThreadSerialized:
		return "MPI_THREAD_SERIALIZED"
	case ThreadMultiple:
		return "MPI_THREAD_MULTIPLE"
	}
	return "ThreadLevel(?)"
}

// InitThread is Init for a program that states the thread support it
// needs (MPI_Init_thread). Every call of this package is safe from any
// goroutine, so the level provided is always ThreadMultiple, whatever
// was required; a level outside ThreadSingle..ThreadMultiple fails with
// ErrArg before anything is initialized.
func InitThread(required ThreadLevel) (ThreadLevel, error) {
	if required < ThreadSingle || required > ThreadMultiple {
		return ThreadSingle, errorf(ErrArg, "InitThread", "thread level %d is not one of ThreadSingle..ThreadMultiple", int(required))
	}
	if err := Init(); err != nil {
		return ThreadSingle, err
	}
	return ThreadMultiple, nil
}

// QueryThread returns the level of thread support provided
// (MPI_Query_thread): ThreadMultiple, between Init (or InitThread) and
// Finalize; otherwise it fails with ErrNotInit.
func QueryThread() (ThreadLevel, error) {
	if _, err := current("QueryThread"); err != nil {
		return ThreadSingle, err
	}
	return ThreadMultiple, nil
}
