package p2p

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/internal/relstore"
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
	done doneFlag
	err  error
	st   Status

	recv bool
	ctx  uint32
	peer int // send: destination; recv: posted source (AnySource allowed)
	tag  int
	// mem is the user's buffer: host bytes (mem.Bytes, the hot path) or
	// device memory.
	mem btl.Mem
	// trunc: the matched message's length, when it is longer than the
	// buffer (0: it is not).
	trunc int
	// rndvPeer: for a rendezvous receive, the sender, once matched.
	rndvPeer int
	id       uint64

	ctl  btl.Frame // RTS (send) or CTS (receive); FIN_S (RMA send)
	data btl.Frame // EAGER or DATA (send); FIN_R (RMA receive)

	// x is the state of an RMA rendezvous (rma.go), nil otherwise: kept
	// out of the request so that eager messages carry none of it.
	x *rndv
	// sg is the state of a staged transfer of device memory (stage.go);
	// got counts the bytes of DATA frames a host receive has taken.
	sg  *staged
	got int
	// devErr: a device buffer met a route that can neither reach nor
	// stage it, or its eager copy to host memory failed; the request fails
	// with it.
	devErr error
	// bounce is the host copy of an eager staged send's device memory,
	// in flight as its EAGER frame's payload until FrameDone (stage.go).
	bounce []byte

	// frames counts frames and RMA operations handed to a transport and not
	// yet done; a released request is recycled only once it is zero.
	frames int
	pooled bool

	// kept is what the request's owner left with it for its next owner
	// (Keep, TakeKept): package mpi's public request, which then comes
	// back with it from the free list. reset leaves it.
	kept any
}

// maxFree bounds the engine's list of released requests: a burst of
// outstanding operations (a window of thousands of Isends) leaves at most
// this many behind for reuse, the rest to the garbage collector.
const maxFree = 4096

// newRequest takes a released request from the engine's free list, or a
// new one; the lock is held. The free list replaces a sync.Pool: the
// engine lock is held at every Get and Put anyway, and a slice under it
// costs less than the pool's per-P pinning (BenchmarkWindowSelf).
func (e *Engine) newRequest() *Request {
	var r *Request
	if n := len(e.free); n > 0 {
		r = e.free[n-1]
		e.free[n-1] = nil
		e.free = e.free[:n-1]
	} else {
		r = new(Request)
	}
	initRequest(r, e)
	return r
}

func initRequest(r *Request, e *Engine) {
	r.e = e
	r.ctl.Owner, r.data.Owner = r, r
}

// reset clears r and puts it on its engine's free list; the engine lock
// is held.
func (r *Request) reset() {
	if r.x != nil {
		r.x.free()
	}
	e, kept := r.e, r.kept
	*r = Request{kept: kept}
	if e != nil && len(e.free) < maxFree {
		e.free = append(e.free, r)
	}
}

// Keep leaves v with r for whoever takes r from the engine's free list
// next (TakeKept), when r is released. Only r's owner calls it, before
// the release; the free list holds v as long as it holds r.
func (r *Request) Keep(v any) { r.kept = v }

// TakeKept returns what the last owner of r left with it (Keep), nil if
// nothing, and clears it; only r's owner, who took it from the engine
// (IsendMem, IrecvMem...), calls it.
func (r *Request) TakeKept() any {
	v := r.kept
	r.kept = nil
	return v
}

// doneFlag is a request's completion: set once, under the engine lock,
// after everything the request reports (err, st); read without the lock
// by waiters (Wait, Done) that then read those. A release store is all
// that takes: nobody sets a word and then reads another that the setter
// must have seen (a sleeping waiter sleeps in the transport, which has
// its own wake-ups). sync/atomic's store is a full fence after the
// completion's own stores (relstore): ~3 ns of a receiver's 37 a message
// in an 8-byte window on the 2-core VM, and np=2 latency at 1-32 B fell
// from 0.48-0.52 to 0.39-0.45 µs without it on the 16-core Intel host
// (docs/measurements.md, "Fences that ordered nothing").
type doneFlag struct{ v uint64 } // a word: relstore stores whole ones

func (f *doneFlag) Load() bool { return atomic.LoadUint64(&f.v) != 0 }
func (f *doneFlag) set()       { relstore.Store64(&f.v, 1) }

// Done reports whether the request has completed, without progressing.
func (r *Request) Done() bool { return r.done.Load() }

// complete records the outcome; the engine lock is held.
func (r *Request) complete(err error) {
	if r.done.Load() {
		return
	}
	if err == nil && r.devErr != nil {
		err = r.devErr
	}
	if err == nil && r.trunc > 0 {
		// The sizes and the sender, which the class alone leaves to
		// guess (the source is the world's rank: p2p knows no other).
		err = fmt.Errorf("%w (a message of %d bytes from world rank %d, tag %d, into %d bytes)", ErrTruncate, r.trunc, r.st.Source, r.st.Tag, r.st.Bytes)
	}
	r.err = err
	if r.x != nil {
		r.x.over()
	}
	r.done.set()
	r.mem = btl.Mem{}
}

// FrameDone implements btl.Completer.
func (r *Request) FrameDone(f *btl.Frame, err error) {
	if r.bounce != nil && f == &r.data {
		r.e.stager.ReleaseHost(r.bounce)
		r.bounce = nil
	}
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
		r.complete(frameErr(err))
		return
	}
	if f == &r.data && !r.recv {
		if r.x != nil && r.x.dataOn != 0 {
			if !r.done.Load() {
				r.e.partSent(r) // a refused RMA's part, sent as DATA
			}
			return
		}
		r.complete(nil)
	}
}

// frameErr is what a request fails with when its transport could not
// deliver one of its frames: the peer is gone (it exited, closed its
// transport, broke the protocol: the transport fails its frames first,
// then tells the engine, PeerFailed), so a process failure, as
// PeerFailed's own errors are (MPI's ERR_PROC_FAILED, which a program
// under --enable-recovery checks for); a closed transport's error stays.
func frameErr(err error) error {
	if errors.Is(err, ErrProcFailed) || errors.Is(err, btl.ErrClosed) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrProcFailed, err)
}

// Result returns the status and error of a completed request.
func (r *Request) Result() (Status, error) { return r.st, r.err }
