package mpi

import (
	"sync"

	"github.com/gorun/gorun/btl"
)

// Buffered and ready sends (MPI_Bsend, MPI_Ibsend, MPI_Rsend, MPI_Irsend,
// MPI_Buffer_attach, MPI_Buffer_detach).
//
// A buffered send copies its data into the buffer the process attached
// and returns at once; the copy is then sent like an Isend, and its space
// is taken back once delivered (checked at the next buffered send and at
// BufferDetach). Finalize waits for what is still in flight, as
// BufferDetach does. A ready send is a standard send here: MPI lets it
// assume the receive is posted, which saves nothing in gorun's protocols.

// BsendOverhead is the space each buffered send may take in the attached
// buffer beyond its data (MPI_BSEND_OVERHEAD): its alignment to 8 bytes.
// Size a buffer as the sum of each pending message's bytes plus this.
const BsendOverhead = 8

var bsend struct {
	mu   sync.Mutex
	buf  []byte
	segs []bsendSeg // the space of buffered sends in flight, by offset
}

type bsendSeg struct {
	off, n int
	q      *Request
}

// BufferAttach gives the process buf for buffered sends
// (MPI_Buffer_attach). One buffer at a time: attaching another before
// BufferDetach fails with ErrBuffer.
func BufferAttach(buf []byte) error {
	bsend.mu.Lock()
	defer bsend.mu.Unlock()
	if bsend.buf != nil {
		return errorf(ErrBuffer, "BufferAttach", "a buffer of %d bytes is attached already: detach it first", len(bsend.buf))
	}
	if buf == nil {
		buf = []byte{}
	}
	bsend.buf = buf
	return nil
}

// BufferDetach waits until every buffered send has left the attached
// buffer and returns it (MPI_Buffer_detach); the first error of those
// sends, if any, comes with it. Without an attached buffer it fails with
// ErrBuffer.
func BufferDetach() ([]byte, error) {
	bsend.mu.Lock()
	defer bsend.mu.Unlock()
	if bsend.buf == nil {
		return nil, errorf(ErrBuffer, "BufferDetach", "no buffer is attached")
	}
	err := drainBsend()
	b := bsend.buf
	bsend.buf = nil
	return b, err
}

// drainBsend waits for every buffered send in flight; bsend.mu is held.
func drainBsend() error {
	var first error
	for _, s := range bsend.segs {
		if _, err := s.q.Wait(); err != nil && first == nil {
			first = err
		}
	}
	bsend.segs = bsend.segs[:0]
	return first
}

// Bsend sends buf to rank dest of c with tag through the attached buffer
// (MPI_Bsend): it returns once buf is copied there. Without room for
// len(buf) elements (the buffer is missing, too small, or still holds
// undelivered sends) it fails with ErrBuffer and sends nothing.
func Bsend[T Numeric](c *Comm, buf []T, dest, tag int) error {
	_, err := bsendBytes("Bsend", c, elemBytes(buf), elemSize[T](), dest, tag)
	return c.fail(err)
}

// Ibsend is Bsend as a nonblocking call (MPI_Ibsend); its request is
// complete on return, since buf has been copied by then.
func Ibsend[T Numeric](c *Comm, buf []T, dest, tag int) (*Request, error) {
	if _, err := bsendBytes("Ibsend", c, elemBytes(buf), elemSize[T](), dest, tag); err != nil {
		return nil, c.fail(err)
	}
	return &Request{c: c, op: "Ibsend", fin: true}, nil
}

// Rsend is a ready-mode send (MPI_Rsend): the caller asserts that the
// matching receive is posted. gorun sends it as Send does (a small message
// goes out within the call).
func Rsend[T Numeric](c *Comm, buf []T, dest, tag int) error {
	return c.fail(send("Rsend", c, buf, dest, tag))
}

// Irsend is Rsend as a nonblocking call (MPI_Irsend), sent as Isend (a
// send that completes within the call returns the shared completed
// request, as Isend's do).
func Irsend[T Numeric](c *Comm, buf []T, dest, tag int) (*Request, error) {
	q, err := isendNow("Irsend", c, elemBytes(buf), elemSize[T](), dest, tag)
	return q, c.fail(err)
}

// bsendBytes copies b into the attached buffer and starts sending the
// copy.
func bsendBytes(op string, c *Comm, b []byte, elem, dest, tag int) (*Request, error) {
	if _, err := sendTo(op, c, dest, tag); err != nil || dest == ProcNull {
		return nil, err // ProcNull: nothing to buffer, done at once
	}
	bsend.mu.Lock()
	defer bsend.mu.Unlock()
	if bsend.buf == nil {
		return nil, errorf(ErrBuffer, op, "no buffer is attached (BufferAttach)")
	}
	// Take back the space of delivered sends.
	keep := bsend.segs[:0]
	for _, s := range bsend.segs {
		if ok, _, _ := s.q.Test(); !ok {
			keep = append(keep, s)
		}
	}
	clear(bsend.segs[len(keep):])
	bsend.segs = keep
	off, at := -1, 0
	prev := 0
	for i, s := range bsend.segs {
		if s.off-alignUp(prev) >= len(b) {
			off, at = alignUp(prev), i
			break
		}
		prev = s.off + s.n
	}
	if off < 0 && len(bsend.buf)-alignUp(prev) >= len(b) {
		off, at = alignUp(prev), len(bsend.segs)
	}
	if off < 0 {
		used := 0
		for _, s := range bsend.segs {
			used += s.n
		}
		return nil, errorf(ErrBuffer, op, "%d bytes do not fit in the attached buffer of %d bytes (%d bytes of %d buffered sends not yet delivered)", len(b), len(bsend.buf), used, len(bsend.segs))
	}
	region := bsend.buf[off : off+len(b) : off+len(b)]
	copy(region, b)
	q, err := isendMem(op, c, btl.HostMem(region), elem, dest, tag, false)
	if err != nil {
		return nil, err
	}
	bsend.segs = append(bsend.segs, bsendSeg{})
	copy(bsend.segs[at+1:], bsend.segs[at:])
	bsend.segs[at] = bsendSeg{off: off, n: len(b), q: q}
	return q, nil
}

func alignUp(n int) int { return (n + 7) &^ 7 }

// flushBsend waits for the buffered sends in flight (Finalize).
func flushBsend() error {
	bsend.mu.Lock()
	defer bsend.mu.Unlock()
	return drainBsend()
}
