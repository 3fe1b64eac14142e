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
	// unit is the receive's element size in bytes (Count's unit) times
	// two, plus one when the receive was withdrawn by Cancel
	// (MPI_Test_cancelled): one field for the two, so that a Status has
	// four, which the Go compiler keeps in registers; with five it is
	// memory, and every Status handed back through a call was stored
	// piecewise and reloaded whole, a store-forwarding stall at each level
	// (10% of an 8-byte Sendrecv exchange's samples on the 2-core VM).
	unit int
}

// unitOf is a Status's unit for elements of elem bytes, cancelled or not.
func unitOf(elem int, cancelled bool) int {
	if cancelled {
		return elem<<1 | 1
	}
	return elem << 1
}

// elem is the element size Count counts in.
func (s Status) elem() int { return s.unit >> 1 }

// emptyStatus is MPI's empty status, of a nil (MPI_REQUEST_NULL) or
// inactive request: no source, no tag, no bytes. (A zero Status would
// read as a message of rank 0 with tag 0.)
var emptyStatus = Status{Source: AnySource, Tag: AnyTag}

// Cancelled reports whether the request this status completed was a
// receive withdrawn by Cancel or WaitContext (MPI_Test_cancelled).
func (s Status) Cancelled() bool { return s.unit&1 != 0 }

// Bytes is the length of the message in bytes (for a truncated receive:
// the bytes stored).
func (s Status) Bytes() int { return s.bytes }

// Count is the number of elements received, in the element type of the
// receive's buffer, or Undefined when the bytes are not a whole number of
// them (as MPI_Get_count). After a probe, where no type is known, it is
// the byte count: use GetCount.
func (s Status) Count() int {
	if s.elem() <= 1 {
		return s.bytes
	}
	return wholeCount(s.bytes, s.elem())
}

// GetCount is the number of elements of T in the message, or Undefined
// when it is not a whole number of them (MPI_Get_count).
func GetCount[T Numeric](s Status) int { return wholeCount(s.bytes, elemSize[T]()) }

// wholeCount is n bytes in elements of size elem, Undefined for a part.
func wholeCount(n, elem int) int {
	if n%elem != 0 {
		return Undefined
	}
	return n / elem
}
