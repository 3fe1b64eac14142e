package p2p

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"unsafe"

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

	ctl  btl.Frame // RTS (send) or CTS (receive); FIN_S (single-copy send)
	data btl.Frame // EAGER or DATA (send); FIN_R (single-copy receive)

	// Single-copy rendezvous state: addr is the payload of our RTS/CTS (our
	// buffer's address); mine and theirs tell whether our part of the copy
	// and the peer's are done.
	single bool
	addr   [8]byte
	accept int
	mine   bool
	theirs bool

	// frames counts frames handed to a transport and not yet done; a
	// released request is recycled only once it is zero.
	frames int
	pooled bool
}

var requestPool = sync.Pool{New: func() any { return new(Request) }}

func newRequest(e *Engine) *Request {
	r := requestPool.Get().(*Request)
	initRequest(r, e)
	return r
}

func initRequest(r *Request, e *Engine) {
	r.e = e
	r.ctl.Owner, r.data.Owner = r, r
}

// reset clears r and puts it back in the pool; the engine lock is held.
func (r *Request) reset() {
	*r = Request{}
	requestPool.Put(r)
}

// setAddr stores the address of r.buf as the RTS/CTS payload.
func (r *Request) setAddr() {
	var a uintptr
	if len(r.buf) > 0 {
		a = uintptr(unsafe.Pointer(&r.buf[0]))
	}
	binary.LittleEndian.PutUint64(r.addr[:], uint64(a))
	r.ctl.Payload = r.addr[:]
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
	r.frames--
	if r.pooled {
		if r.frames == 0 {
			r.reset()
		}
		return
	}
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
