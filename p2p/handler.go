package p2p

import (
	"fmt"
	"math"
	"os"

	"github.com/gorun/gorun/btl"
)

// handler is the engine seen as a btl.Handler. Its methods run inside
// Progress or Send, with the engine lock held.
type handler Engine

var _ btl.WholeHandler = (*handler)(nil)

func (hd *handler) Begin(src int, bh *btl.Header, n int) []byte {
	var h header
	h.decode(bh)
	return hd.begin(src, &h, n)
}

// begin is Begin of the decoded header h.
func (hd *handler) begin(src int, h *header, n int) []byte {
	e := (*Engine)(hd)
	cur := &e.cur[src]
	cur.req, cur.u, cur.trsh, cur.stage = nil, nil, nil, nil
	switch h.kind {
	case kEager:
		if n > e.maxEager {
			// Every eager frame fits its route's eager limit: a longer
			// one would have us allocate whatever length a corrupt or
			// hostile peer claims (up to the transports' 2^42).
			e.protocolError(src, fmt.Sprintf("eager frame of %d bytes, above every transport's eager limit (%d)", n, e.maxEager))
			return nil
		}
		if h.flags&fFail != 0 {
			e.eagerFailed(src, h, n)
			return nil
		}
		if r, land := e.matchEager(src, h, n); r != nil {
			cur.req, cur.trsh = r, land
			return eagerDst(r, land, n)
		}
		if e.tagErr(h.ctx, int(h.tag)) != nil {
			// Nobody will receive it (revoke.go, revoketags.go); n is within the
			// eager limit (checked above).
			cur.trsh = make([]byte, n)
			return cur.trsh
		}
		u := newUnexpected()
		u.ctx, u.src, u.tag, u.length, u.data = h.ctx, src, int(h.tag), n, eagerBufs.Get(n)
		e.q(h.ctx).unexp.push(u)
		cur.u = u
		return u.data
	case kData:
		r := e.recvs[h.rreq]
		off := h.sreq // the chunk's offset (staging); 0 for one frame
		if r != nil && r.x != nil {
			// A refused RMA's part (rma.go): exactly the part asked
			// for, or the sender's part, into host memory.
			if x := r.x; r.rndvPeer == src && r.mem.Kind == btl.MemHost && n > 0 &&
				(x.wantData && off == 0 && n == x.part || off == uint64(x.part) && n == x.accept-x.part) {
				return r.mem.Bytes[off : int(off)+n]
			}
		} else if r != nil && r.rndvPeer == src && r.st.Bytes >= 0 && off <= uint64(r.st.Bytes) && uint64(n) <= uint64(r.st.Bytes)-off {
			switch {
			case n == 0:
				return nil // an empty message, or fNoPath
			case r.sg != nil:
				return r.sg.landing(cur, int(off), n)
			case r.mem.Kind == btl.MemHost:
				return r.mem.Bytes[off : int(off)+n]
			}
		}
		// Refused (nil): the transport drops the peer, already failed;
		// allocating n bytes to drain a frame of a length nothing bounds
		// is what a hostile peer would want. (Revoke fails only the
		// receives nothing matched yet: a matched one stays in e.recvs
		// and takes its DATA to the end, revoke.go.)
		e.protocolError(src, fmt.Sprintf("DATA for unknown receive %d (%d bytes)", h.rreq, n))
		return nil
	}
	if (h.kind == kRTS || h.kind == kCTS) && h.flags&fRMA != 0 && n <= len(cur.wire) {
		return cur.wire[:n]
	}
	if n > 0 {
		e.protocolError(src, fmt.Sprintf("frame kind %d with %d payload bytes", h.kind, n))
	}
	return nil
}

// Whole takes a frame that arrived in one piece: an eager message that a
// posted receive of host memory matches is copied and completed here (the
// 8-byte message rate's path); any other frame goes through begin and
// end. The header is decoded once either way.
func (hd *handler) Whole(src int, bh *btl.Header, data []byte) bool {
	e := (*Engine)(hd)
	n := len(data)
	var h header
	h.decode(bh)
	if h.kind == kEager && h.flags&fFail == 0 && n <= e.maxEager {
		if r, land := e.matchEager(src, &h, n); r != nil {
			copy(eagerDst(r, land, n), data)
			e.eagerDone(r, land)
			return true
		}
	}
	d := hd.begin(src, &h, n)
	if len(d) != n {
		return false
	}
	copy(d, data)
	hd.end(src, &h, d)
	return true
}

// matchEager matches an eager frame h of n bytes from src to a posted
// receive and returns it (nil: none posted) with, when the payload cannot
// go straight into its host buffer (a truncated host receive, a device
// receive), the landing slice that eagerDone delivers from.
func (e *Engine) matchEager(src int, h *header, n int) (r *Request, land []byte) {
	r = e.matchPosted(h.ctx, src, int(h.tag))
	if r == nil {
		return nil, nil
	}
	r.st = Status{Source: src, Tag: int(h.tag), Bytes: n}
	if r.mem.Kind == btl.MemHost && n <= len(r.mem.Bytes) {
		return r, nil
	}
	return r, e.landEager(r, n)
}

// eagerDst is where the n bytes of an eager frame matched to r go.
func eagerDst(r *Request, land []byte, n int) []byte {
	if land != nil {
		return land
	}
	return r.mem.Bytes[:n]
}

// eagerDone completes r once its eager payload is in place.
func (e *Engine) eagerDone(r *Request, land []byte) {
	if land != nil {
		e.deliver(r, land)
		return
	}
	r.complete(nil)
}

func (hd *handler) End(src int, bh *btl.Header, data []byte) {
	var h header
	h.decode(bh)
	hd.end(src, &h, data)
}

// end is End of the decoded header h.
func (hd *handler) end(src int, h *header, data []byte) {
	e := (*Engine)(hd)
	cur := &e.cur[src]
	req, u, trsh, stage := cur.req, cur.u, cur.trsh, cur.stage
	cur.req, cur.u, cur.trsh, cur.stage = nil, nil, nil, nil
	switch h.kind {
	case kEager:
		if r := req; r != nil {
			e.eagerDone(r, trsh)
			return
		}
		if u != nil {
			u.complete = true
			if r := u.claimed; r != nil {
				e.deliverUnexpected(r, u)
			}
		}
	case kRTS:
		if h.length > math.MaxInt32*math.MaxInt32 {
			// An int must hold it (Status, slicing); 2^62 is beyond any
			// buffer.
			e.protocolError(src, fmt.Sprintf("RTS of %d bytes", h.length))
			return
		}
		// The region is decoded on the stack; only an unexpected RTS
		// keeps a copy.
		var reg btl.Region
		var remote *btl.Region
		if h.flags&fRMA != 0 {
			if err := btl.DecodeRegion(data, &reg); err != nil {
				e.protocolError(src, fmt.Sprintf("RTS: %v", err))
				return
			}
			remote = &reg
		}
		if e.tagErr(h.ctx, int(h.tag)) != nil {
			e.refuseRTS(src, h.ctx, h.sreq)
			return
		}
		if r := e.matchPosted(h.ctx, src, int(h.tag)); r != nil {
			r.st = Status{Source: src, Tag: int(h.tag), Bytes: int(h.length)}
			e.startRendezvous(r, src, int(h.length), h.sreq, remote, h.flags&fDevice != 0)
			return
		}
		u := &unexpected{ctx: h.ctx, src: src, tag: int(h.tag), length: int(h.length), rts: true, sreq: h.sreq, complete: true,
			dev: h.flags&fDevice != 0}
		if remote != nil {
			kept := reg
			u.remote = &kept
		}
		e.q(h.ctx).unexp.push(u)
	case kCTS:
		r := e.sends[h.sreq]
		if r != nil && r.peer == src && h.flags&fRevoked != 0 {
			delete(e.sends, h.sreq)
			e.abandon(r, fmt.Errorf("send to rank %d: %w (refused there)", src, ErrRevoked))
			return
		}
		if r == nil || r.peer != src || h.length > uint64(r.mem.Len()) {
			e.unknownPeerOp(src, h.ctx, fmt.Sprintf("CTS for unknown send %d", h.sreq))
			return
		}
		e.cleared(r, src, h, data)
	case kData:
		r := e.recvs[h.rreq]
		if r == nil || trsh != nil {
			if stage != nil {
				stage.free()
				stage.sg.settle()
			}
			return
		}
		if r.x != nil {
			if h.flags != 0 || len(data) == 0 {
				e.protocolError(src, fmt.Sprintf("DATA (flags %#x, %d bytes) for receive %d, whose transfer is by RMA", h.flags, len(data), h.rreq))
				return
			}
			e.partLanded(r, h.sreq) // a refused RMA's part (rma.go)
			return
		}
		switch {
		case h.flags&fFail != 0:
			err := fmt.Errorf("rank %d failed while sending its device memory", src)
			if r.sg != nil {
				r.sg.gone(err) // settles once our copies to the device are done
			} else {
				delete(e.recvs, h.rreq)
				r.complete(err)
			}
		case h.flags&fNoPath != 0:
			// The sender's device memory cannot go after all.
			delete(e.recvs, h.rreq)
			r.complete(fmt.Errorf("receive from %w", noPathErr(src, btl.Mem{Kind: btl.MemDevice, N: int(h.length)}, e.routes[src])))
		case stage != nil:
			r.sg.landed(stage)
		default:
			if r.got += len(data); r.got >= r.st.Bytes {
				delete(e.recvs, h.rreq)
				r.complete(nil)
			}
		}
	case kFinS:
		if r := e.recvs[h.rreq]; r != nil && r.x != nil && r.rndvPeer == src && !r.x.theirs {
			e.finished(r, src, h.flags&fFail != 0)
			return
		}
		e.unknownPeerOp(src, h.ctx, fmt.Sprintf("FIN for unknown receive %d", h.rreq))
	case kFinR:
		if r := e.sends[h.sreq]; r != nil && r.x != nil && r.peer == src && !r.x.theirs && !r.x.asked {
			if h.flags&fResend != 0 {
				if r.x.peerReq == 0 || r.mem.Kind != btl.MemHost || r.x.remote.Kind != btl.MemHost {
					e.protocolError(src, fmt.Sprintf("FIN asking send %d's %v memory again as DATA (its CTS came: %v)", h.sreq, r.mem.Kind, r.x.peerReq != 0))
					return
				}
				e.resend(r)
				return
			}
			e.finished(r, src, h.flags&fFail != 0)
			return
		}
		e.unknownPeerOp(src, h.ctx, fmt.Sprintf("FIN for unknown send %d", h.sreq))
	default:
		e.protocolError(src, fmt.Sprintf("unknown frame kind %d", h.kind))
	}
}

// eagerFailed takes an EAGER with fFail (stage.go): its sender could not
// copy its device memory. The receive it matches fails; unmatched, it
// waits in the unexpected queue like any message, and fails the receive
// that takes it.
func (e *Engine) eagerFailed(src int, h *header, n int) {
	if n != 0 {
		e.protocolError(src, fmt.Sprintf("failed EAGER with %d payload bytes", n))
		return
	}
	err := fmt.Errorf("receive from rank %d: its device memory (%d bytes) could not be copied to host memory to send it", src, h.length)
	if r := e.matchPosted(h.ctx, src, int(h.tag)); r != nil {
		r.st = Status{Source: src, Tag: int(h.tag)}
		r.complete(err)
		return
	}
	if e.tagErr(h.ctx, int(h.tag)) != nil {
		return
	}
	// The length the sender announced, for Probe and Mprobe: a program
	// that probes to size its buffer sees the message as it was sent.
	e.q(h.ctx).unexp.push(&unexpected{ctx: h.ctx, src: src, tag: int(h.tag), length: int(h.length), complete: true, failed: err})
}

// cleared acts on the CTS h for the send r: refuse (fNoPath), RMA (the
// receiver's region in data), or the message's bytes as one DATA frame.
func (e *Engine) cleared(r *Request, dst int, h *header, data []byte) {
	switch {
	case h.flags&fNoPath != 0:
		delete(e.sends, h.sreq)
		err := r.devErr // why our own memory could not go, if it was ours
		if err == nil {
			err = fmt.Errorf("send to %w", noPathErr(dst, r.mem, e.routes[dst]))
		}
		r.complete(err)
	case h.flags&fRMA != 0:
		if r.x == nil || r.x.busy || r.x.peerReq != 0 {
			e.protocolError(dst, fmt.Sprintf("RMA CTS for send %d that offered none or had one", h.sreq))
			return
		}
		if err := btl.DecodeRegion(data, &r.x.remote); err != nil {
			e.protocolError(dst, fmt.Sprintf("CTS: %v", err))
			return
		}
		r.x.peerReq = h.rreq
		e.rmaSend(r, dst, int(h.length), h.flags)
	default:
		if r.mem.Kind != btl.MemHost {
			e.stageSend(r, dst, h)
			return
		}
		delete(e.sends, h.sreq)
		e.sendData(r, dst, h.rreq, 0, int(h.length))
		r.mem = btl.Mem{}
	}
}

// matchPosted finds and removes the first posted receive of ctx matching
// (src, tag).
func (e *Engine) matchPosted(ctx uint32, src, tag int) *Request {
	q := e.lookQ(ctx)
	if q == nil {
		return nil
	}
	for i, r := range q.posted.items() {
		if r.wants(src, tag) {
			q.posted.remove(i)
			return r
		}
	}
	return nil
}

// unknownPeerOp is protocolError for a frame naming a send or receive
// this engine does not know, unless the frame's communicator was revoked
// here (revoke.go dropped the operation): then it is dropped too.
func (e *Engine) unknownPeerOp(src int, ctx uint32, what string) {
	if e.revokedErr(ctx) == nil {
		e.protocolError(src, what)
	}
}

// protocolError reports a frame from src that makes no sense here and
// treats it as src's failure: whatever waits on src fails with an error
// naming the frame, instead of waiting forever for what src will never
// send.
func (e *Engine) protocolError(src int, what string) {
	err := fmt.Errorf("rank %d sent a bad frame: %s: %w", src, what, ErrProtocol)
	fmt.Fprintf(os.Stderr, "gorun: p2p: rank %d: %v\n", e.rank, err)
	(*handler)(e).PeerFailed(src, err)
}

// PeerFailed fails every operation that needs src.
func (hd *handler) PeerFailed(src int, err error) {
	e := (*Engine)(hd)
	if e.failed[src] != nil {
		return
	}
	e.failed[src] = fmt.Errorf("%w: %w", ErrProcFailed, err)
	ferr := e.failed[src]
	if c := e.cur[src]; c.stage != nil {
		c.stage.drop() // a chunk that will never finish arriving
	}
	// An eager frame half received into landEager's pinned memory keeps
	// it, and so does a staged chunk half received (drop): this may be
	// the failure detector's verdict (Engine.PeerFailed) while the
	// transport still writes the frame's rest into it, so it must not go
	// back to the pool for another message; the pool is one buffer short
	// until Close.
	for _, q := range e.mq {
		failPosted(q, func(r *Request) bool { return r.peer == src }, ferr)
	}
	if rt := e.routes[src]; rt != nil {
		e.dropHeld(rt, ferr, false) // before the sends: it takes its RTSs out of them
	}
	for id, r := range e.sends {
		if r.peer == src {
			delete(e.sends, id)
			e.abandon(r, ferr)
		}
	}
	for id, r := range e.recvs {
		if r.rndvPeer == src {
			delete(e.recvs, id)
			e.abandon(r, ferr)
		}
	}
	e.releaseStaged(src, ferr)
	if c := e.cur[src]; c.req != nil {
		e.abandon(c.req, ferr)
	} else if c.u != nil {
		if c.u.claimed != nil {
			c.u.claimed.complete(ferr)
		} else if q := e.mq[c.u.ctx]; q != nil {
			if i := q.unexp.index(c.u); i >= 0 {
				q.unexp.remove(i)
			}
		}
	}
	e.cur[src] = inflight{}
}

// failPosted fails the posted receives of q that match; the lock is held.
func failPosted(q *matchQ, match func(*Request) bool, err error) {
	q.posted.filter(func(r *Request) bool {
		if match(r) {
			r.complete(err)
			return false
		}
		return true
	})
}

// abandon fails r, whose peer is gone, once no copy of ours still uses its
// buffer: an RMA operation in flight finishes first (RMADone then completes
// r, with err as the peer's part), and so do staging copies and a DATA
// frame of a refused RMA's part, which is our buffer (its FrameDone then
// completes r: partSent's next frame fails on the dead peer).
func (e *Engine) abandon(r *Request, err error) {
	switch {
	case r.x != nil && (r.x.busy || r.x.dataOn != 0):
		r.x.theirs = true
		if r.x.theirErr == nil {
			r.x.theirErr = err
		}
	case r.sg != nil:
		r.sg.gone(err)
	default:
		r.complete(err)
	}
}
