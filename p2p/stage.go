package p2p

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/internal/params"
)

// Staging moves device memory over a route that no RMA reaches (doc.go,
// "Protocols"). The sender copies the accepted part of its buffer to host
// memory chunk by chunk (btl.Stager, the GPU's copy engines) and sends each
// chunk as a DATA frame whose sreq field carries the chunk's offset, with
// up to stageDepth chunks in flight: chunk k+1 is being copied while chunk
// k is on the wire, and all of a rank's staged sends together within
// stageMax bytes (later messages wait for earlier ones' chunks). The
// receiver lands each chunk in host memory and copies it to its device
// buffer; a host receiver takes the chunks straight into its buffer. A
// side completes when every byte is in place.
//
// A message up to the route's eager limit (and GORUN_P2P_DEVICE_EAGER)
// skips the rendezvous, whose round trip dominated small messages
// (bench/results/gpu-staged-2026-11-23-h200x2.txt: 0.32-0.45x of host
// memory over TCP below 64 KiB): the sender copies it to a pinned buffer
// of the pool (on the GPU's eager stream, while the call returns) and
// sends it as an EAGER frame once the copy is done, the route's later
// frames held behind it (eagerStaged); the receiver lands it in host
// memory (pinned when the posted buffer is device memory) and deliver
// copies it to a device buffer through the pipeline's own receive path. A
// copy that fails sends an empty EAGER with fFail, so that the receive
// that matches it fails too instead of waiting.

// pDeviceEager bounds the eager staged send; the route's eager limit
// bounds it too (tcp 64 KiB, sm 16 KiB). 0 turns it off: every staged
// device message goes by rendezvous, as before issue 10.
var pDeviceEager = params.Int("GORUN_P2P_DEVICE_EAGER", 64<<10,
	"largest GPU message sent eagerly through host memory (copied to a pinned buffer at once, one frame, no rendezvous) over routes without GPU RMA; the route's eager limit caps it; 0: always by rendezvous")

// stageDepth is how many chunks a sender has between its device and the
// wire: two would overlap one copy with one send; four keep the copy
// engines busy while the transport drains a burst.
const stageDepth = 4

// pStageInflight bounds the bytes of all of a rank's staged sends between
// its devices and the wire together (0: no bound beyond stageDepth chunks
// a message). A window of large sends otherwise has every message's chunks
// in flight at once, each in its own pinned buffer, more than the caches
// hold.
var pStageInflight = params.Int("GORUN_P2P_STAGE_INFLIGHT", 4<<20,
	"most bytes of a rank's staged GPU sends (device to pinned host memory to the wire) in flight together, at least two chunks; 0 or less: no bound but 4 chunks a message")

// staged is one request's staging state.
type staged struct {
	r     *Request
	e     *Engine // r's, kept: r is cleared when released
	st    btl.Stager
	peer  int
	total int    // accepted length
	next  int    // sender: next offset to copy
	done  int    // bytes over (sent, copied to the device, or dropped after a failure)
	rreq  uint64 // sender: the receiver's request, named by DATA frames
	slots []*stageSlot
	// err is the transfer's failure; aborted: no more chunks will come
	// (receiver: the sender said so or died) or the receiver was told
	// (sender). The request completes when its chunks have all settled,
	// so that no copy touches the user's buffer afterwards.
	err     error
	aborted bool
	abortF  btl.Frame // sender: the empty DATA with fFail
}

// stageSlot is one chunk in flight: its copy, then (sender) its frame.
type stageSlot struct {
	sg   *staged
	op   btl.StageOp
	f    btl.Frame
	off  int
	busy bool
	out  int // sender: the bytes this chunk counts in the engine's stageOut
}

// stagerFor returns the module that stages memory of kind k, or nil.
func (e *Engine) stagerFor(k btl.MemKind) btl.Stager {
	if e.stager != nil && e.stager.StageKinds().Has(k) {
		return e.stager
	}
	return nil
}

func newStaged(r *Request, st btl.Stager, peer, total int) *staged {
	sg := &staged{r: r, e: r.e, st: st, peer: peer, total: total}
	sg.abortF.Owner = sg
	r.sg = sg
	return sg
}

// slot returns a free slot, making one if all are busy (a receiver cannot
// refuse a chunk; a sender never asks for more than stageDepth).
func (sg *staged) slot() *stageSlot {
	for _, s := range sg.slots {
		if !s.busy {
			s.busy = true
			return s
		}
	}
	s := &stageSlot{sg: sg, busy: true}
	s.op.Owner, s.f.Owner = s, s
	sg.slots = append(sg.slots, s)
	return s
}

// inFlight counts the chunks being copied or sent.
func (sg *staged) inFlight() int {
	n := 0
	for _, s := range sg.slots {
		if s.busy {
			n++
		}
	}
	return n
}

// settle completes the request once nothing of it is in flight and it is
// over: all bytes done, or failed (a receiver also waits for the chunks
// still coming unless the sender aborted).
func (sg *staged) settle() {
	r := sg.r
	if r.done.Load() || sg.inFlight() > 0 || sg.abortF.Payload != nil {
		return
	}
	over := sg.done >= sg.total
	if sg.err != nil && (!r.recv || sg.aborted) {
		over = true
	}
	if over {
		// Out of the queue of senders waiting for a pinned buffer (a
		// failed one may still be there): once complete, r may be
		// released and serve another operation, which kick must not
		// pump or settle as this one.
		e := r.e
		e.stageQ = slices.DeleteFunc(e.stageQ, func(q *staged) bool { return q == sg })
		if !r.recv {
			e.stageSends = slices.DeleteFunc(e.stageSends, func(q *staged) bool { return q == sg })
		}
		e.forget(r)
		r.complete(sg.err)
	}
}

// fail records the transfer's failure. A sender tells the receiver (an
// empty DATA with fFail) unless the peer is gone or was told already.
func (sg *staged) fail(err error) {
	if sg.err == nil {
		sg.err = err
	}
	r := sg.r
	if !r.recv && !sg.aborted {
		sg.aborted = true
		e := r.e
		h := header{kind: kData, flags: fFail, ctx: r.ctx, tag: int32(r.tag), rreq: sg.rreq}
		h.encode(&sg.abortF.Hdr)
		sg.abortF.Payload = []byte{} // non-nil: in flight until FrameDone
		r.frames++
		if rt, rerr := e.route(sg.peer); rerr != nil || e.failed[sg.peer] != nil || rt.ep.Send(&sg.abortF) != nil {
			r.frames--
			sg.abortF.Payload = nil
		}
	}
	sg.settle()
}

// gone ends a transfer whose peer failed or whose engine closed: no chunk
// will come or go any more.
func (sg *staged) gone(err error) {
	if sg.r.sg != sg {
		return // over long ago: its request was released (and may serve another operation)
	}
	if sg.err == nil {
		sg.err = err
	}
	sg.aborted = true
	sg.settle()
}

// FrameDone implements btl.Completer for the sender's abort frame.
func (sg *staged) FrameDone(f *btl.Frame, err error) {
	sg.r.frames--
	f.Payload = nil
	sg.settle()
}

// pump (sender) starts copying chunks until stageDepth are in flight or
// the message is all under way.
func (sg *staged) pump() {
	r, e := sg.r, sg.e
	chunk := sg.st.StageChunk()
	for sg.next < sg.total && sg.err == nil && !r.done.Load() {
		busy := sg.inFlight()
		if busy >= stageDepth {
			return
		}
		n := min(chunk, sg.total-sg.next)
		// Within the rank's bound on staged bytes in flight (two chunks
		// at least: one copied while the other is on the wire), a pinned
		// buffer from the pool.
		var buf []byte
		if e.stageMax <= 0 || e.stageOut == 0 || e.stageOut+n <= max(e.stageMax, 2*chunk) {
			buf = sg.st.HostBuffer(int(r.mem.Device), n)
		}
		if buf == nil {
			// Over the bound, or the pool is spent: go on when a chunk
			// is over or a buffer comes back (this send's own FrameDone,
			// else kick's, from stageQ).
			if busy == 0 {
				e.stageQ = append(e.stageQ, sg)
			}
			return
		}
		s := sg.slot()
		s.off = sg.next
		s.out = n
		e.stageOut += n
		sg.next += n
		s.op.Dev = r.mem.Slice(s.off, s.off+n)
		s.op.Host = buf
		s.op.ToHost = true
		r.frames++
		if err := sg.st.Stage(&s.op); err != nil {
			r.frames--
			s.free()
			sg.fail(fmt.Errorf("send to rank %d: stage %v to host: %w", sg.peer, s.op.Dev, err))
			return
		}
	}
}

// free releases the slot's host buffer.
func (s *stageSlot) free() {
	s.sg.st.ReleaseHost(s.op.Host)
	s.drop()
}

// drop frees the slot but leaves its host buffer out of the pool: a
// transport may still write a frame's rest into it (PeerFailed).
func (s *stageSlot) drop() {
	s.uncount()
	s.op.Host, s.f.Payload = nil, nil
	s.busy = false
}

// uncount takes a sender's chunk out of the engine's bytes in flight.
func (s *stageSlot) uncount() {
	s.sg.e.stageOut -= s.out
	s.out = 0
}

// kick resumes senders that waited for a pinned buffer, while buffers come.
func (e *Engine) kick() {
	if e.closed {
		return // the transports are closed: no copy or frame may start
	}
	for len(e.stageQ) > 0 {
		sg := e.stageQ[0]
		e.stageQ = e.stageQ[1:]
		if sg.r.sg != sg || sg.r.done.Load() {
			continue // over already (gone): its request may serve another operation now
		}
		before := len(e.stageQ)
		sg.pump()
		sg.settle()
		if n := len(e.stageQ); n > before {
			// It queued itself again (the pool is still spent, or the
			// bound still full): back at the head, so that senders
			// resume in the order they came.
			copy(e.stageQ[1:], e.stageQ[:n-1])
			e.stageQ[0] = sg
			return
		}
	}
}

// releaseStaged ends the staged sends to peer, queued or under way, and
// takes their chunks out of the rank's bytes in flight (the peer failed:
// a transport may hold its frames until it notices, and the other peers'
// sends must not wait for them).
func (e *Engine) releaseStaged(peer int, err error) {
	for _, sg := range slices.Clone(e.stageSends) { // gone, settling sg, takes it out of stageSends
		if sg.peer != peer {
			continue
		}
		for _, s := range sg.slots {
			s.uncount()
		}
		sg.gone(err)
	}
}

// StageDone implements btl.StageCompleter. Sender: the chunk is in host
// memory; send it. Receiver: the chunk is on the device.
func (s *stageSlot) StageDone(op *btl.StageOp, err error) {
	sg := s.sg
	r := sg.r
	e := r.e
	r.frames--
	defer e.kick()
	if r.done.Load() {
		s.free()
		if r.pooled && r.frames == 0 {
			r.reset()
		}
		return
	}
	n := len(op.Host)
	if err != nil || sg.err != nil || !op.ToHost {
		s.free()
		if r.recv || err != nil {
			sg.done += n
		}
		if err != nil {
			sg.fail(err)
		}
		sg.settle()
		return
	}
	h := header{kind: kData, ctx: r.ctx, tag: int32(r.tag), length: uint64(n), rreq: sg.rreq, sreq: uint64(s.off)}
	h.encode(&s.f.Hdr)
	s.f.Payload = op.Host
	if err := e.sendCtl(sg.peer, r, &s.f); err != nil {
		s.free()
		sg.gone(err) // the transport or the peer failed: nobody to tell
	}
}

// FrameDone implements btl.Completer for a sender's chunk: its host buffer
// is free again.
func (s *stageSlot) FrameDone(f *btl.Frame, err error) {
	sg := s.sg
	r := sg.r
	r.frames--
	n := len(s.op.Host)
	s.free()
	defer r.e.kick()
	if r.done.Load() {
		if r.pooled && r.frames == 0 {
			r.reset()
		}
		return
	}
	if err != nil {
		sg.gone(err)
		return
	}
	sg.done += n
	sg.pump()
	sg.settle()
}

// landing (receiver) returns host memory for an arriving chunk of n bytes
// at off.
func (sg *staged) landing(cur *inflight, off, n int) []byte {
	s := sg.slot()
	s.off = off
	if s.op.Host = sg.st.HostBuffer(int(sg.r.mem.Device), n); s.op.Host == nil {
		s.op.Host = make([]byte, n) // a receiver cannot refuse a chunk
	}
	cur.stage = s
	return s.op.Host
}

// landed (receiver) copies an arrived chunk to the device, or drops it
// after a failure.
func (sg *staged) landed(s *stageSlot) {
	r := sg.r
	n := len(s.op.Host)
	if sg.err != nil {
		s.free()
		sg.done += n
		sg.settle()
		return
	}
	s.op.Dev = r.mem.Slice(s.off, s.off+n)
	s.op.ToHost = false
	r.frames++
	if err := sg.st.Stage(&s.op); err != nil {
		r.frames--
		s.free()
		sg.done += n
		sg.fail(fmt.Errorf("receive from rank %d: stage to %v: %w", sg.peer, s.op.Dev, err))
	}
}

// eagerStaged sends the device memory m, at most the route's eager limit,
// as one EAGER frame (doc.go, "Protocols"): its copy to host memory is
// queued on the GPU's eager stream (btl.StageOp.Eager) and the frame goes
// when the copy is done. Until then the frame is held at the route
// (hold), and every frame the receiver matches in order that the
// route gets meanwhile is held behind it (non-overtaking), so that a
// window of sends queues its copies back to back instead of waiting for
// each (a small copy's launch and wait took ~9 µs on the lent hosts, the
// whole cost of a staged message below 64 KiB). On 2 H100 over TCP the
// osu bw of 16 B-16 KiB rose 1.15-1.36x (latency unchanged), to 0.45-0.65x
// of host memory over the same TCP
// (bench/results/gpu-staged-async-2026-11-26-h100x2.txt); with btl/cuda
// issuing a window's copies in one batch, 0.73-1.06x at 1 B-16 KiB (two
// calls, bench/results/gpu-stage-batch-2026-11-27.txt). A copy that fails sends
// an empty EAGER with fFail, in its place, and fails r with the copy's
// error.
func (e *Engine) eagerStaged(r *Request, rt *route, st btl.Stager, m btl.Mem) error {
	hs := &heldSend{r: r, f: &r.data}
	h := header{kind: kEager, ctx: r.ctx, tag: int32(r.tag), length: uint64(m.N)}
	h.encode(&r.data.Hdr)
	if m.N == 0 {
		r.data.Payload = nil
		if err := e.postMatched(rt, r, &r.data); err != nil {
			return fmt.Errorf("send to rank %d: %w", r.peer, err)
		}
		return nil
	}
	buf := st.HostBuffer(int(m.Device), m.N)
	if buf == nil {
		buf = make([]byte, m.N) // the pool is spent: a sender of this path does not wait
	}
	r.data.Payload = buf
	r.bounce = buf // FrameDone gives it back
	hs.op = btl.StageOp{Dev: m, Host: buf, ToHost: true, Eager: true, Owner: hs}
	e.hold(rt, hs)
	if err := st.Stage(&hs.op); err != nil {
		hs.StageDone(&hs.op, err)
	}
	return nil
}

// heldSend is a send whose frame (EAGER or RTS) waits at its route behind
// an eager staged send's copy, or is that send.
type heldSend struct {
	r     *Request
	f     *btl.Frame
	ready bool        // its frame may go: a host send's, or a copy that ended
	ended bool        // failed (fail): a StageDone after that changes nothing
	op    btl.StageOp // an eager staged send's copy
}

// hold queues hs's frame at rt, counted in flight (r.frames) from now:
// r completes only once the frame has gone and is done, or failed.
func (e *Engine) hold(rt *route, hs *heldSend) {
	hs.r.frames++
	rt.held = append(rt.held, hs)
}

// StageDone implements btl.StageCompleter for an eager staged send: its
// bytes are in host memory, or the copy failed (then an empty EAGER with
// fFail goes in its place). The route's frames that are ready go.
func (hs *heldSend) StageDone(op *btl.StageOp, err error) {
	if hs.ended {
		return // dropped at Close, the stager's copies ended first (dropHeld)
	}
	r := hs.r
	e := r.e
	dev := op.Dev
	hs.op = btl.StageOp{}
	hs.ready = true
	if err != nil {
		e.stager.ReleaseHost(r.bounce)
		r.bounce = nil
		r.data.Payload = nil
		var h header
		h.decode(&r.data.Hdr)
		h.flags |= fFail
		h.encode(&r.data.Hdr)
		r.devErr = fmt.Errorf("send to rank %d: copy %v to host memory: %w", r.peer, dev, err)
	}
	rt := e.routes[r.peer] // the route r was held at (routes are never replaced)
	if e.closed || e.failed[r.peer] != nil {
		// The route's frames were failed when the peer failed (or the
		// engine closed) except this one, whose copy was running.
		rt.held = slices.DeleteFunc(rt.held, func(x *heldSend) bool { return x == hs })
		hs.fail(cmp.Or(e.failed[r.peer], ErrClosed))
		return
	}
	e.flushHeld(rt)
}

// flushHeld sends the route's held frames that are ready, in order, up to
// the first whose copy still runs.
func (e *Engine) flushHeld(rt *route) {
	for len(rt.held) > 0 && rt.held[0].ready {
		hs := rt.held[0]
		rt.held[0] = nil
		rt.held = rt.held[1:]
		if err := rt.ep.Send(hs.f); err != nil {
			hs.fail(fmt.Errorf("send to rank %d: %w", hs.r.peer, err))
		}
	}
	if len(rt.held) == 0 {
		rt.held = nil
	}
}

// dropHeld fails the route's held frames (its peer failed, or the engine
// closed: all) except, unless all, those whose copy still runs: their
// StageDone fails them, once the copy no longer touches the sender's
// buffer. (A closed engine's stager has ended its copies first.)
func (e *Engine) dropHeld(rt *route, err error, all bool) {
	keep := rt.held[:0]
	for _, hs := range rt.held {
		if !hs.ready && !all {
			keep = append(keep, hs)
			continue
		}
		hs.fail(err)
	}
	clear(rt.held[len(keep):])
	rt.held = keep
}

// fail ends a held send whose frame will not go: what the frame held
// goes back (the eager copy's buffer; an RTS's registration and its entry
// among the sends) and r completes with err.
func (hs *heldSend) fail(err error) {
	r := hs.r
	e := r.e
	hs.ended = true
	r.frames--
	hs.f.Payload = nil
	if r.bounce != nil {
		e.stager.ReleaseHost(r.bounce)
		r.bounce = nil
	}
	if hs.f == &r.ctl && e.sends[r.id] == r {
		e.unsend(r)
	}
	r.complete(err)
}

// landEager returns host memory for an eager message of n bytes matched
// by the device receive r: pinned from the pool, so that the copy to the
// device is the copy engines' (deliver gives it back), or plain memory.
func (e *Engine) landEager(r *Request, n int) []byte {
	if n > 0 {
		if st := e.stagerFor(r.mem.Kind); st != nil {
			if b := st.HostBuffer(int(r.mem.Device), n); b != nil {
				return b
			}
		}
	}
	return make([]byte, n)
}

// deliver hands a whole eager message in host memory (data) to r: copied
// into a host buffer, or staged to a device buffer, or refused when no
// module stages device memory. r completes now or when the copy is done.
func (e *Engine) deliver(r *Request, data []byte) {
	if r.mem.Kind == btl.MemHost {
		e.fill(r, data)
		r.complete(nil)
		return
	}
	st := e.stagerFor(r.mem.Kind)
	if st == nil {
		r.devErr = fmt.Errorf("receive from %w", noPathErr(r.st.Source, r.mem, e.routes[r.st.Source]))
		r.complete(nil)
		return
	}
	n := len(data)
	if n > r.mem.Len() {
		r.trunc = n
		n = r.mem.Len()
		r.st.Bytes = n
	}
	if n == 0 {
		st.ReleaseHost(data) // pinned by landEager, or plain: left alone
		r.complete(nil)
		return
	}
	sg := newStaged(r, st, r.st.Source, n)
	s := sg.slot()
	s.op.Host = data[:n] // from landEager (pinned: free gives it back) or plain memory (ReleaseHost leaves it alone)
	s.op.Eager = true    // not behind the pipeline's chunks
	sg.landed(s)
}

// stageSend answers a plain CTS for a send from device memory: stage it
// (releasing an RMA registration the receiver did not use), or, with no
// module to stage it, tell the receiver (DATA with fNoPath) and fail.
func (e *Engine) stageSend(r *Request, dst int, cts *header) {
	delete(e.sends, cts.sreq)
	if x := r.x; x != nil {
		r.x = nil
		x.release()
		if !x.busy {
			x.free()
		}
	}
	accept := int(cts.length)
	if st := e.stagerFor(r.mem.Kind); st != nil && accept > 0 {
		sg := newStaged(r, st, dst, accept)
		sg.rreq = cts.rreq
		e.stageSends = append(e.stageSends, sg)
		sg.pump()
		return
	}
	d := header{kind: kData, ctx: r.ctx, tag: int32(r.tag), rreq: cts.rreq}
	var nopath error
	if accept > 0 {
		d.flags = fNoPath
		nopath = fmt.Errorf("send to %w", noPathErr(dst, r.mem, e.routes[dst]))
	}
	d.encode(&r.data.Hdr)
	r.data.Payload = nil
	if err := e.sendCtl(dst, r, &r.data); err != nil {
		r.complete(err)
		return
	}
	if nopath != nil {
		r.complete(nopath) // FrameDone of the empty DATA finds it done
	}
}
