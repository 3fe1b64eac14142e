package mpi

import (
	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/p2p"
)

// Message is a message matched by Mprobe or Improbe (MPI_Message): it is
// out of matching, so that no other probe or receive sees it, and only
// Mrecv or Imrecv receive it, once. This is what makes "probe for the
// size, then receive" safe when several goroutines receive from AnySource
// on one communicator: with Probe and Recv, two goroutines may probe the
// same message and one of them then receive another.
type Message struct {
	c  *Comm
	m  *p2p.Message // nil for a message from ProcNull (MPI_MESSAGE_NO_PROC)
	st Status
}

// Status describes the message; Count is in bytes (use GetCount).
func (m *Message) Status() Status { return m.st }

// Mprobe blocks until a message from source (or AnySource) with tag (or
// AnyTag) has arrived and takes it out of matching. With ProcNull it
// returns at once a message from ProcNull whose receive moves nothing.
func Mprobe(c *Comm, source, tag int) (_ *Message, _ Status, err error) {
	defer c.failTo(&err)
	w, err := probeArgs("Mprobe", c, source, tag)
	if err != nil || source == ProcNull {
		return procNullMessage(c, err)
	}
	pm, err := c.rt.eng.Mprobe(c.ctx, w, tag)
	if err != nil {
		return nil, Status{}, wrap("Mprobe", err)
	}
	return c.message(pm)
}

// Improbe is Mprobe that does not block: it returns a nil Message when no
// matching message has arrived.
func Improbe(c *Comm, source, tag int) (_ *Message, _ Status, err error) {
	defer c.failTo(&err)
	w, err := probeArgs("Improbe", c, source, tag)
	if err != nil || source == ProcNull {
		return procNullMessage(c, err)
	}
	pm, err := c.rt.eng.Improbe(c.ctx, w, tag)
	if err != nil || pm == nil {
		c.rt.eng.GiveWay() // as Iprobe does
		return nil, Status{}, wrap("Improbe", err)
	}
	return c.message(pm)
}

func probeArgs(op string, c *Comm, source, tag int) (int, error) {
	if err := c.check(op); err != nil {
		return 0, err
	}
	if err := checkTag(op, tag, true); err != nil {
		return 0, err
	}
	if source == ProcNull {
		return ProcNull, nil
	}
	return c.peerRank(op, source, true)
}

func procNullMessage(c *Comm, err error) (*Message, Status, error) {
	if err != nil {
		return nil, Status{}, err
	}
	st := Status{Source: ProcNull, Tag: AnyTag}
	return &Message{c: c, st: st}, st, nil
}

func (c *Comm) message(pm *p2p.Message) (*Message, Status, error) {
	st := c.status(pm.Status())
	return &Message{c: c, m: pm, st: st}, st, nil
}

// Mrecv receives the message m into buf. A message longer than buf fills
// buf and fails with ErrTruncate; a Message already received fails with
// ErrRequest.
func Mrecv[T Numeric](buf []T, m *Message) (Status, error) {
	q, err := imrecv("Mrecv", btl.HostMem(elemBytes(buf)), elemSize[T](), m)
	if err != nil {
		return Status{}, err
	}
	return q.Wait()
}

// Imrecv starts receiving the message m into buf; buf belongs to the
// request until it completes.
func Imrecv[T Numeric](buf []T, m *Message) (*Request, error) {
	return imrecv("Imrecv", btl.HostMem(elemBytes(buf)), elemSize[T](), m)
}

// imrecv starts receiving m; its errors go through the handler of m's
// communicator.
func imrecv(op string, mem btl.Mem, elem int, m *Message) (_ *Request, err error) {
	if m == nil {
		return nil, errorf(ErrRequest, op, "nil message (Improbe found none?)")
	}
	c := m.c
	defer c.failTo(&err)
	if err := c.check(op); err != nil {
		return nil, err
	}
	q := &Request{c: c, op: op, elem: elem, recv: true}
	if m.m == nil {
		return q.started(nil), nil
	}
	r, err := c.rt.eng.Mrecv(m.m, mem)
	if err != nil {
		if err == p2p.ErrMessageUsed {
			return nil, errorf(ErrRequest, op, "%w", err)
		}
		return nil, wrap(op, err)
	}
	return q.startedOwn(r), nil
}
