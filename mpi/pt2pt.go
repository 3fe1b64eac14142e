package mpi

import (
	"bytes"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/p2p"
)

func checkTag(op string, tag int, allowAny bool) error {
	if allowAny && tag == AnyTag {
		return nil
	}
	if tag < 0 || tag > TagUB {
		return errorf(ErrTag, op, "tag %d is outside 0..%d", tag, TagUB)
	}
	return nil
}

// fastPeer returns the world rank of rank r of c for a point-to-point
// operation with tag when nothing needs more checking than its test (a
// live intracommunicator in good standing, a rank of it, a tag of 0..TagUB):
// inlined, it spares the common case the calls down through the checks
// (sendTo's, startRecv's), a tenth of a sender's post at the 8-byte
// message rate.
func (c *Comm) fastPeer(r, tag int) (int, bool) {
	if c.good() && uint(tag) <= TagUB && c.inter == nil && uint(r) < uint(len(c.world)) {
		return c.world[r], true
	}
	return 0, false
}

// startSend validates a send and starts it; it returns a nil request for
// ProcNull.
func startSend(op string, c *Comm, m btl.Mem, dest, tag int, sync bool, into *p2p.Request) (*p2p.Request, error) {
	w, err := sendTo(op, c, dest, tag)
	if err != nil || dest == ProcNull {
		return nil, err
	}
	if into != nil {
		if err := c.rt.eng.IsendInto(into, c.ctx, w, tag, m, sync); err != nil {
			return nil, wrap(op, err)
		}
		return into, nil
	}
	r, err := c.rt.eng.IsendMem(c.ctx, w, tag, m, sync)
	if err != nil {
		return nil, wrap(op, err)
	}
	return r, nil
}

// sendTo validates a send to dest with tag and returns dest's world rank
// (anything for ProcNull).
func sendTo(op string, c *Comm, dest, tag int) (int, error) {
	if w, ok := c.fastPeer(dest, tag); ok {
		return w, nil
	}
	if err := c.check(op); err != nil {
		return 0, err
	}
	// The tag is checked for ProcNull too, as Open MPI does.
	if err := checkTag(op, tag, false); err != nil || dest == ProcNull {
		return 0, err
	}
	return c.peerRank(op, dest, false)
}

// startRecv validates a receive and posts it; it returns a nil request for
// ProcNull.
func startRecv(op string, c *Comm, m btl.Mem, source, tag int, into *p2p.Request) (*p2p.Request, error) {
	if into == nil && m.Kind == btl.MemHost {
		return startRecvBytes(op, c, m.Bytes, source, tag)
	}
	w, err := recvFrom(op, c, source, tag)
	if err != nil || w == ProcNull {
		return nil, err
	}
	if into != nil {
		if err := c.rt.eng.IrecvInto(into, c.ctx, w, tag, m); err != nil {
			return nil, wrap(op, err)
		}
		return into, nil
	}
	r, err := c.rt.eng.IrecvMem(c.ctx, w, tag, m)
	if err != nil {
		return nil, wrap(op, err)
	}
	return r, nil
}

// startRecvBytes is startRecv into host bytes through the engine's Irecv,
// which takes them without a btl.Mem (seven words: past the registers of
// these calls, so each layer that passes one on copies it through the
// stack; the message rate's receive path).
func startRecvBytes(op string, c *Comm, b []byte, source, tag int) (*p2p.Request, error) {
	w, err := recvFrom(op, c, source, tag)
	if err != nil || w == ProcNull {
		return nil, err
	}
	r, err := c.rt.eng.Irecv(c.ctx, w, tag, b)
	if err != nil {
		return nil, wrap(op, err)
	}
	return r, nil
}

// recvFrom validates a receive from source with tag and returns the
// source's world rank, AnySource, or ProcNull (nothing to post): the
// inline fast check, else Mprobe's (probeArgs).
func recvFrom(op string, c *Comm, source, tag int) (int, error) {
	if w, ok := c.fastPeer(source, tag); ok {
		return w, nil
	}
	return probeArgs(op, c, source, tag)
}

// finishRaw waits for a request a blocking call owns, recycles it and
// returns its outcome in the communicator's terms.
func finishRaw(op string, c *Comm, r *p2p.Request, elem int) (Status, error) {
	if r == nil {
		return Status{Source: ProcNull, Tag: AnyTag}, nil
	}
	ps, err := r.WaitRelease()
	return c.statusOf(ps, elem), wrap(op, err)
}

// isendMem and irecvMem start the operation with a request of the
// engine's free list, which the public request holds until its
// completion is reported (request.go); elem is the size of the buffer's
// elements.
func isendMem(op string, c *Comm, m btl.Mem, elem, dest, tag int, sync bool) (*Request, error) {
	r, err := startSend(op, c, m, dest, tag, sync, nil)
	if err != nil {
		return nil, err
	}
	return ownRequest(c, op, elem, r), nil
}

func irecvMem(op string, c *Comm, m btl.Mem, elem, source, tag int) (*Request, error) {
	r, err := startRecv(op, c, m, source, tag, nil)
	if err != nil {
		return nil, err
	}
	return ownRecv(c, op, elem, r), nil
}

// ownRecv is ownRequest for a receive (which Cancel may withdraw).
func ownRecv(c *Comm, op string, elem int, r *p2p.Request) *Request {
	q := ownRequest(c, op, elem, r)
	q.recv = true
	return q
}

func isend[T Numeric](op string, c *Comm, buf []T, dest, tag int, sync bool) (*Request, error) {
	return isendMem(op, c, btl.HostMem(elemBytes(buf)), elemSize[T](), dest, tag, sync)
}

// irecvBytes is irecvMem of host bytes, posted by startRecvBytes.
func irecvBytes(op string, c *Comm, b []byte, elem, source, tag int) (*Request, error) {
	r, err := startRecvBytes(op, c, b, source, tag)
	if err != nil {
		return nil, err
	}
	return ownRecv(c, op, elem, r), nil
}

// Isend starts sending buf to rank dest of c with tag. buf must stay
// untouched until the request completes. A send that completes within
// the call (a small message the transport took at once) returns the
// communicator's one completed send request, shared by all such sends:
// Wait, Test and Free on it return at once, and nothing tells it apart
// from a request of its own but its address. Every point-to-point call
// accepts ProcNull as a peer: the operation completes at once and moves
// nothing.
func Isend[T Numeric](c *Comm, buf []T, dest, tag int) (*Request, error) {
	q, err := isendNow("Isend", c, elemBytes(buf), elemSize[T](), dest, tag)
	return q, c.fail(err)
}

// isendNow is the start of Isend (and Irsend, op): a send that completes
// within the call (an eager message the transport took at once) gets the
// communicator's one completed send request (sent) instead of a request of
// its own.
func isendNow(op string, c *Comm, b []byte, elem, dest, tag int) (*Request, error) {
	r, err := startSendNow(op, c, b, dest, tag)
	switch {
	case err != nil:
		return nil, err
	case dest == ProcNull:
		return ownRequest(c, op, elem, nil), nil
	case r == nil:
		return c.sentReq(), nil
	}
	return ownRequest(c, op, elem, r), nil
}

// startSendNow validates a send of host bytes and starts it by IsendNow:
// a nil request for ProcNull and for a send that completed within the
// call.
func startSendNow(op string, c *Comm, b []byte, dest, tag int) (*p2p.Request, error) {
	w, err := sendTo(op, c, dest, tag)
	if err != nil || dest == ProcNull {
		return nil, err
	}
	r, err := c.rt.eng.IsendNow(c.ctx, w, tag, b)
	if err != nil {
		return nil, wrap(op, err)
	}
	return r, nil
}

// sentReq returns c's completed send request: what Isend returns for every
// send that completed within the call. It is shared (no allocation, no
// report or release at completion: a third of a sender's time at the
// 8-byte message rate), which a caller can tell only by its address (two
// such sends return the same pointer, as Isend's doc says): a completed
// send's Wait, Test and Free do nothing, its status says nothing, and
// Cancel refuses any send. The program must not set anything on it, and
// package mpi never does (IsendLayout, the object API and Bsend keep
// requests of their own).
func (c *Comm) sentReq() *Request {
	if q := c.sent.Load(); q != nil {
		return q
	}
	q := &Request{c: c, op: "Isend", fin: true, st: Status{Source: c.fromWorld(0), unit: unitOf(1, false)}}
	if c.sent.CompareAndSwap(nil, q) {
		return q
	}
	return c.sent.Load()
}

// Issend is Isend that completes only once the receive has matched.
func Issend[T Numeric](c *Comm, buf []T, dest, tag int) (*Request, error) {
	q, err := isend("Issend", c, buf, dest, tag, true)
	return q, c.fail(err)
}

// Irecv starts receiving into buf from rank source of c (or AnySource) with
// tag (or AnyTag).
func Irecv[T Numeric](c *Comm, buf []T, source, tag int) (*Request, error) {
	q, err := irecvBytes("Irecv", c, elemBytes(buf), elemSize[T](), source, tag)
	return q, c.fail(err)
}

// Send sends buf to rank dest of c with tag and returns once buf may be
// reused.
func Send[T Numeric](c *Comm, buf []T, dest, tag int) error {
	return c.fail(send("Send", c, buf, dest, tag))
}

// send is the body of Send and Rsend (op): a message the transport takes
// at once (IsendNow) needs no request; any other is waited for.
func send[T Numeric](op string, c *Comm, buf []T, dest, tag int) error {
	r, err := startSendNow(op, c, elemBytes(buf), dest, tag)
	if err != nil {
		return err
	}
	_, err = finishRaw(op, c, r, 1)
	return err
}

// Ssend sends synchronously: it returns once the receive has matched.
func Ssend[T Numeric](c *Comm, buf []T, dest, tag int) error {
	return c.fail(ssend(c, buf, dest, tag))
}

func ssend[T Numeric](c *Comm, buf []T, dest, tag int) error {
	r, err := startSend("Ssend", c, btl.HostMem(elemBytes(buf)), dest, tag, true, nil)
	if err != nil {
		return err
	}
	_, err = finishRaw("Ssend", c, r, 1)
	return err
}

// Recv receives into buf from rank source of c (or AnySource) with tag (or
// AnyTag). A message longer than buf fills buf and fails with ErrTruncate.
func Recv[T Numeric](c *Comm, buf []T, source, tag int) (Status, error) {
	st, err := recv(c, buf, source, tag)
	return st, c.fail(err)
}

// recv posts and waits under the engine's RecvMem: one lock fewer than
// startRecv and finishRaw.
func recv[T Numeric](c *Comm, buf []T, source, tag int) (Status, error) {
	w, err := recvFrom("Recv", c, source, tag)
	if err != nil {
		return Status{}, err
	}
	if w == ProcNull {
		return finishRaw("Recv", c, nil, 0)
	}
	ps, err := c.rt.eng.RecvMem(c.ctx, w, tag, btl.HostMem(elemBytes(buf)))
	if err != nil && ps == (p2p.Status{}) {
		return Status{}, wrap("Recv", err) // nothing matched: no status, as a failed post gave
	}
	return c.statusOf(ps, elemSize[T]()), wrap("Recv", err)
}

// Sendrecv sends sendbuf to dest and receives into recvbuf from source at
// once, so that exchanges in a ring cannot deadlock. Buffers that overlap
// (which MPI calls erroneous) work as SendrecvReplace: what is sent is
// sendbuf as it was at the call.
func Sendrecv[S, R Numeric](c *Comm, sendbuf []S, dest, sendtag int, recvbuf []R, source, recvtag int) (Status, error) {
	st, err := sendrecv("Sendrecv", c, sendbuf, dest, sendtag, recvbuf, source, recvtag)
	return st, c.fail(err)
}

// sendrecv is Sendrecv's body, named op in its errors (Sendrecv,
// SendrecvReplace).
func sendrecv[S, R Numeric](op string, c *Comm, sendbuf []S, dest, sendtag int, recvbuf []R, source, recvtag int) (Status, error) {
	if err := checkSendrecv(op, c, dest, sendtag); err != nil {
		return Status{}, err
	}
	send := elemBytes(sendbuf)
	if dest != ProcNull && aliasing(send, elemBytes(recvbuf)) != disjoint {
		// The receive, posted first, would overwrite what is still to be
		// sent: MPI calls overlapping buffers erroneous, programs pass
		// them anyway (one buffer for both), and Open MPI's result then
		// depends on the message's size. Send a copy, as SendrecvReplace
		// does.
		send = bytes.Clone(send)
	}
	return sendrecvMem(op, c, btl.HostMem(elemBytes(recvbuf)), elemSize[R](), source, recvtag, btl.HostMem(send), dest, sendtag)
}

// checkSendrecv validates the send of a Sendrecv before its receive is
// posted: once the receive is posted, a failing send could only leave it
// behind.
func checkSendrecv(op string, c *Comm, dest, sendtag int) error {
	_, err := sendTo(op, c, dest, sendtag)
	return err
}

// sendrecvMem runs a Sendrecv whose send arguments are checked: the receive
// is posted first, then the send. When the send cannot start (its peer
// failed, say), the receive is withdrawn, or waited for if a message has
// matched it already, so that nothing of the failed call stays behind to
// take a later message into recv.
func sendrecvMem(op string, c *Comm, recv btl.Mem, relem, source, recvtag int, send btl.Mem, dest, sendtag int) (Status, error) {
	rr, err := startRecv(op, c, recv, source, recvtag, nil)
	if err != nil {
		return Status{}, err
	}
	var sr *p2p.Request
	if send.Kind == btl.MemHost {
		// A send the transport takes at once needs no request (nil).
		sr, err = startSendNow(op, c, send.Bytes, dest, sendtag)
	} else {
		sr, err = startSend(op, c, send, dest, sendtag, false, nil)
	}
	if err != nil {
		if rr != nil {
			c.rt.eng.CancelRecv(rr)
			finishRaw(op, c, rr, relem)
		}
		return Status{}, err
	}
	st, rerr := finishRaw(op, c, rr, relem)
	_, serr := finishRaw(op, c, sr, 1)
	if rerr != nil {
		return st, rerr
	}
	return st, serr
}

// Iprobe reports whether a message from source (or AnySource) with tag (or
// AnyTag) is waiting to be received, and its status, without receiving it.
// A probe of ProcNull finds an empty message from ProcNull at once.
func Iprobe(c *Comm, source, tag int) (bool, Status, error) {
	ok, st, err := iprobe(c, source, tag)
	return ok, st, c.fail(err)
}

func iprobe(c *Comm, source, tag int) (bool, Status, error) {
	if err := c.check("Iprobe"); err != nil {
		return false, Status{}, err
	}
	if err := checkTag("Iprobe", tag, true); err != nil {
		return false, Status{}, err
	}
	if source == ProcNull {
		return true, Status{Source: ProcNull, Tag: AnyTag}, nil
	}
	w, err := c.peerRank("Iprobe", source, true)
	if err != nil {
		return false, Status{}, err
	}
	ok, ps, err := c.rt.eng.Iprobe(c.ctx, w, tag)
	if err != nil || !ok {
		// A program may poll with Iprobe alone: its nonblocking calls
		// begin and run here too, as in a wait (p2p's GiveWay).
		c.rt.eng.GiveWay()
		return false, Status{}, wrap("Iprobe", err)
	}
	return true, c.status(ps), nil
}

// Probe blocks until a message from source (or AnySource) with tag (or
// AnyTag) is waiting, and returns its status without receiving it. A
// probe of ProcNull returns at once, as Iprobe does.
func Probe(c *Comm, source, tag int) (Status, error) {
	st, err := probe(c, source, tag)
	return st, c.fail(err)
}

func probe(c *Comm, source, tag int) (Status, error) {
	if err := c.check("Probe"); err != nil {
		return Status{}, err
	}
	if err := checkTag("Probe", tag, true); err != nil {
		return Status{}, err
	}
	if source == ProcNull {
		return Status{Source: ProcNull, Tag: AnyTag}, nil
	}
	w, err := c.peerRank("Probe", source, true)
	if err != nil {
		return Status{}, err
	}
	ps, err := c.rt.eng.Probe(c.ctx, w, tag)
	if err != nil {
		return Status{}, wrap("Probe", err)
	}
	return c.status(ps), nil
}

// status is the engine's status ps in c's terms, for a probe (no element
// type: counts in bytes).
func (c *Comm) status(ps p2p.Status) Status { return c.statusOf(ps, 1) }

// statusOf is the engine's status ps in c's terms, for a receive into
// elements of elem bytes.
func (c *Comm) statusOf(ps p2p.Status, elem int) Status {
	return Status{Source: c.fromWorld(ps.Source), Tag: ps.Tag, bytes: ps.Bytes, unit: unitOf(elem, false)}
}
