//go:build cgo && ofi

package ofi

import (
	"fmt"
	"time"

	"github.com/gorun/gorun/btl"
)

// peer is the module's state for one rank, and its btl.Endpoint.
type peer struct {
	m    *module
	rank int
	addr uint64 // in the address vector, once reached
	// reached: addr is valid (Reach, or the peer's hello); hello: this
	// rank's hello to the peer is posted.
	reached bool
	hello   bool

	failed  error
	sendSeq uint32
	recvSeq uint32
	queue   []*outFrame // frames not yet wholly handed to the provider, in order
	// inflight counts sends and RDMA operations to the peer the provider
	// has not completed.
	inflight int
	rmas     int // RMA operations started and not done, queued ones too
	onBusy   bool

	// The frame being received.
	inFrame bool
	in      []byte
	inOff   int
	inHdr   btl.Header

	heard   time.Time // last message from the peer, or send completed to it
	probing bool
	// stuck is when the provider began to refuse ("try again") every
	// send to the peer while none of this rank's was in flight there:
	// it cannot connect (doc.go, "Failures").
	stuck time.Time
}

// refused notes a send the provider refused for now (-FI_EAGAIN). With
// nothing in flight to the peer, that is no queue that is full: the
// provider is (re)connecting, which fails after connectTimeout.
func (p *peer) refused() {
	if p.inflight == 0 && p.stuck.IsZero() {
		p.stuck = time.Now()
	}
}

// outFrame is a frame being sent: its fragments are posted in order, and
// it completes once all are posted and the provider completed each.
type outFrame struct {
	f       *btl.Frame
	off     int  // payload bytes posted
	first   bool // the first fragment is posted
	pending int  // fragments posted and not completed
	err     error
	done    bool
}

// txSlot is a send buffer's use: the frame a fragment belongs to, or a
// probe.
type txSlot struct {
	p     *peer
	frame *outFrame
	probe bool
}

var _ btl.Endpoint = (*peer)(nil)

// Send queues f. A frame that fits one message within the provider's
// inject size goes at once and completes inside Send.
func (p *peer) Send(f *btl.Frame) error {
	m := p.m
	if m.closed {
		return btl.ErrClosed
	}
	if p.failed != nil {
		return p.failed
	}
	n := len(f.Payload)
	if p.hello && len(p.queue) == 0 && firstLen+n <= m.f.inject && len(m.txFree) > 0 {
		i := m.txFree[len(m.txFree)-1]
		b := m.f.buf(nRecv + i)
		putFirst(b, m.env.Rank, m.cookie, p.sendSeq, n, &f.Hdr)
		copy(b[firstLen:], f.Payload)
		r := m.f.injectMsg(i, firstLen+n, p.addr)
		if r == 0 {
			p.stuck = time.Time{}
			p.sendSeq++
			f.Owner.FrameDone(f, nil)
			return nil
		}
		if !isEAGAIN(r) {
			err := fmt.Errorf("ofi: send to rank %d: %s", p.rank, errText(r))
			p.fail(err)
			return err
		}
	}
	p.queue = append(p.queue, &outFrame{f: f})
	p.push()
	return nil
}

// push posts fragments of the queued frames while send buffers last. A
// peer left with a queue joins the module's busy list.
func (p *peer) push() {
	m := p.m
	if !p.hello && !p.sendHello() {
		p.wait()
		return
	}
	for len(p.queue) > 0 && p.failed == nil {
		o := p.queue[0]
		if len(m.txFree) == 0 {
			break
		}
		b := m.f.buf(nRecv + m.txFree[len(m.txFree)-1])
		payload := o.f.Payload
		var n int
		if !o.first {
			putFirst(b, m.env.Rank, m.cookie, p.sendSeq, len(payload), &o.f.Hdr)
			n = firstLen + copy(b[firstLen:], payload)
		} else {
			putFixed(b, tCont, m.env.Rank, m.cookie, p.sendSeq)
			n = fixedLen + copy(b[fixedLen:], payload[o.off:])
		}
		if !p.post(n, txSlot{p: p, frame: o}, "send to") {
			break
		}
		o.pending++
		if !o.first {
			o.first = true
			o.off = n - firstLen
		} else {
			o.off += n - fixedLen
		}
		if o.off == len(payload) {
			p.queue[0] = nil
			p.queue = p.queue[1:]
		}
	}
	p.wait()
}

// wait puts a peer left with a queue on the module's busy list.
func (p *peer) wait() {
	if len(p.queue) > 0 && !p.onBusy && p.failed == nil {
		p.onBusy = true
		p.m.busy = append(p.m.busy, p)
	}
}

// fragDone records one completed fragment of o.
func (o *outFrame) fragDone(err error) {
	o.pending--
	if err != nil && o.err == nil {
		o.err = err
	}
	if o.pending == 0 && !o.done && (o.err != nil || o.off == len(o.f.Payload) && o.first) {
		o.done = true
		o.f.Owner.FrameDone(o.f, o.err)
	}
}

// sendHello posts the hello, this rank's card, as the first message to
// the peer; false when it must wait for a send buffer or the provider.
func (p *peer) sendHello() bool {
	m := p.m
	if len(m.txFree) == 0 {
		return false
	}
	b := m.f.buf(nRecv + m.txFree[len(m.txFree)-1])
	putFixed(b, tHello, m.env.Rank, m.cookie, p.sendSeq)
	n := fixedLen + copy(b[fixedLen:], m.card)
	if !p.post(n, txSlot{p: p}, "hello to") {
		return false
	}
	p.hello = true
	return true
}

// sendProbe sends a probe, whose completion says whether the peer still
// takes messages.
func (p *peer) sendProbe() {
	m := p.m
	if len(m.txFree) == 0 || !p.reached {
		return
	}
	putFixed(m.f.buf(nRecv+m.txFree[len(m.txFree)-1]), tProbe, m.env.Rank, m.cookie, p.sendSeq)
	if p.post(fixedLen, txSlot{p: p, probe: true}, "probe") {
		p.probing = true
	}
}

// post sends the first n bytes of the last free send buffer, which the
// caller filled, as the peer's next message, with slot as its use. False
// when the provider refused it for now (noted by refused) or failed (the
// peer failed: "ofi: <what> rank N: ...").
func (p *peer) post(n int, slot txSlot, what string) bool {
	m := p.m
	i := m.txFree[len(m.txFree)-1]
	r := m.f.send(i, n, p.addr)
	if isEAGAIN(r) {
		p.refused()
		return false
	}
	if r != 0 {
		p.fail(fmt.Errorf("ofi: %s rank %d: %s", what, p.rank, errText(r)))
		return false
	}
	m.txFree = m.txFree[:len(m.txFree)-1]
	m.tx[i] = slot
	p.stuck = time.Time{}
	p.sendSeq++
	p.inflight++
	return true
}

// business reports whether the module waits on the peer for something:
// the rest of a frame, send completions, RDMA.
func (p *peer) business() bool {
	return p.inFrame || len(p.queue) > 0 || p.inflight > 0 || p.rmas > 0
}

// fail ends all traffic with the peer: queued frames and RDMA fail, a
// half-received frame is dropped, and the handler hears PeerFailed once.
// Operations the provider still holds complete when it returns them.
func (p *peer) fail(err error) {
	if p.failed != nil {
		return
	}
	p.failed = fmt.Errorf("%w: rank %d: %w", ErrPeerFailed, p.rank, err)
	p.failAll(p.failed)
	p.m.env.Handler.PeerFailed(p.rank, p.failed)
}

// failAll fails what is queued for the peer (not what the provider holds).
func (p *peer) failAll(err error) {
	for _, o := range p.queue {
		if !o.done {
			o.done = true
			o.f.Owner.FrameDone(o.f, err)
		}
	}
	p.queue = nil
	p.inFrame, p.in = false, nil
	m := p.m
	q := m.rmaQueue[:0]
	for _, r := range m.rmaQueue {
		if r.p == p && r.posted == 0 {
			r.finish(err)
			continue
		}
		q = append(q, r)
	}
	m.rmaQueue = q
}

// receive handles one message, of n bytes in receive buffer i.
func (m *module) receive(i, n int) {
	b := m.f.buf(i)[:n]
	var g msg
	if err := decodeMsg(b, len(m.peers), &g); err != nil {
		m.stranger(err)
		return
	}
	if g.cookie != m.cookie {
		m.stranger(fmt.Errorf("message from \"rank %d\" with the wrong job cookie", g.src))
		return
	}
	p := m.peers[g.src]
	if p == nil {
		// A peer that reached this rank first: p2p reaches every peer it
		// talks to, but a message may come before that. The card is not
		// known here, so the peer is known by the rank alone until Reach.
		p = m.addPeer(g.src)
	}
	if p.failed != nil {
		return
	}
	if g.seq != p.recvSeq {
		p.fail(fmt.Errorf("message %d arrived when %d was due (the provider broke send-after-send order)", g.seq, p.recvSeq))
		return
	}
	p.recvSeq++
	p.heard = time.Now()
	h := m.env.Handler
	switch g.typ {
	case tFirst:
		if p.inFrame {
			p.fail(fmt.Errorf("a frame began inside a frame"))
			return
		}
		if g.total > 1<<62 {
			p.fail(fmt.Errorf("frame of %d bytes", g.total))
			return
		}
		p.inHdr = *g.hdr
		p.in = h.Begin(p.rank, &p.inHdr, int(g.total))
		p.inOff = copy(p.in, g.data)
		if p.inOff == len(p.in) {
			in := p.in
			p.in = nil
			h.End(p.rank, &p.inHdr, in)
			return
		}
		p.inFrame = true
	case tCont:
		if !p.inFrame {
			p.fail(fmt.Errorf("a continuation outside a frame"))
			return
		}
		if len(g.data) > len(p.in)-p.inOff {
			p.fail(fmt.Errorf("%d bytes past the end of a frame of %d", len(g.data)-(len(p.in)-p.inOff), len(p.in)))
			return
		}
		p.inOff += copy(p.in[p.inOff:], g.data)
		if p.inOff == len(p.in) {
			in := p.in
			p.inFrame, p.in = false, nil
			h.End(p.rank, &p.inHdr, in)
		}
	case tProbe:
	case tHello:
		if p.reached {
			return
		}
		c, err := decodeCard(g.data)
		if err == nil && (c.prov != m.prov || c.fabric != m.fabric) {
			err = fmt.Errorf("provider %s on %s, this rank has %s on %s", c.prov, c.fabric, m.prov, m.fabric)
		}
		if err == nil {
			err = p.setAddr(c.addr)
		}
		if err != nil {
			p.fail(fmt.Errorf("hello: %w", err))
		}
	}
}

// setAddr enters the peer's endpoint address into the address vector.
func (p *peer) setAddr(a []byte) error {
	fa, err := p.m.f.avInsert(a)
	if err != nil {
		return err
	}
	p.addr, p.reached = fa, true
	return nil
}

// stranger logs a message that is not from this job (the first few).
func (m *module) stranger(err error) {
	m.strangers++
	if m.strangers <= 3 {
		logf("rank %d: dropped a message: %v", m.env.Rank, err)
	}
}
