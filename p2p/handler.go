package p2p

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"

	"github.com/gorun/gorun/btl"
)

// handler is the engine seen as a btl.Handler. Its methods run inside
// Progress or Send, with the engine lock held.
type handler Engine

var _ btl.Handler = (*handler)(nil)

func (hd *handler) Begin(src int, bh *btl.Header, n int) []byte {
	e := (*Engine)(hd)
	var h header
	h.decode(bh)
	cur := &e.cur[src]
	*cur = inflight{}
	switch h.kind {
	case kEager:
		if r := e.matchPosted(h.ctx, src, int(h.tag)); r != nil {
			r.st = Status{Source: src, Tag: int(h.tag), Bytes: n}
			cur.req = r
			if n <= len(r.buf) {
				return r.buf[:n]
			}
			cur.trsh = make([]byte, n)
			return cur.trsh
		}
		u := &unexpected{ctx: h.ctx, src: src, tag: int(h.tag), length: n, data: make([]byte, n)}
		e.unexp = append(e.unexp, u)
		cur.u = u
		return u.data
	case kData:
		r := e.recvs[h.rreq]
		if r != nil && n <= len(r.buf) && r.rndvPeer == src {
			return r.buf[:n]
		}
		e.protocolError(src, fmt.Sprintf("DATA for unknown receive %d (%d bytes)", h.rreq, n))
		cur.trsh = make([]byte, n)
		return cur.trsh
	}
	if (h.kind == kRTS || h.kind == kCTS) && h.flags&fSingle != 0 && n == len(cur.addr) {
		return cur.addr[:]
	}
	if n > 0 {
		e.protocolError(src, fmt.Sprintf("frame kind %d with %d payload bytes", h.kind, n))
		cur.trsh = make([]byte, n)
		return cur.trsh
	}
	return nil
}

func (hd *handler) End(src int, bh *btl.Header, data []byte) {
	e := (*Engine)(hd)
	var h header
	h.decode(bh)
	var addr uintptr
	if h.flags&fSingle != 0 && len(data) == 8 {
		addr = uintptr(binary.LittleEndian.Uint64(data))
	}
	cur := e.cur[src]
	e.cur[src] = inflight{}
	switch h.kind {
	case kEager:
		if r := cur.req; r != nil {
			if cur.trsh != nil {
				e.fill(r, cur.trsh)
			}
			r.complete(nil)
			return
		}
		if u := cur.u; u != nil {
			u.complete = true
			if r := u.claimed; r != nil {
				e.fill(r, u.data)
				r.complete(nil)
			}
		}
	case kRTS:
		if r := e.matchPosted(h.ctx, src, int(h.tag)); r != nil {
			r.st = Status{Source: src, Tag: int(h.tag), Bytes: int(h.length)}
			e.startRendezvous(r, src, int(h.length), h.sreq, h.flags&fSingle != 0, addr)
			return
		}
		e.unexp = append(e.unexp, &unexpected{ctx: h.ctx, src: src, tag: int(h.tag), length: int(h.length), rts: true, sreq: h.sreq, complete: true,
			single: h.flags&fSingle != 0, addr: uint64(addr)})
	case kCTS:
		r := e.sends[h.sreq]
		if r == nil || r.peer != src || h.length > uint64(len(r.buf)) {
			e.protocolError(src, fmt.Sprintf("CTS for unknown send %d", h.sreq))
			return
		}
		if h.flags&fSingle != 0 {
			if !r.single {
				e.protocolError(src, fmt.Sprintf("single-copy CTS for send %d that offered none", h.sreq))
				return
			}
			e.singleSend(r, src, h, addr)
			return
		}
		delete(e.sends, h.sreq)
		d := header{kind: kData, ctx: r.ctx, src: int32(e.rank), tag: int32(r.tag), length: h.length, rreq: h.rreq}
		d.encode(&r.data.Hdr)
		r.data.Payload = r.buf[:h.length]
		r.buf = nil
		if err := e.sendCtl(src, r, &r.data); err != nil {
			r.complete(err)
		}
	case kData:
		r := e.recvs[h.rreq]
		if r == nil || cur.trsh != nil {
			return
		}
		delete(e.recvs, h.rreq)
		r.complete(nil)
	case kFinS:
		if r := e.recvs[h.rreq]; r != nil && r.single && r.rndvPeer == src {
			r.theirs = true
			if r.mine {
				delete(e.recvs, h.rreq)
				r.complete(nil)
			}
			return
		}
		e.protocolError(src, fmt.Sprintf("FIN for unknown receive %d", h.rreq))
	case kFinR:
		if r := e.sends[h.sreq]; r != nil && r.single && r.peer == src {
			r.theirs = true
			if r.mine {
				delete(e.sends, h.sreq)
				r.complete(nil)
			}
			return
		}
		e.protocolError(src, fmt.Sprintf("FIN for unknown send %d", h.sreq))
	default:
		e.protocolError(src, fmt.Sprintf("unknown frame kind %d", h.kind))
	}
}

// singleSend answers a single-copy CTS: write our part of the message
// straight into the receiver's buffer at raddr, then tell it.
func (e *Engine) singleSend(r *Request, dst int, cts header, raddr uintptr) {
	rt, err := e.route(dst)
	if err != nil || rt.rc == nil {
		delete(e.sends, r.id)
		r.complete(fmt.Errorf("single-copy send to rank %d: no route that copies: %v", dst, err))
		return
	}
	accept := int(cts.length)
	if m := split(accept); m < accept {
		if err := rt.rc.WriteRemote(dst, raddr+uintptr(m), r.buf[m:accept]); err != nil {
			delete(e.sends, r.id)
			r.complete(fmt.Errorf("single-copy send to rank %d: %w", dst, err))
			return
		}
	}
	fin := header{kind: kFinS, ctx: r.ctx, src: int32(e.rank), rreq: cts.rreq}
	fin.encode(&r.ctl.Hdr)
	r.ctl.Payload = nil
	if err := e.sendCtl(dst, r, &r.ctl); err != nil {
		delete(e.sends, r.id)
		r.complete(err)
		return
	}
	r.mine = true
	if r.theirs {
		delete(e.sends, r.id)
		r.complete(nil)
	}
}

// matchPosted finds and removes the first posted receive matching.
func (e *Engine) matchPosted(ctx uint32, src, tag int) *Request {
	for i, r := range e.posted {
		if matches(r, ctx, src, tag) {
			e.posted = append(e.posted[:i], e.posted[i+1:]...)
			return r
		}
	}
	return nil
}

func (e *Engine) protocolError(src int, what string) {
	fmt.Fprintf(os.Stderr, "gorun: p2p: rank %d: from rank %d: %s: %v\n", e.rank, src, what, ErrProtocol)
}

// PeerFailed fails every operation that needs src.
func (hd *handler) PeerFailed(src int, err error) {
	e := (*Engine)(hd)
	if e.failed[src] != nil {
		return
	}
	e.failed[src] = fmt.Errorf("%w: %v", ErrProcFailed, err)
	ferr := e.failed[src]
	keep := e.posted[:0]
	for _, r := range e.posted {
		if r.peer == src {
			r.complete(ferr)
			continue
		}
		keep = append(keep, r)
	}
	e.posted = keep
	for id, r := range e.sends {
		if r.peer == src {
			delete(e.sends, id)
			r.complete(ferr)
		}
	}
	for id, r := range e.recvs {
		if r.rndvPeer == src {
			delete(e.recvs, id)
			r.complete(ferr)
		}
	}
	if c := e.cur[src]; c.req != nil {
		c.req.complete(ferr)
	} else if c.u != nil {
		if c.u.claimed != nil {
			c.u.claimed.complete(ferr)
		} else if i := slices.Index(e.unexp, c.u); i >= 0 {
			e.unexp = slices.Delete(e.unexp, i, i+1)
		}
	}
	e.cur[src] = inflight{}
}
