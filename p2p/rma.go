package p2p

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gorun/gorun/btl"
)

// RMA rendezvous (doc.go, "Protocols"). When the route's module implements
// btl.RMA for the buffer's kind, the sender registers its buffer and sends
// the region in its RTS; the receiver registers its own, answers with its
// region in the CTS and gets its part of the message while the sender
// puts the rest (split, header.go: the receiver decides who copies what,
// and its CTS says so); each side tells the other with
// a FIN when its part is in place, and a side completes once both parts
// are. Every wait is an RMA operation completed from Progress: nothing
// blocks under the lock.

// rndv is one request's RMA state, taken from a pool when a rendezvous
// goes by RMA and returned when the request is recycled.
type rndv struct {
	r     *Request
	rma   btl.RMA
	kinds btl.Kinds
	// reg is our buffer, registered (regd until Deregister); remote is the
	// peer's, from its RTS or CTS; wire is reg encoded, our RTS/CTS
	// payload.
	reg    btl.Region
	regd   bool
	remote btl.Region
	wire   [btl.MaxRegionSize]byte
	op     btl.RMAOp
	// busy: op was accepted and RMADone has not come yet.
	busy bool
	// mine and theirs: our part of the copy and the peer's are over (in
	// place, or failed: err, theirErr).
	mine, theirs  bool
	err, theirErr error
	// peerReq is the peer's request id, which our FIN names.
	peerReq uint64
	// part is where the receiver's part of the copy ends and the
	// sender's begins (split), accept where the sender's ends (the CTS's
	// length): for the parts that go by frames.
	part, accept int
	// The parts that go by frames after all (refused: an RMA the system
	// refused after the route said it had it). The receiver waits for its
	// part as DATA (wantData). The sender owes its own part (ownDue) and
	// the receiver's (resendDue, asked: the receiver's FIN asked for it)
	// as DATA, one frame at a time (r.data): dataOn says which is on the
	// wire (dataOwn, dataTheirs), 0 none.
	wantData, ownDue, resendDue, asked bool
	dataOn                             uint8
}

var rndvPool = sync.Pool{New: func() any { return new(rndv) }}

// register takes an rndv for r and registers m with the route's module;
// on success r.x holds it and r.ctl carries the region as its payload.
func register(r *Request, mod *rmaMod, m btl.Mem) error {
	x := rndvPool.Get().(*rndv) // zero: free clears it before the pool
	x.r, x.rma, x.kinds = r, mod.rma, mod.kinds
	x.op.Owner = x
	if err := x.rma.Register(m, &x.reg); err != nil {
		x.free()
		return err
	}
	x.regd = true
	r.x = x
	r.ctl.Payload = x.wire[:x.reg.Encode(x.wire[:])]
	return nil
}

// release deregisters our buffer once the request is over and no
// operation still uses it.
func (x *rndv) release() {
	if x.regd && !x.busy {
		x.regd = false
		x.rma.Deregister(&x.reg)
	}
}

// over is called when x's request completes: unless an operation is
// still pending (RMADone finishes the job), the registration goes and x
// returns to the pool at once, so that nonblocking requests, which are
// never released, do not allocate an rndv per message. On success nothing
// refers to x by then: our RTS or CTS, whose payload is x.wire, was
// delivered before the peer's FIN, and every operation has reported. A
// request that fails may still have that frame with the transport (a Get
// refused right after the CTS was queued, a peer declared dead with the
// RTS queued behind a full ring): then x stays with the request, so that
// the peer, alive after all, gets the region as it was sent, not zeros or
// another transfer's buffer; reset frees it, or the garbage collector.
func (x *rndv) over() {
	if x.busy {
		return
	}
	x.release()
	if p := x.r.ctl.Payload; len(p) > 0 && &p[0] == &x.wire[0] {
		return
	}
	x.r.x = nil
	x.free()
}

// free returns x to the pool.
func (x *rndv) free() {
	*x = rndv{}
	rndvPool.Put(x)
}

// start hands x.op (already filled) to the module as a Get (the receiver's
// part) or a Put (the sender's).
func (x *rndv) start(get bool) error {
	x.busy = true
	x.r.frames++
	var err error
	if get {
		err = x.rma.Get(&x.op)
	} else {
		err = x.rma.Put(&x.op)
	}
	if err != nil {
		x.busy = false
		x.r.frames--
	}
	return err
}

// RMADone implements btl.RMACompleter: our part of the copy is in place
// (or failed); tell the peer.
func (x *rndv) RMADone(op *btl.RMAOp, err error) {
	r := x.r
	x.busy = false
	r.frames--
	if r.done.Load() {
		// It failed meanwhile (peer died, engine closed), or was even
		// released: finish what complete left to this call.
		x.over()
		if r.pooled && r.frames == 0 {
			r.reset()
		}
		return
	}
	e := r.e
	if err != nil && e.refused(r, op.Peer, err) {
		return
	}
	if err != nil {
		what := "put to"
		if r.recv {
			what = "get from"
		}
		err = fmt.Errorf("rma %s rank %d: %w", what, op.Peer, err)
	}
	e.finish(r, op.Peer, err)
}

// finish sends our FIN once our part is over (failed when err is not nil),
// and completes r if the peer's part is over too.
func (e *Engine) finish(r *Request, peer int, err error) {
	var flags uint8
	if err != nil {
		flags = fFail
	}
	if !e.sendFin(r, peer, flags) {
		return
	}
	x := r.x
	x.mine, x.err = true, err
	if x.theirs {
		e.rmaOver(r)
	}
}

// sendFin sends r's one FIN with flags and reports whether r goes on: a
// FIN that fails fails r.
func (e *Engine) sendFin(r *Request, peer int, flags uint8) bool {
	fin := header{kind: kFinS, flags: flags, ctx: r.ctx, rreq: r.x.peerReq}
	f := &r.ctl
	if r.recv {
		fin = header{kind: kFinR, flags: flags, ctx: r.ctx, sreq: r.x.peerReq}
		f = &r.data
	}
	fin.encode(&f.Hdr)
	f.Payload = nil
	if err := e.sendCtl(peer, r, f); err != nil {
		e.forget(r)
		r.complete(err)
		return false
	}
	return !r.done.Load() // the FIN failed inside Send, and so did r (x is gone)
}

// finished is the peer's FIN: its part is over, failed when failed.
func (e *Engine) finished(r *Request, peer int, failed bool) {
	x := r.x
	x.theirs = true
	if failed {
		x.theirErr = fmt.Errorf("rank %d failed its part of the transfer", peer)
	}
	if x.mine {
		e.rmaOver(r)
	}
}

// rmaOver completes r once both parts are over, with our part's error
// first.
func (e *Engine) rmaOver(r *Request) {
	err := r.x.err
	if err == nil {
		err = r.x.theirErr
	}
	e.forget(r)
	r.complete(err)
}

// rmaSend answers an RMA CTS (its region already in r.x.remote, flags its
// flags): put the part of the message past the receiver's, or, when the
// receiver gets it all, just say so.
func (e *Engine) rmaSend(r *Request, dst int, accept int, flags uint8) {
	x := r.x
	if !x.kinds.Has(x.remote.Kind) {
		e.finish(r, dst, fmt.Errorf("rma put to rank %d: the receiver's %v memory is out of reach of our module: %w", dst, x.remote.Kind, ErrNoDevicePath))
		return
	}
	m := sendPart(flags, accept)
	x.part, x.accept = m, accept
	if m == accept {
		e.finish(r, dst, nil)
		return
	}
	x.op = btl.RMAOp{Peer: dst, Local: r.mem.Slice(m, accept), Remote: &x.remote, Offset: uint64(m), Owner: x}
	if err := x.start(false); err != nil && !e.refused(r, dst, err) {
		e.finish(r, dst, fmt.Errorf("rma put to rank %d: %w", dst, err))
	}
}

// rmaRecv starts the receiver's part after its CTS went out: get the
// first m bytes of the message (split's choice, which the CTS told the
// sender).
func (e *Engine) rmaRecv(r *Request, src int, m int) {
	x := r.x
	if m == 0 {
		e.finish(r, src, nil)
		return
	}
	x.op = btl.RMAOp{Peer: src, Local: r.mem.Slice(0, m), Remote: &x.remote, Owner: x}
	if err := x.start(true); err != nil && !e.refused(r, src, err) {
		e.finish(r, src, fmt.Errorf("rma get from rank %d: %w", src, err))
	}
}

// Refused parts go by frames. The system may refuse an RMA after the
// route said it had it (btl.ErrRMARefused: the kernel refuses
// process_vm_readv to a rank made non-dumpable after its peers probed
// it); the message then still arrives, as the bytes of a plain
// rendezvous do. A receiver refused its Get sends its FIN with fResend
// (its one FIN) and takes its part from the DATA frame the sender then
// sends; a sender refused its Put sends its part as DATA, then its FIN.
// Both land where the copy would have put them (DATA's offset), and the
// receiver takes no other DATA while its transfer is by RMA. The route
// then keeps only the kinds the module still reaches with the peer
// (recheckRMA), so that later transfers of the pair do not try again what
// was refused. Host memory on both sides only: a refusal where either
// buffer is device memory fails the transfer as before.

// refused takes over r's part when err is a refusal and both buffers are
// host memory, and reports whether it did; any refusal makes the route
// ask the module again what it reaches.
func (e *Engine) refused(r *Request, peer int, err error) bool {
	x := r.x
	if !errors.Is(err, btl.ErrRMARefused) {
		return false
	}
	e.recheckRMA(peer, x.rma)
	if r.mem.Kind != btl.MemHost || x.remote.Kind != btl.MemHost {
		return false
	}
	if r.recv {
		x.wantData = true
		e.sendFin(r, peer, fResend)
		return true
	}
	x.ownDue = true
	e.sendParts(r)
	return true
}

// recheckRMA asks module m, which refused an RMA with peer, which kinds
// it still reaches with it, and keeps the route's list to those: btl/sm
// stops single copy with a peer that refused once, and the pair's later
// rendezvous then go without RMA from the start (its RTS or CTS offers no
// region) instead of falling back each time.
func (e *Engine) recheckRMA(peer int, m btl.RMA) {
	rt := e.routes[peer]
	if rt == nil {
		return
	}
	keep := rt.rmas[:0] // the route's own list, filtered in place
	for _, x := range rt.rmas {
		if x.rma == m {
			if x.kinds &= m.RMAKinds(e.peers[peer]); x.kinds == 0 {
				continue
			}
		}
		keep = append(keep, x)
	}
	rt.rmas = keep
}

// Which part of the message a sender's DATA frame carries (rndv.dataOn).
const (
	dataOwn    = 1
	dataTheirs = 2
)

// resend answers a receiver's FIN with fResend (both buffers host
// memory, checked): its part goes as DATA.
func (e *Engine) resend(r *Request) {
	x := r.x
	x.asked = true
	x.resendDue = true
	e.sendParts(r)
}

// sendParts sends the next part the sender owes as a DATA frame (which
// lands at the part's offset of the receive buffer), unless one is on the
// wire: its FrameDone (partSent) sends the next.
func (e *Engine) sendParts(r *Request) {
	x := r.x
	from, to := 0, x.part
	switch {
	case x.dataOn != 0:
		return
	case x.ownDue:
		x.ownDue, x.dataOn = false, dataOwn
		from, to = x.part, x.accept
	case x.resendDue:
		x.resendDue, x.dataOn = false, dataTheirs
	default:
		return
	}
	e.sendData(r, r.peer, x.peerReq, from, to)
}

// sendData sends bytes [from, to) of r's host buffer as one DATA frame
// for the peer's receive rreq, where it lands at offset from (the plain
// rendezvous sends it all, a refused RMA one part); a frame that cannot
// go fails r.
func (e *Engine) sendData(r *Request, dst int, rreq uint64, from, to int) {
	d := header{kind: kData, ctx: r.ctx, tag: int32(r.tag), length: uint64(to - from), sreq: uint64(from), rreq: rreq}
	d.encode(&r.data.Hdr)
	r.data.Payload = r.mem.Bytes[from:to]
	if err := e.sendCtl(dst, r, &r.data); err != nil {
		e.forget(r)
		r.complete(err)
	}
}

// partSent is the FrameDone of a sender's DATA frame of an RMA
// rendezvous: our own part is out, so our FIN goes; or the receiver's
// part is, which is then over for it too.
func (e *Engine) partSent(r *Request) {
	x := r.x
	on := x.dataOn
	x.dataOn = 0
	switch on {
	case dataOwn:
		e.finish(r, r.peer, nil)
	case dataTheirs:
		x.theirs = true
		if x.mine {
			e.rmaOver(r)
		}
	}
	if !r.done.Load() {
		e.sendParts(r)
	}
}

// partLanded is a DATA frame of an RMA rendezvous at the receiver: the
// part it asked for (at offset 0) completes its own part; the sender's
// part is followed by the sender's FIN. Begin checked the offsets and
// lengths.
func (e *Engine) partLanded(r *Request, off uint64) {
	x := r.x
	if !x.wantData || off != 0 {
		return
	}
	x.wantData = false
	x.mine = true
	if x.theirs {
		e.rmaOver(r)
	}
}

// noPathErr is how a transfer fails whose buffer is device memory on a
// route that can reach it neither by RMA nor by staging.
func noPathErr(peer int, m btl.Mem, rt *route) error {
	name := "no transport"
	if rt != nil {
		name = rt.mod.Name()
	}
	return fmt.Errorf("rank %d over %s with %v: %w", peer, name, m, ErrNoDevicePath)
}
