package mpi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/gorun/gorun/internal/nap"
	"github.com/gorun/gorun/internal/params"
	"github.com/gorun/gorun/p2p"
)

// The window's wire protocol, on the window's private context (its
// communicator's point-to-point context; collectives use their own):
//
//	tag 1  request   origin -> target  32-byte header (below)
//	tag 2  data      origin -> target  the elements of a Put, an accumulate,
//	                                   or [value, compare] of a CompareAndSwap;
//	                                   sent right after its request
//	tag >= 16 reply  target -> origin  the tag the request named: Get data, the
//	                                   old values of a GetAccumulate, an empty
//	                                   grant (Lock) or acknowledgement (Unlock,
//	                                   Flush)
//
// Header: 0 kind | 1 op | 2 lock type | 3 flags | 4-7 reply tag |
// 8-15 displacement | 16-23 count (elements) | 24-31 zero.
//
// A target handles the requests of one origin in the order they were sent
// (the engine's non-overtaking order), so a reply to Unlock or Flush means
// every earlier operation of that origin is complete at the target.

const (
	winHdrLen   = 32
	winTagReq   = 1
	winTagData  = 2
	winTagReply = 16
	// winTagSpan bounds reply tags: winTagReply + seq % winTagSpan.
	winTagSpan = 1 << 24
)

type winKind uint8

const (
	wkPut winKind = iota + 1
	wkGet
	wkAcc
	wkGetAcc
	wkCAS
	wkLock
	wkUnlock
	wkFlush
)

func (k winKind) String() string {
	switch k {
	case wkPut:
		return "put"
	case wkGet:
		return "get"
	case wkAcc:
		return "accumulate"
	case wkGetAcc:
		return "get-accumulate"
	case wkCAS:
		return "compare-and-swap"
	case wkLock:
		return "lock"
	case wkUnlock:
		return "unlock"
	case wkFlush:
		return "flush"
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// Header flags. fFence marks a request of a fence epoch, counted for the
// next Fence; fStatus a Put or Accumulate whose origin waits for an
// acknowledgement (a dynamic window's: win_dynamic.go).
const (
	fFence  = 1
	fStatus = 2
)

type winHdr struct {
	kind  winKind
	op    opKind
	lock  LockType
	flags uint8
	tag   int
	disp  int64
	count int64
}

func (h *winHdr) encode(b []byte) {
	b = b[:winHdrLen]
	clear(b)
	b[0], b[1], b[2], b[3] = byte(h.kind), byte(h.op), byte(h.lock), h.flags
	binary.LittleEndian.PutUint32(b[4:], uint32(h.tag))
	binary.LittleEndian.PutUint64(b[8:], uint64(h.disp))
	binary.LittleEndian.PutUint64(b[16:], uint64(h.count))
}

func (h *winHdr) decode(b []byte) {
	h.kind, h.op, h.lock, h.flags = winKind(b[0]), opKind(b[1]), LockType(b[2]), b[3]
	h.tag = int(binary.LittleEndian.Uint32(b[4:]))
	h.disp = int64(binary.LittleEndian.Uint64(b[8:]))
	h.count = int64(binary.LittleEndian.Uint64(b[16:]))
}

var (
	pRMAPoll = params.Duration("GORUN_RMA_POLL", time.Millisecond,
		"longest interval between two polls of an idle window's service goroutine (the passive-target progress at a rank that makes no MPI call)")
	pRMAPollMin = params.Duration("GORUN_RMA_POLL_MIN", 20*time.Microsecond,
		"interval between polls of a window's service goroutine right after it handled a request; it doubles while idle, up to GORUN_RMA_POLL")
)

// post posts the receive of the next request; srv.mu is held (or the
// window is being made).
func (w *Win[T]) post() error {
	r, err := w.eng.Irecv(w.wc.ctx, p2p.AnySource, winTagReq, w.srv.hdr[:])
	if err != nil {
		return err
	}
	w.srv.req = r
	return nil
}

// serveLoop is the window's service goroutine: passive-target progress.
func (w *Win[T]) serveLoop() {
	defer close(w.srv.done)
	lo, hi := pRMAPollMin(), pRMAPoll()
	if hi < lo {
		hi = lo
	}
	d := lo
	for {
		select {
		case <-w.srv.stop:
			return
		default:
		}
		did := w.serve()
		w.srv.mu.Lock()
		dead := w.srv.dead != nil
		w.srv.mu.Unlock()
		if dead {
			return // the engine closed (Finalize): nothing more will come
		}
		if did {
			d = lo
		} else if d *= 2; d > hi {
			d = hi
		}
		nap.Sleep(d) // time.Sleep would take a millisecond (package nap)
	}
}

// serve handles the requests that have arrived and reaps finished
// replies; it reports whether it did anything. It returns at once when
// another goroutine is serving.
func (w *Win[T]) serve() bool { return w.serveAs(false) }

// quickData bounds the data of a request served from another call's wait
// (serveAs quick): eager on every transport, so that taking it does not
// wait for the origin.
const quickData = 4 << 10

// serveAs is serve; quick is how other blocked calls of the rank serve
// the window (the OnIdle hook): they poll no transport (their own wait
// does) and handle only requests that cannot keep them waiting, those
// without data or whose data has arrived and is small, leaving the rest
// to the window's server and to the window's own calls.
func (w *Win[T]) serveAs(quick bool) bool {
	s := &w.srv
	if !s.mu.TryLock() {
		return false
	}
	defer s.mu.Unlock()
	did := false
	keep := s.replies[:0]
	for _, p := range s.replies {
		done := p.r.Done()
		if !quick && !done {
			done, _, _ = p.r.Test()
		}
		if done {
			w.eng.Release(p.r)
			did = true
			continue
		}
		keep = append(keep, p)
	}
	clear(s.replies[len(keep):])
	s.replies = keep
	for s.req != nil && s.dead == nil {
		var ok bool
		var st p2p.Status
		var err error
		if quick {
			if ok = s.req.Done(); ok {
				st, err = s.req.Result()
				ok = err != nil || w.dataReady(st)
			}
		} else {
			ok, st, err = s.req.Test()
		}
		if !ok {
			break
		}
		did = true
		w.eng.Release(s.req)
		s.req = nil
		switch {
		case err == nil:
			src := w.wc.fromWorld(st.Source)
			if src < 0 || st.Bytes != winHdrLen {
				fmt.Fprintf(os.Stderr, "gorun: %s: dropped a malformed request (%d bytes from world rank %d)\n", w.name, st.Bytes, st.Source)
				break
			}
			var h winHdr
			h.decode(s.hdr[:])
			w.handle(src, &h)
		case errors.Is(err, p2p.ErrProcFailed):
			// A member failed: receives from AnySource fail until
			// acknowledged. Drop its locks, so that no survivor waits
			// for them forever, and go on.
			w.wc.AckFailed()
			w.dropFailed()
		default:
			s.dead = err
			return did
		}
		err = w.post()
		if err != nil && errors.Is(err, p2p.ErrProcFailed) {
			// A member failed since the last post (while a request was
			// handled): acknowledge it as above and post again, or the
			// service would end and this live rank stop answering.
			w.wc.AckFailed()
			w.dropFailed()
			err = w.post()
		}
		if err != nil {
			s.dead = err
			return did
		}
	}
	return did
}

// dataReady reports whether the request that arrived (st, its header in
// srv.hdr) can be handled without waiting: it has no data, or its data
// has arrived and is at most quickData bytes. srv.mu is held.
func (w *Win[T]) dataReady(st p2p.Status) bool {
	if st.Bytes != winHdrLen {
		return true // malformed: dropped at once
	}
	var h winHdr
	h.decode(w.srv.hdr[:])
	if h.kind != wkPut && h.kind != wkAcc && h.kind != wkCAS && (h.kind != wkGetAcc || h.op == opNoOp) {
		return true
	}
	ok, dst, err := w.eng.Iprobe(w.wc.ctx, st.Source, winTagData)
	return err != nil || (ok && dst.Bytes <= quickData)
}

// dropFailed releases the locks of failed members.
func (w *Win[T]) dropFailed() {
	s := &w.srv
	for _, r := range w.wc.GetFailed() {
		if s.excl == r {
			s.excl = -1
		}
		delete(s.shared, r)
		q := s.queue[:0]
		for _, l := range s.queue {
			if l.rank != r {
				q = append(q, l)
			}
		}
		s.queue = q
	}
	w.grantQueued()
}

// reply sends data (kept alive until sent) to rank dst with tag.
func (w *Win[T]) reply(dst, tag int, data []byte) {
	r, err := w.eng.Isend(w.wc.ctx, w.wc.world[dst], tag, data, false)
	if err != nil {
		return // dst failed: it sees that itself
	}
	w.srv.replies = append(w.srv.replies, pending{target: dst, r: r, keep: data})
}

// recvData receives the data message of a request from src into b; it
// fails when src failed or sent a message of another length.
func (w *Win[T]) recvData(src int, b []byte) error {
	r, err := w.eng.Irecv(w.wc.ctx, w.wc.world[src], winTagData, b)
	if err != nil {
		return err
	}
	w.await(r.Done)
	st, err := r.Result()
	w.eng.Release(r)
	if err == nil && st.Bytes != len(b) {
		err = fmt.Errorf("%d bytes of data, want %d", st.Bytes, len(b))
	}
	return err
}

// handle serves one request of rank src; srv.mu is held.
func (w *Win[T]) handle(src int, h *winHdr) {
	s := &w.srv
	var win []byte
	switch h.kind {
	case wkPut, wkGet, wkAcc, wkGetAcc, wkCAS:
		// The origin checked the range against the sizes it was given
		// (not on a dynamic window); check again, the request is a
		// peer's.
		if win = w.span(h); win == nil || (h.kind == wkCAS && h.count != 1) {
			w.refuse(src, h)
			if h.flags&fFence != 0 {
				s.fenceDone++
			}
			return
		}
	}
	switch h.kind {
	case wkPut:
		w.recvData(src, win)
	case wkGet:
		w.reply(src, h.tag, win)
	case wkAcc, wkGetAcc, wkCAS:
		n := len(win)
		if h.kind == wkCAS {
			n *= 2 // value, compare
		}
		var in []byte
		if h.kind != wkGetAcc || h.op != opNoOp {
			if cap(s.scratch) < n {
				s.scratch = make([]byte, n)
			}
			in = s.scratch[:n]
			if err := w.recvData(src, in); err != nil {
				// The origin failed (or sent another length): it is told
				// as for a refused operation, and the epoch counts it.
				w.answerRefused(src, h)
				if h.flags&fFence != 0 {
					s.fenceDone++
				}
				return
			}
		}
		var old []byte
		if h.kind != wkAcc {
			old = make([]byte, len(win))
		}
		// On a shared window other ranks apply accumulates straight into
		// this part (win_direct.go), under its lock: so does the server.
		w.lockPart(w.wc.rank)
		w.accumulate(h.kind, h.op, in, win, old)
		w.unlockPart(w.wc.rank)
		if old != nil {
			w.reply(src, h.tag, old)
		}
	case wkLock:
		if h.lock != LockExclusive && h.lock != LockShared {
			return
		}
		s.queue = append(s.queue, lockWait{rank: src, typ: h.lock, tag: h.tag})
		w.grantQueued()
	case wkUnlock:
		switch {
		case s.excl == src:
			s.excl = -1
		case s.shared[src] > 0:
			if s.shared[src]--; s.shared[src] == 0 {
				delete(s.shared, src)
			}
		}
		w.reply(src, h.tag, nil)
		w.grantQueued()
	case wkFlush:
		w.reply(src, h.tag, nil)
	default:
		fmt.Fprintf(os.Stderr, "gorun: %s: rank %d sent an unknown request (%v): dropped\n", w.name, src, h.kind)
		return
	}
	if h.flags&fStatus != 0 && (h.kind == wkPut || h.kind == wkAcc) {
		w.reply(src, h.tag, []byte{})
	}
	if h.flags&fFence != 0 {
		s.fenceDone++
	}
}

// grantQueued grants the queued locks that the current holders allow, in
// arrival order.
func (w *Win[T]) grantQueued() {
	s := &w.srv
	for len(s.queue) > 0 {
		l := s.queue[0]
		if s.excl >= 0 || (l.typ == LockExclusive && len(s.shared) > 0) {
			return
		}
		s.queue = s.queue[1:]
		if l.typ == LockExclusive {
			s.excl = l.rank
		} else {
			s.shared[l.rank]++
		}
		w.reply(l.rank, l.tag, nil)
	}
}

// accumulate applies the accumulate-class operation k (with op) to win,
// from in (a CompareAndSwap's value then compare; nil for NoOp), first
// copying win's bytes as they were into old unless old is nil.
func (w *Win[T]) accumulate(k winKind, op opKind, in, win, old []byte) {
	copy(old, win)
	if k == wkCAS {
		n := len(win)
		if string(win) == string(in[n:]) {
			copy(win, in[:n])
		}
		return
	}
	w.apply(op, in, win)
}

// apply does win = in op win, elementwise (Replace: win = in; NoOp:
// nothing). The origin checked that op is defined on T.
func (w *Win[T]) apply(k opKind, in, win []byte) {
	switch k {
	case opNoOp:
	case opReplace:
		copy(win, in)
	default:
		f, err := bind[T]("Accumulate", Op{kind: k, commutative: true})
		if err != nil {
			fmt.Fprintf(os.Stderr, "gorun: %s: %v: dropped\n", w.name, err)
			return
		}
		f.Apply(in, win)
	}
}

// await polls until cond holds, serving the window's requests meanwhile
// (unless the caller is the server itself): it spins with yields for a
// while, then sleeps in short steps. It never holds the engine's lock
// while it waits. cond must become true: every request it waits for
// completes, failed if its peer fails.
func (w *Win[T]) await(cond func() bool) {
	start := time.Time{}
	for i := 0; ; i++ {
		w.serve()
		w.eng.Progress()
		if cond() {
			return
		}
		if i < 64 {
			continue
		}
		if start.IsZero() {
			start = time.Now()
		}
		if time.Since(start) < 2*time.Millisecond {
			nap.Pass(i)
			continue
		}
		nap.Sleep(50 * time.Microsecond)
	}
}
