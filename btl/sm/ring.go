package sm

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gorun/gorun/btl"
)

// ring is one single-producer single-consumer ring as mapped by either
// side: a control page, then the data area (layout.go). The data area is
// a byte stream wrapped around: records (first and later fragments of
// frames, skips, and short records and pads of half a line) follow each
// other, full records on line boundaries, so that small frames pack into
// consecutive lines. A record at stream position p starts at offset p %
// cap and is published by storing p+1 into its seq word (a short record
// or pad: its short word); the word right after it is 0 by then (the
// producer zeroes every half line's first word ahead of its records), so
// the word the consumer reads next is 0 until its record comes (doc.go,
// "Records").
type ring struct {
	mem  []byte
	data []byte // the data area: cap bytes after the control page
	cap  int
	rec  int // the largest record: a stride
}

func newRing(mem []byte, slots, frag int) ring {
	stride := slotStride(frag)
	n := slots * stride
	return ring{mem: mem, data: mem[ringCtlSize : ringCtlSize+n : ringCtlSize+n], cap: n, rec: stride}
}

// streamRecord: the consumer hands a record of at least this many bytes
// back at once, so that the producer refills the ring while a large frame
// streams; smaller ones are handed back together at the end of a poll (or
// every quarter ring), which saves a store on a shared line per message.
const streamRecord = 4096

// inRing is the consumer's side: this rank reads what peer p writes.
type inRing struct {
	ring
	p      *peer
	head   uint64 // stream position of the next record
	hoff   int    // head's offset in data
	stored uint64 // head as last stored into *headp
	headp  *uint64
	fullp  *uint32
	// hot: listed in m.hot, polled on every Progress in doorbell mode;
	// more: the last poll stopped at its budget with records left.
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
	r.hoff = int(r.head % uint64(r.cap))
	r.stored = r.head
	return r
}

// poll delivers what the producer has published, up to the budget, and
// returns the number of frames completed.
func (r *inRing) poll(m *module) int {
	ev := 0
	h := m.env.Handler
	h0 := r.head
	limit := h0 + uint64(r.cap)*pollBudget
	r.more = false
	for {
		if r.head >= limit {
			r.more = true
			break
		}
		seq := atomic.LoadUint64(u64(r.data, r.hoff+offRecSeq))
		if seq == 0 {
			break
		}
		var l int
		if seq != r.head+1 {
			if !r.half(seq) {
				m.failPeer(r.p, fmt.Errorf("sm: from rank %d: corrupt ring: record word %#x at stream position %d", r.p.rank, seq, r.head))
				return ev
			}
			if seq>>metaKindShift == recShort {
				whole, ok := r.short(m, seq)
				if !ok {
					return ev
				}
				if whole {
					ev++
					if r.p.err != nil {
						return ev
					}
				}
			}
			l = halfLine
		} else if l = r.full(m); l == 0 {
			return ev
		}
		r.head += uint64(l)
		if r.hoff += l; r.hoff == r.cap {
			r.hoff = 0
		}
		if l >= streamRecord || r.head-r.stored >= uint64(r.cap/4) {
			r.release()
		}
		if r.inFrame && r.got == len(r.dst) {
			d := r.dst
			r.dst, r.inFrame = nil, false
			h.End(r.p.rank, &r.hdr, d)
			ev++
			if r.p.err != nil {
				return ev
			}
		}
	}
	if r.head != r.stored {
		r.release()
	}
	if r.head == h0 && r.inFrame {
		m.stalled(r.p)
	}
	return ev
}

// short takes in the short record at the head, whose word is w: a whole
// frame, handed over at once when the handler takes whole frames (whole:
// delivered), else begun here and ended by poll. ok is false when it
// failed the peer (a malformed record, a frame refused).
func (r *inRing) short(m *module, w uint64) (whole, ok bool) {
	hl, n := int(w>>metaHdrShift&0xff), int(w>>shortSeqBits&0xff)
	if r.inFrame || hl > btl.HeaderSize || hl+n > shortBody {
		m.failPeer(r.p, fmt.Errorf("sm: from rank %d: malformed short record: header %d bytes, payload %d (a frame half received: %v)", r.p.rank, hl, n, r.inFrame))
		return false, false
	}
	body := r.data[r.hoff+8 : r.hoff+halfLine]
	r.hdr = btl.Header{}
	copy(r.hdr[:hl], body)
	if m.whole != nil {
		if !m.whole.Whole(r.p.rank, &r.hdr, body[hl:hl+n]) {
			m.failPeer(r.p, fmt.Errorf("sm: from rank %d: frame of %d bytes refused: protocol error", r.p.rank, n))
			return false, false
		}
		return true, true
	}
	r.dst = m.env.Handler.Begin(r.p.rank, &r.hdr, n)
	if len(r.dst) != n {
		m.failPeer(r.p, fmt.Errorf("sm: from rank %d: frame of %d bytes refused (%d bytes given): protocol error", r.p.rank, n, len(r.dst)))
		return false, false
	}
	r.got = copy(r.dst, body[hl:hl+n])
	r.inFrame = true
	return false, true
}

// full takes in the record at the head, whose seq word poll has checked,
// and returns its length, or 0 when it failed the peer (a malformed
// record).
func (r *inRing) full(m *module) int {
	h := m.env.Handler
	meta := binary.LittleEndian.Uint64(r.data[r.hoff+offRecMeta:])
	// The record's body ends at the ring's end or a stride on.
	body := r.data[r.hoff+offRecBody : min(r.hoff+r.rec, r.cap)]
	n := 0
	switch kind := meta >> metaKindShift; {
	case kind == recSkip:
		return r.cap - r.hoff
	case kind == recFirst && !r.inFrame:
		total, hl := meta&metaLenMask, int(meta>>metaHdrShift&0xff)
		if total > maxFrame || hl > btl.HeaderSize {
			m.failPeer(r.p, fmt.Errorf("sm: from rank %d: malformed record: frame length %d, header %d bytes", r.p.rank, total, hl))
			return 0
		}
		pl := min(int(total), r.rec-offRecBody-hl)
		if n = hl + pl; recLen(n) > len(body)+offRecBody {
			m.failPeer(r.p, fmt.Errorf("sm: from rank %d: malformed record: %d bytes past the ring's end", r.p.rank, r.hoff+recLen(n)-r.cap))
			return 0
		}
		r.hdr = btl.Header{}
		copy(r.hdr[:hl], body)
		r.dst = h.Begin(r.p.rank, &r.hdr, int(total))
		if uint64(len(r.dst)) != total {
			m.failPeer(r.p, fmt.Errorf("sm: from rank %d: frame of %d bytes refused (%d bytes given): protocol error", r.p.rank, total, len(r.dst)))
			return 0
		}
		r.got = copy(r.dst, body[hl:n])
		r.inFrame = true
	case kind == recCont && r.inFrame:
		n = int(meta & metaLenMask)
		if n == 0 || n > len(r.dst)-r.got || recLen(n) > len(body)+offRecBody {
			m.failPeer(r.p, fmt.Errorf("sm: from rank %d: malformed record: %d payload bytes with %d of the frame left and %d in the ring", r.p.rank, n, len(r.dst)-r.got, len(body)))
			return 0
		}
		r.got += copy(r.dst[r.got:], body[:n])
	default:
		m.failPeer(r.p, fmt.Errorf("sm: from rank %d: malformed record: kind %d (a frame half received: %v)", r.p.rank, kind, r.inFrame))
		return 0
	}
	return recLen(n)
}

// release hands what the consumer has read back to the producer, and
// wakes the producer if it sleeps on a full ring (Dekker with
// outRing.room: head is stored here, the flag read after).
func (r *inRing) release() {
	atomic.StoreUint64(r.headp, r.head)
	r.stored = r.head
	if atomic.LoadUint32(r.fullp) != 0 {
		atomic.StoreUint32(r.fullp, 0)
		if r.p.seg != nil {
			wake(r.p.seg.ctl)
		}
	}
}

// ready reports whether a record waits in the ring.
func (r *inRing) ready() bool {
	w := atomic.LoadUint64(u64(r.data, r.hoff+offRecSeq))
	return w == r.head+1 || r.half(w)
}

// half reports whether w is the word of a short record or a pad at the
// head.
func (r *inRing) half(w uint64) bool {
	k := w >> metaKindShift
	return (k == recShort || k == recPad) && w&(1<<shortSeqBits-1) == shortSeq(r.head)
}

// outRing is the producer's side: this rank writes to peer p. It is the
// btl.Endpoint for p.
type outRing struct {
	ring
	m    *module
	p    *peer
	tail uint64 // stream position of the next record
	toff int    // tail's offset in data
	// zeroed: the first word of every half line from tail up to this stream
	// position is 0, zoff its offset in data (advance).
	zeroed uint64
	zoff   int
	head   uint64  // the consumer's head as last read
	headp  *uint64 // the consumer's head
	fullp  *uint32
	rctl   []byte // the receiver's control area, for wake-ups
	// The receiver's doorbell: its mode word and this sender's word and bit.
	bellOn *uint32
	bell   *uint64
	bit    uint64

	// polls: the module's poll count at this ring's last demotion (publish).
	polls uint64

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
	o.toff = int(o.tail % uint64(o.cap))
	o.zeroed, o.zoff = o.tail, o.toff
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

var _ btl.Immediate = (*outRing)(nil)

// SendNow writes a frame that fits one record straight into the ring when
// nothing waits ahead of it and the ring has room before its end; else it
// refuses (Send queues the frame, and push raises the full flag or
// writes the skip record first).
func (o *outRing) SendNow(h *btl.Header, payload []byte) bool {
	if o.err != nil || len(o.queue) > 0 {
		return false
	}
	hl := significant(h)
	switch {
	case hl+len(payload) <= shortBody:
		if !o.fits(halfLine) {
			return false
		}
		o.putShort(h[:hl], payload)
	case hl+len(payload) > o.rec-offRecBody:
		return false
	default:
		pad := o.toff % lineSize // a half line to pass first, or 0
		l := recLen(hl + len(payload))
		if o.toff+pad+l > o.cap || !o.fits(pad+l) {
			return false
		}
		if pad != 0 {
			o.pad()
		}
		o.terminate(l)
		b := o.data[o.toff+offRecBody : o.toff+l]
		copy(b, h[:hl])
		copy(b[hl:], payload)
		o.publish(l, firstMeta(hl, len(payload)))
	}
	o.doorbell()
	wake(o.rctl)
	return true
}

// pad publishes a pad record at the tail, which is on a half line, so that
// the full record to follow starts on a line; the caller has checked the
// room.
func (o *outRing) pad() {
	o.terminate(halfLine)
	atomic.StoreUint64(u64(o.data, o.toff+offRecSeq), recPad<<metaKindShift|shortSeq(o.tail))
	o.advance(halfLine)
}

// putShort writes a frame of hdr and payload, shortBody bytes at most
// together, as a short record at the tail (which always fits before the
// ring's end: the tail is on a half line) and publishes it; the caller
// has checked the room.
func (o *outRing) putShort(hdr, payload []byte) {
	o.terminate(halfLine)
	b := o.data[o.toff+8 : o.toff+halfLine]
	copy(b, hdr)
	copy(b[len(hdr):], payload)
	atomic.StoreUint64(u64(o.data, o.toff+offRecSeq), shortWord(o.tail, len(hdr), len(payload)))
	o.advance(halfLine)
}

// next returns the length of the next record of queue[0] (its header
// length hl and payload n), or, when it does not fit before the ring's
// end, skip: the length of the skip record that goes first.
func (o *outRing) next() (l, hl, n int, skip bool) {
	f := o.queue[0]
	if !o.started {
		if hl = significant(&f.Hdr); hl+len(f.Payload) <= shortBody {
			return halfLine, hl, len(f.Payload), false
		}
	}
	n = min(len(f.Payload)-o.off, o.rec-offRecBody-hl)
	l = recLen(hl + n)
	if o.toff+l > o.cap {
		return o.cap - o.toff, hl, n, true
	}
	return l, hl, n, false
}

// nextLen is the length of next's record.
func (o *outRing) nextLen() int { l, _, _, _ := o.next(); return l }

// fits reports whether a record of l bytes fits at the tail, with the
// line after it free for the terminator, reloading the consumer's head
// only when the cached one says no.
func (o *outRing) fits(l int) bool {
	need := uint64(l + lineSize)
	if o.tail+need-o.head <= uint64(o.cap) {
		return true
	}
	o.head = atomic.LoadUint64(o.headp)
	return o.tail+need-o.head <= uint64(o.cap)
}

// room is fits that, before saying no, raises the full flag and looks
// once more, so that the consumer wakes this side when it frees space
// (Dekker with inRing.release).
func (o *outRing) room(l int) bool {
	if o.fits(l) {
		return true
	}
	atomic.StoreUint32(o.fullp, 1)
	return o.fits(l)
}

// terminate makes sure that the seq word where the record of l bytes at
// the tail will end, the next record's, is 0 when it is published: the
// consumer, once it has read this record, stops there until that one
// comes. Usually the word is 0 already (publish zeroes ahead); else this
// stores the 0, as the record's first store, so that its cache miss
// overlaps the record's own writes.
func (o *outRing) terminate(l int) {
	end := o.tail + uint64(l)
	if o.zeroed > end {
		return
	}
	next := o.toff + l
	if next == o.cap {
		next = 0
	}
	*u64(o.data, next+offRecSeq) = 0
	o.zeroed, o.zoff = end+halfLine, next+halfLine
	if o.zoff == o.cap {
		o.zoff = 0
	}
}

// publish makes the record of l bytes at the tail, its body written and
// terminated, visible: its meta word, then its seq word, which the
// consumer waits for; then advance.
//
// A record of more than a line is then demoted to the shared cache
// (CLDEMOTE, where the CPU has it) when this rank has polled since its
// last demotion, that is when it waited in between, as a ping-pong does:
// the consumer, which reads the first line when it sees the seq word and
// the others after, then finds them in the last-level cache instead of
// fetching each from this core. On the lent 32-core Intel host np=2
// latency at 64 B-1 KiB went 0.54-0.96 -> 0.49-0.75 µs with every record
// demoted, and the message rate fell to half at 64 B-1 KiB (a demotion
// costs the sender ~15-20 ns a line; a streaming sender has no wait to
// hide it in): hence only after a poll, which a stream of Isends makes
// only once a window (bench/results/sm-cldemote-2026-11-28-32core.txt).
// And only up to demoteMax, a record of an eager message of the default
// limit: in two calls on the same host a ping-pong of 2-16 KiB with such
// records demoted took 10-19% less time than with only those of up to 1
// KiB (16 KiB: 4.40 -> 3.85 and 4.49 -> 3.95 µs; Open MPI 5.32 and 5.25),
// osu_bw within its spreads (bench/results/sm-cldemote-2026-11-28-32core-b.txt);
// demoting at the next poll instead, also tried there, gained less
// latency. The 64 KiB fragments of the ring's rendezvous (where single
// copy is refused) were never measured either way.
func (o *outRing) publish(l int, meta uint64) {
	binary.LittleEndian.PutUint64(o.data[o.toff+offRecMeta:], meta)
	atomic.StoreUint64(u64(o.data, o.toff+offRecSeq), o.tail+1)
	if canDemote && l > lineSize && l <= demoteMax && o.m.polls != o.polls {
		o.polls = o.m.polls
		demote(unsafe.Pointer(&o.data[o.toff]), l)
	}
	o.advance(l)
}

// demoteMax is the longest record publish demotes: an eager message of
// the default limit with its headers.
const demoteMax = defaultEager + 2*lineSize

// advance moves the tail past the record of l bytes just published and,
// off the way of this message, zeroes the first word of every half line
// (where a record may start) up to zeroAhead bytes past the new tail (as
// far as the consumer has handed space back), so that the records to come
// find their terminators in place and their lines in this side's cache:
// stored on the way of every message, the terminator's miss cost 0.06 µs
// of latency at 8 bytes (measured on the 16-core device host).
func (o *outRing) advance(l int) {
	o.tail += uint64(l)
	if o.toff += l; o.toff == o.cap {
		o.toff = 0
	}
	for lim := min(o.tail+zeroAhead, o.head+uint64(o.cap)); o.zeroed < lim; o.zeroed += halfLine {
		*u64(o.data, o.zoff+offRecSeq) = 0
		if o.zoff += halfLine; o.zoff == o.cap {
			o.zoff = 0
		}
	}
}

// zeroAhead is how far past its tail the producer keeps half lines
// zeroed: 64 one-line records.
const zeroAhead = 4096

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
			l, hl, n, skip := o.next()
			short := !o.started && hl+len(f.Payload) <= shortBody
			if !short && o.toff%lineSize != 0 {
				// A full record (or skip) starts on a line.
				if !o.room(halfLine) {
					return done
				}
				o.pad()
				published = true
				continue
			}
			if !o.room(l) {
				return done
			}
			if short {
				o.putShort(f.Hdr[:hl], f.Payload)
				published = true
				break
			}
			o.terminate(l)
			if skip {
				// The record does not fit before the ring's end: the
				// rest of this lap stays unused.
				o.publish(l, recSkip<<metaKindShift)
				published = true
				continue
			}
			b := o.data[o.toff+offRecBody : o.toff+l]
			var meta uint64
			if !o.started {
				meta = firstMeta(hl, len(f.Payload))
				copy(b, f.Hdr[:hl])
				o.started = true
			} else {
				meta = recCont<<metaKindShift | uint64(n)
			}
			o.off += copy(b[hl:], f.Payload[o.off:o.off+n])
			o.publish(l, meta)
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
