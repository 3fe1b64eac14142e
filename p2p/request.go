package p2p

import (
	"sync/atomic"

	"github.com/gorun/gorun/btl"
)

// Status describes a completed receive or a probed message.
type Status struct {
	Source int // world rank of the sender
	Tag    int
	Bytes  int // bytes received (for a probe: the message's length)
}

// Request is one nonblocking operation. Its fields are owned by the engine;
// callers use Done, Wait and Test.
type Request struct {
	e    *Engine
	done atomic.Bool
	err  error
	st   Status

	recv bool
	ctx  uint32
	peer int // send: destination; recv: posted source (AnySource allowed)
	tag  int
	buf  []byte
	// trunc: the matched message is longer than buf.
	trunc bool
	// rndvPeer: for a rendezvous receive, the sender, once matched.
	rndvPeer int
	id       uint64

	ctl  btl.Frame // RTS (send) or CTS (receive)
	data btl.Frame // EAGER or DATA (send)
}

// Done reports whether the request has completed, without progressing.
func (r *Request) Done() bool { return r.done.Load() }

// complete records the outcome; the engine lock is held.
func (r *Request) complete(err error) {
	if r.done.Load() {
		return
	}
	if err == nil && r.trunc {
		err = ErrTruncate
	}
	r.err = err
	r.done.Store(true)
	r.buf = nil
}

// FrameDone implements btl.Completer.
func (r *Request) FrameDone(f *btl.Frame, err error) {
	f.Payload = nil
	if err != nil {
		r.e.forget(r)
		r.complete(err)
		return
	}
	if f == &r.data && !r.recv {
		r.complete(nil)
	}
}

// Result returns the status and error of a completed request.
func (r *Request) Result() (Status, error) { return r.st, r.err }
