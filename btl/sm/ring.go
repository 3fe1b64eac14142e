package sm

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/gorun/gorun/btl"
)

// ring is one single-producer single-consumer ring as mapped by either
// side: a control page, then slots (layout.go). Slot i holds ticket t when
// t % slots == i and its seq word is t+1, so a stale slot from the
// previous lap (t+1-slots) never looks ready and nothing has to be reset.
type ring struct {
	mem    []byte
	slots  uint64
	mask   uint64
	stride int
}

func newRing(mem []byte, slots, frag int) ring {
	return ring{mem: mem, slots: uint64(slots), mask: uint64(slots - 1), stride: slotStride(frag)}
}

// slot returns the memory of the slot that holds ticket t.
func (r *ring) slot(t uint64) []byte {
	o := ringCtlSize + int(t&r.mask)*r.stride
	return r.mem[o : o+r.stride : o+r.stride]
}

// inRing is the consumer's side: this rank reads what peer p writes.
type inRing struct {
	ring
	p     *peer
	head  uint64
	headp *uint64
	fullp *uint32
	// hot: listed in m.hot, polled on every Progress in doorbell mode;
	// more: the last poll stopped at its budget with slots left.
	hot, more bool
	// The frame being received: between Begin and End when inFrame.
	inFrame bool
	hdr     btl.Header
	dst     []byte
	got     int
}

func newInRing(p *peer, mem []byte, slots, frag int) *inRing {
	r := &inRing{ring: newRing(mem, slots, frag), p: p}
	r.headp = u64(mem, offHead)
	r.fullp = u32(mem, offFull)
	r.head = atomic.LoadUint64(r.headp)
	return r
}

// poll delivers what the producer has published, up to the budget, and
// returns the number of frames completed.
func (r *inRing) poll(m *module) int {
	ev, n := 0, 0
	h := m.env.Handler
	limit := int(r.slots) * pollBudget
	r.more = false
	for ; n < limit; n++ {
		s := r.slot(r.head)
		if atomic.LoadUint64(u64(s, offSlotSeq)) != r.head+1 {
			break
		}
		var data []byte
		if !r.inFrame {
			meta := binary.LittleEndian.Uint64(s[offSlotMeta:])
			total, hl := meta&metaLenMask, int(meta>>metaHdrShift)
			if total > maxFrame || hl > btl.HeaderSize {
				m.failPeer(r.p, fmt.Errorf("sm: from rank %d: malformed fragment: frame length %d, header %d bytes", r.p.rank, total, hl))
				return ev
			}
			r.hdr = btl.Header{}
			copy(r.hdr[:hl], s[offSlotHdr:])
			r.dst = h.Begin(r.p.rank, &r.hdr, int(total))
			if uint64(len(r.dst)) != total {
				m.failPeer(r.p, fmt.Errorf("sm: from rank %d: frame of %d bytes refused (%d bytes given): protocol error", r.p.rank, total, len(r.dst)))
				return ev
			}
			r.got = 0
			r.inFrame = true
			data = s[offSlotHdr+hl:]
		} else {
			data = s[offSlotCont:]
		}
		r.got += copy(r.dst[r.got:], data)
		r.head++
		// Hand the slot back at once: while a large frame streams, the
		// producer refills it as this side copies the next.
		atomic.StoreUint64(r.headp, r.head)
		if r.got == len(r.dst) {
			d := r.dst
			r.dst, r.inFrame = nil, false
			h.End(r.p.rank, &r.hdr, d)
			ev++
			if r.p.err != nil {
				return ev
			}
		}
	}
	if n == limit {
		r.more = true
	}
	if n > 0 {
		// The producer may sleep on a full ring (Dekker with outRing.push:
		// head is stored above, the flag read here).
		if atomic.LoadUint32(r.fullp) != 0 {
			atomic.StoreUint32(r.fullp, 0)
			if r.p.seg != nil {
				wake(r.p.seg.ctl)
			}
		}
	} else if r.inFrame {
		m.stalled(r.p)
	}
	return ev
}

// ready reports whether a fragment waits in the ring.
func (r *inRing) ready() bool {
	return atomic.LoadUint64(u64(r.slot(r.head), offSlotSeq)) == r.head+1
}

// outRing is the producer's side: this rank writes to peer p. It is the
// btl.Endpoint for p.
type outRing struct {
	ring
	m     *module
	p     *peer
	tail  uint64  // next ticket to write
	head  uint64  // the consumer's head as last read
	headp *uint64 // the consumer's head
	fullp *uint32
	rctl  []byte // the receiver's control area, for wake-ups
	// The receiver's doorbell: its mode word and this sender's word and bit.
	bellOn *uint32
	bell   *uint64
	bit    uint64

	queue []*btl.Frame
	// qbuf is the whole array queue lives in: push drains queue from its
	// front, and Send moves what is left back to qbuf's start instead of
	// growing a new array, so that a steady stream of frames (a window of
	// Isends larger than the ring) allocates nothing.
	qbuf    []*btl.Frame
	off     int  // payload bytes of queue[0] already in the ring
	started bool // queue[0]'s first fragment is in the ring
	busy    bool // listed in m.busy
	err     error
}

var _ btl.Endpoint = (*outRing)(nil)

func newOutRing(m *module, p *peer, mem []byte, s *segment) *outRing {
	o := &outRing{ring: newRing(mem, s.slots, s.frag), m: m, p: p, rctl: s.ctl}
	o.headp = u64(mem, offHead)
	o.fullp = u32(mem, offFull)
	o.head = atomic.LoadUint64(o.headp)
	o.tail = o.head
	me := m.env.Rank
	o.bellOn = u32(s.ctl, offBellOn)
	o.bell = u64(s.ctl, offBell(s.size)+8*(me/64))
	o.bit = 1 << (me % 64)
	return o
}

// Send writes as much of f as the ring takes at once and queues the rest;
// FrameDone comes from here when f fits, else from a later Progress.
func (o *outRing) Send(f *btl.Frame) error {
	if o.err != nil {
		return o.err
	}
	if len(o.queue) == cap(o.queue) && cap(o.qbuf) > len(o.queue) {
		n := copy(o.qbuf[:cap(o.qbuf)], o.queue)
		clear(o.qbuf[n:cap(o.qbuf)])
		o.queue = o.qbuf[:n]
	}
	o.queue = append(o.queue, f)
	if cap(o.queue) > cap(o.qbuf) {
		o.qbuf = o.queue[:0]
	}
	if len(o.queue) == 1 {
		o.push()
		if len(o.queue) > 0 && o.err == nil && !o.busy {
			o.busy = true
			o.m.busy = append(o.m.busy, o)
		}
	}
	return nil
}

// space reports whether a slot is free, reloading the consumer's head only
// when the cached one says the ring is full.
func (o *outRing) space() bool {
	if o.tail-o.head < o.slots {
		return true
	}
	o.head = atomic.LoadUint64(o.headp)
	return o.tail-o.head < o.slots
}

// push moves queued frames into the ring until it is full and returns the
// number of frames completed.
func (o *outRing) push() int {
	done := 0
	published := false
	defer func() {
		if published {
			o.doorbell()
			wake(o.rctl)
		}
	}()
	for len(o.queue) > 0 {
		f := o.queue[0]
		for {
			if !o.space() {
				// Ask the consumer to wake us when it frees a slot, then
				// look once more (Dekker with inRing.poll).
				atomic.StoreUint32(o.fullp, 1)
				if !o.space() {
					return done
				}
			}
			s := o.slot(o.tail)
			var data []byte
			if !o.started {
				hl := significant(&f.Hdr)
				binary.LittleEndian.PutUint64(s[offSlotMeta:], uint64(len(f.Payload))|uint64(hl)<<metaHdrShift)
				copy(s[offSlotHdr:offSlotHdr+hl], f.Hdr[:hl])
				data = s[offSlotHdr+hl:]
				o.started = true
			} else {
				data = s[offSlotCont:]
			}
			o.off += copy(data, f.Payload[o.off:])
			o.tail++
			atomic.StoreUint64(u64(s, offSlotSeq), o.tail)
			published = true
			if o.off == len(f.Payload) {
				break
			}
		}
		o.queue[0] = nil
		o.queue = o.queue[1:]
		o.off, o.started = 0, false
		f.Owner.FrameDone(f, nil)
		done++
	}
	o.queue = o.qbuf[:0]
	return done
}

// doorbell tells the receiver, in doorbell mode, that this ring has news: it
// sets this sender's bit, after the slots' seq stores (doc.go,
// "Doorbell", has the ordering argument). The bit is loaded first and
// set only when clear: a receiver that has not swapped it out since the
// last publish will poll this ring anyway, and the load leaves the line
// shared instead of taking it from the receiver and the other senders.
func (o *outRing) doorbell() {
	if atomic.LoadUint32(o.bellOn) == 0 {
		return
	}
	if atomic.LoadUint64(o.bell)&o.bit == 0 {
		atomic.OrUint64(o.bell, o.bit)
	}
}

// fail completes every queued frame with err; later Sends return err.
func (o *outRing) fail(err error) {
	if o.err == nil {
		o.err = err
	}
	q := o.queue
	o.queue = nil
	for _, f := range q {
		f.Owner.FrameDone(f, err)
	}
}

// wake wakes the owner of the control area ctl if it sleeps (Wait): the
// waker has made its change visible before reading the waiters word, the
// sleeper counts itself in before reading the futex word, so either the
// sleeper sees the change or the waker sees the sleeper.
func wake(ctl []byte) {
	if atomic.LoadUint32(u32(ctl, offWaiters)) == 0 {
		return
	}
	seq := u32(ctl, offSeq)
	atomic.AddUint32(seq, 1)
	futexWake(seq)
}
