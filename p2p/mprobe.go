package p2p

import (
	"errors"
	"fmt"

	"github.com/gorun/gorun/btl"
)

// Matched probe (MPI_Mprobe, MPI_Mrecv). Improbe takes a matching
// unexpected message out of the queue, so that no other receive or probe
// sees it, and hands it back as a Message; MrecvInto later receives it as
// a receive posted at that moment would have taken it. A message still
// arriving (eager, not yet complete) or an RTS works the same: take
// finishes what the arrival began. A Message nobody receives keeps its
// eager bytes or leaves its sender's rendezvous waiting, as in MPI.

// Message is an arrived message matched by Improbe and owned by its
// caller until MrecvInto receives it.
type Message struct {
	u  *unexpected
	st Status
}

// Status describes the message: its source, tag and length.
func (m *Message) Status() Status { return m.st }

// ErrMessageUsed: MrecvInto was given a Message already received.
var ErrMessageUsed = errors.New("message already received (a Message is received once)")

// Improbe takes the first arrived message matching (ctx, src, tag) out of
// matching and returns it, or nil when none has arrived.
func (e *Engine) Improbe(ctx uint32, src, tag int) (*Message, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	q, i, err := e.probe(ctx, src, tag)
	if i < 0 {
		return nil, err
	}
	u := q.unexp.items()[i]
	q.unexp.remove(i)
	return &Message{u: u, st: Status{Source: u.src, Tag: u.tag, Bytes: u.length}}, nil
}

// Mprobe blocks until a message matching (ctx, src, tag) has arrived and
// takes it, as Improbe does.
func (e *Engine) Mprobe(ctx uint32, src, tag int) (*Message, error) {
	w := waiter{e: e}
	for {
		m, err := e.Improbe(ctx, src, tag)
		if m != nil || err != nil {
			return m, err
		}
		w.idle()
	}
}

// MrecvInto receives the message m into mem with the request r (a zero
// Request, as for IrecvInto, or one from the pool). It fails at once when
// m was received already.
func (e *Engine) MrecvInto(r *Request, m *Message, mem btl.Mem) error {
	if r.e == nil {
		initRequest(r, e)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	u := m.u
	if u == nil {
		return ErrMessageUsed
	}
	m.u = nil
	r.recv, r.ctx, r.peer, r.tag, r.mem = true, u.ctx, u.src, u.tag, mem
	if err := e.failed[u.src]; err != nil && !u.complete {
		// Its sender died while the payload was arriving: the rest
		// will never come (PeerFailed forgot the arrival).
		r.st = m.st
		r.complete(fmt.Errorf("receive from rank %d: %w", u.src, err))
		return nil
	}
	e.take(r, u)
	return nil
}

// Mrecv is MrecvInto with a request from the pool.
func (e *Engine) Mrecv(m *Message, mem btl.Mem) (*Request, error) {
	e.mu.Lock()
	r := e.newRequest()
	e.mu.Unlock()
	if err := e.MrecvInto(r, m, mem); err != nil {
		return nil, err
	}
	return r, nil
}
