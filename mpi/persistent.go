package mpi

import (
	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/p2p"
)

// Persistent requests (MPI_Send_init, MPI_Recv_init, MPI_Start). A
// persistent request describes an operation once (buffer, peer, tag,
// communicator, all checked then) and runs it again at every Start; Wait
// and the other completion calls end one run and leave the request
// inactive, ready for the next Start, and Waitany and its kin keep it in
// the slice instead of setting it to nil. An inactive request counts as
// complete: Wait returns its last status at once. Free releases it.
//
// Each run is a point-to-point operation like Isend or Irecv: the buffer
// belongs to the run until it completes, and a receive of a run can be
// cancelled. There is no saving below package mpi yet (the engine matches
// and chooses the protocol per run, as it does for Isend): what a program
// gains today is the MPI shape, checked arguments and one allocation for
// all its runs' bookkeeping but the engine's request.

// persistent is what a persistent request runs at each Start.
type persistent struct {
	send, sync bool
	mem        btl.Mem
	peer, tag  int
	active     bool // started, and its completion not yet reported
	freed      bool
	// coll: a persistent collective (pcoll.go), which runs instead.
	coll *pcoll
}

func initReq(op string, c *Comm, m btl.Mem, elem, peer, tag int, send, sync bool) (*Request, error) {
	if err := c.check(op); err != nil {
		return nil, err
	}
	if peer != ProcNull {
		if _, err := c.peerRank(op, peer, !send); err != nil {
			return nil, err
		}
	}
	if err := checkTag(op, tag, !send); err != nil {
		return nil, err
	}
	q := &Request{c: c, op: op, elem: elem, recv: !send, fin: true,
		pers: &persistent{send: send, sync: sync, mem: m, peer: peer, tag: tag}}
	return q, nil
}

// SendInit makes a persistent request that sends buf to rank dest of c
// with tag at each Start (MPI_Send_init). buf is read at each run.
func SendInit[T Numeric](c *Comm, buf []T, dest, tag int) (*Request, error) {
	return initReq("SendInit", c, btl.HostMem(elemBytes(buf)), 1, dest, tag, true, false)
}

// SsendInit is SendInit of synchronous sends (MPI_Ssend_init).
func SsendInit[T Numeric](c *Comm, buf []T, dest, tag int) (*Request, error) {
	return initReq("SsendInit", c, btl.HostMem(elemBytes(buf)), 1, dest, tag, true, true)
}

// RecvInit makes a persistent request that receives into buf from rank
// source of c (or AnySource) with tag (or AnyTag) at each Start
// (MPI_Recv_init).
func RecvInit[T Numeric](c *Comm, buf []T, source, tag int) (*Request, error) {
	return initReq("RecvInit", c, btl.HostMem(elemBytes(buf)), elemSize[T](), source, tag, false, false)
}

// Start starts a run of the persistent request q (MPI_Start). It fails
// with ErrRequest when q is not persistent, was freed, or is active (its
// last run's completion not yet reported).
func (q *Request) Start() (err error) {
	defer q.failTo(&err)
	const op = "Request.Start"
	if q == nil || q.pers == nil {
		return errorf(ErrRequest, op, "not a persistent request (SendInit, SsendInit, RecvInit and the collectives' Init forms make one)")
	}
	p := q.pers
	if p.freed {
		return errorf(ErrRequest, op, "%s request was freed", q.op)
	}
	if p.active {
		return errorf(ErrRequest, op, "%s request is active: complete its run (Wait, Test, ...) before starting it again", q.op)
	}
	if p.coll != nil {
		// The last run's notice receive belongs to its call, not to the
		// engine's free list.
		q.r = nil
		return q.startColl()
	}
	if q.r != nil {
		q.c.rt.eng.Release(q.r)
		q.r = nil
	}
	var r *p2p.Request
	if p.send {
		r, err = startSend(q.op, q.c, p.mem, p.peer, p.tag, p.sync, nil)
	} else {
		r, err = startRecv(q.op, q.c, p.mem, p.peer, p.tag, nil)
	}
	if err != nil {
		return err
	}
	q.fin, q.st, q.err = false, Status{}, nil
	p.active = true
	q.startedOwn(r)
	return nil
}

// Startall starts every request of reqs (MPI_Startall), nil entries
// skipped. It stops at the first that fails and returns its error; the
// requests before it have started.
func Startall(reqs []*Request) error {
	for _, q := range reqs {
		if q == nil {
			continue
		}
		if err := q.Start(); err != nil {
			return err
		}
	}
	return nil
}

// Free releases the request (MPI_Request_free). A persistent request must
// be inactive: Free of an active one fails with ErrRequest. A request
// that is not persistent may be freed while it runs: the operation goes
// on, and its outcome is not reported (the buffer still belongs to it
// until it ends, which the program must learn otherwise, as in MPI).
func (q *Request) Free() (err error) {
	defer q.failTo(&err)
	if q == nil {
		return errorf(ErrRequest, "Request.Free", "nil request")
	}
	p := q.pers
	if p == nil {
		return nil
	}
	if p.active {
		return errorf(ErrRequest, "Request.Free", "%s request is active: complete its run first", q.op)
	}
	if p.freed {
		return errorf(ErrRequest, "Request.Free", "%s request was freed already", q.op)
	}
	p.freed = true
	if q.r != nil && p.coll == nil {
		q.c.rt.eng.Release(q.r)
		q.r = nil
	}
	return nil
}
