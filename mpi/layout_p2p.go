package mpi

import (
	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/coll"
)

// Point-to-point with layouts (MPI's calls with a derived datatype).
//
// A message carries the elements a layout selects, in the layout's order;
// the receiver's layout says where they go, so that the two sides'
// layouts need only select the same number of elements (MPI's type
// signatures), not the same places: a column sent with Vector may be
// received into a contiguous slice, and the other way round. A receive
// whose message is shorter fills the first elements of its layout; a
// longer one fills the layout and fails with ErrTruncate. Status.Count
// counts elements of the slice's type. layout_pack.go says when the data
// is copied.

// SendLayout sends the elements of buf that l selects to rank dest of c
// with tag (MPI_Send with a derived datatype), and returns once buf may
// be reused. A layout that is invalid or reaches outside buf fails with
// ErrArg.
func SendLayout[T Numeric](c *Comm, buf []T, l Layout, dest, tag int) error {
	return c.fail(sendLayout("SendLayout", c, buf, l, dest, tag, false))
}

// SsendLayout is SendLayout that returns only once the receive has
// matched (MPI_Ssend).
func SsendLayout[T Numeric](c *Comm, buf []T, l Layout, dest, tag int) error {
	return c.fail(sendLayout("SsendLayout", c, buf, l, dest, tag, true))
}

func sendLayout[T Numeric](op string, c *Comm, buf []T, l Layout, dest, tag int, sync bool) error {
	w, err := wireFor(op, buf, l, dest, true)
	if err != nil {
		return err
	}
	defer w.release()
	r, err := startSend(op, c, btl.HostMem(w.b), dest, tag, sync, nil)
	if err != nil {
		return err
	}
	_, err = finishRaw(op, c, r, 1)
	return err
}

// RecvLayout receives from rank source of c (or AnySource) with tag (or
// AnyTag) into the elements of buf that l selects, in l's order
// (MPI_Recv with a derived datatype).
func RecvLayout[T Numeric](c *Comm, buf []T, l Layout, source, tag int) (Status, error) {
	const op = "RecvLayout"
	w, err := wireFor(op, buf, l, source, false)
	if err != nil {
		return Status{}, c.fail(err)
	}
	defer w.release()
	r, err := startRecv(op, c, btl.HostMem(w.b), source, tag, nil)
	if err != nil {
		return Status{}, c.fail(err)
	}
	es := elemSize[T]()
	st, err := finishRaw(op, c, r, es)
	w.unpackTo(elemBytes(buf), l, es, st.bytes, err)
	return st, c.fail(err)
}

// IsendLayout starts sending the elements of buf that l selects. A
// layout that is not one run is packed before the call returns, so buf
// may be changed at once; a contiguous one is sent from buf, which must
// then stay untouched until the request completes, as for Isend.
func IsendLayout[T Numeric](c *Comm, buf []T, l Layout, dest, tag int) (*Request, error) {
	const op = "IsendLayout"
	w, err := wireFor(op, buf, l, dest, true)
	if err != nil {
		return nil, c.fail(err)
	}
	q, err := isendMem(op, c, btl.HostMem(w.b), elemSize[T](), dest, tag, false)
	if err != nil {
		w.release()
		return nil, c.fail(err)
	}
	if w.own != nil {
		q.post = func(_ Status, err error) error {
			w.release()
			return err
		}
	}
	return q, nil
}

// IrecvLayout starts receiving into the elements of buf that l selects.
// The elements are stored when the request's completion is reported
// (Wait, Test, Waitall...): until then buf must stay untouched.
func IrecvLayout[T Numeric](c *Comm, buf []T, l Layout, source, tag int) (*Request, error) {
	const op = "IrecvLayout"
	w, err := wireFor(op, buf, l, source, false)
	if err != nil {
		return nil, c.fail(err)
	}
	es := elemSize[T]()
	q, err := irecvMem(op, c, btl.HostMem(w.b), es, source, tag)
	if err != nil {
		w.release()
		return nil, c.fail(err)
	}
	if w.own != nil {
		q.post = func(st Status, err error) error {
			w.unpackTo(elemBytes(buf), l, es, st.bytes, err)
			w.release()
			return err
		}
	}
	return q, nil
}

// SendrecvLayout sends the elements of sendbuf that sl selects to dest
// and receives into the elements of recvbuf that rl selects from source
// at once (MPI_Sendrecv with derived datatypes). The two may share
// memory: what is sent is read before anything is stored.
func SendrecvLayout[S, R Numeric](c *Comm, sendbuf []S, sl Layout, dest, sendtag int, recvbuf []R, rl Layout, source, recvtag int) (Status, error) {
	st, err := sendrecvLayout(c, sendbuf, sl, dest, sendtag, recvbuf, rl, source, recvtag)
	return st, c.fail(err)
}

func sendrecvLayout[S, R Numeric](c *Comm, sendbuf []S, sl Layout, dest, sendtag int, recvbuf []R, rl Layout, source, recvtag int) (Status, error) {
	const op = "SendrecvLayout"
	if err := checkSendrecv(op, c, dest, sendtag); err != nil {
		return Status{}, err
	}
	out, err := wireFor(op, sendbuf, sl, dest, true)
	if err != nil {
		return Status{}, err
	}
	defer out.release()
	in, err := wireFor(op, recvbuf, rl, source, false)
	if err != nil {
		return Status{}, err
	}
	defer in.release()
	if out.own == nil && in.own == nil && aliasing(out.b, in.b) != disjoint {
		// Both sides in place over shared memory: send a copy, as
		// SendrecvReplace does.
		p := coll.Scratch(len(out.b))
		copy(*p, out.b)
		out = wire{b: *p, own: p}
		defer out.release()
	}
	es := elemSize[R]()
	st, err := sendrecvMem(op, c, btl.HostMem(in.b), es, source, recvtag, btl.HostMem(out.b), dest, sendtag)
	in.unpackTo(elemBytes(recvbuf), rl, es, st.bytes, err)
	return st, err
}
