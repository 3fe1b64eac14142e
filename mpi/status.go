package mpi

// AnySource and AnyTag are the receive wildcards (MPI_ANY_SOURCE,
// MPI_ANY_TAG).
const (
	AnySource = -1
	AnyTag    = -1
)

// TagUB is the largest valid tag (MPI_TAG_UB).
const TagUB = 1<<31 - 1

// Status describes a received (or probed) message.
type Status struct {
	// Source is the sender's rank in the communicator.
	Source int
	// Tag is the message's tag.
	Tag   int
	bytes int
	elem  int
	// cancelled: the receive was withdrawn by Cancel (MPI_Test_cancelled).
	cancelled bool
}

// Cancelled reports whether the request this status completed was a
// receive withdrawn by Cancel or WaitContext (MPI_Test_cancelled).
func (s Status) Cancelled() bool { return s.cancelled }

// Bytes is the length of the message in bytes (for a truncated receive:
// the bytes stored).
func (s Status) Bytes() int { return s.bytes }

// Count is the number of elements received, in the element type of the
// receive's buffer. After a probe, where no type is known, it is the byte
// count: use GetCount.
func (s Status) Count() int {
	if s.elem <= 1 {
		return s.bytes
	}
	return s.bytes / s.elem
}

// GetCount is the number of whole elements of T in the message.
func GetCount[T Numeric](s Status) int { return s.bytes / elemSize[T]() }
