package mpi

import (
	"unsafe"

	"github.com/gorun/gorun/p2p"
)

// Put starts copying origin into target's part of the window, starting at
// element disp (MPI_Put). origin must stay untouched until the operation
// completes (Fence, Unlock, Flush). A target of ProcNull does nothing.
func (w *Win[T]) Put(origin []T, target, disp int) (err error) {
	defer w.failTo(&err)
	return w.start("Win.Put", wkPut, opNone, elemBytes(origin), nil, target, disp, len(origin))
}

// Get starts copying len(dst) elements of target's part of the window,
// from element disp, into dst (MPI_Get); dst holds them once the
// operation completes (Fence, Unlock, Flush).
func (w *Win[T]) Get(dst []T, target, disp int) (err error) {
	defer w.failTo(&err)
	return w.start("Win.Get", wkGet, opNone, nil, elemBytes(dst), target, disp, len(dst))
}

// Accumulate starts combining origin into target's window elements from
// disp: element i becomes origin[i] op element i (MPI_Accumulate), atomically
// per element with respect to every other accumulate on the window. op is a
// predefined operation defined on T, or Replace; user-defined operations
// are not allowed (as in MPI).
func (w *Win[T]) Accumulate(origin []T, target, disp int, op Op) (err error) {
	defer w.failTo(&err)
	const name = "Win.Accumulate"
	if err := w.checkOp(name, op, false); err != nil {
		return err
	}
	return w.start(name, wkAcc, op.kind, elemBytes(origin), nil, target, disp, len(origin))
}

// GetAccumulate starts an Accumulate of origin that also returns the
// target's elements as they were before it into result
// (MPI_Get_accumulate), atomically. With NoOp it is an atomic Get and
// origin may be nil; otherwise len(origin) must equal len(result).
func (w *Win[T]) GetAccumulate(origin, result []T, target, disp int, op Op) (err error) {
	defer w.failTo(&err)
	const name = "Win.GetAccumulate"
	if err := w.checkOp(name, op, true); err != nil {
		return err
	}
	var data []byte // NoOp sends none: the target receives none for it
	if op.kind != opNoOp {
		if len(origin) != len(result) {
			return errorf(ErrCount, name, "origin has %d elements and result %d: they must match", len(origin), len(result))
		}
		data = elemBytes(origin)
	}
	return w.start(name, wkGetAcc, op.kind, data, elemBytes(result), target, disp, len(result))
}

// FetchAndOp is GetAccumulate of one element (MPI_Fetch_and_op): *result
// receives the target's element before value op element.
func (w *Win[T]) FetchAndOp(value T, result *T, target, disp int, op Op) (err error) {
	defer w.failTo(&err)
	const name = "Win.FetchAndOp"
	if result == nil {
		return errorf(ErrBuffer, name, "nil result")
	}
	if err := w.checkOp(name, op, true); err != nil {
		return err
	}
	var data []byte
	if op.kind != opNoOp {
		data = elemBytes([]T{value})
	}
	return w.start(name, wkGetAcc, op.kind, data, elemBytes(unsafe.Slice(result, 1)), target, disp, 1)
}

// CompareAndSwap atomically replaces target's element disp with value if it
// equals compare, and returns the element as it was in *result
// (MPI_Compare_and_swap). Elements are compared by their bytes (as Open
// MPI and MPICH do: 0.0 and -0.0 differ, a NaN equals the same NaN).
func (w *Win[T]) CompareAndSwap(value, compare T, result *T, target, disp int) (err error) {
	defer w.failTo(&err)
	const name = "Win.CompareAndSwap"
	if result == nil {
		return errorf(ErrBuffer, name, "nil result")
	}
	return w.start(name, wkCAS, opNone, elemBytes([]T{value, compare}), elemBytes(unsafe.Slice(result, 1)), target, disp, 1)
}

// checkOp validates an accumulate's operation on T.
func (w *Win[T]) checkOp(name string, op Op, get bool) error {
	switch op.kind {
	case opReplace:
		return nil
	case opNoOp:
		if get {
			return nil
		}
		return errorf(ErrOp, name, "NoOp is for GetAccumulate and FetchAndOp (use Get)")
	case opUser:
		return errorf(ErrOp, name, "user-defined operation %q: one-sided accumulates take predefined operations only", op.name)
	}
	_, err := bind[T](name, op)
	return err
}

// start validates and starts one data operation: the request to target,
// the data (when data is not nil) and the receive of the reply (into
// reply, when not nil).
func (w *Win[T]) start(name string, k winKind, op opKind, data, reply []byte, target, disp, count int) error {
	_, err := w.issue(name, k, op, data, reply, target, disp, count, false)
	return err
}

// issue is start, and with user set (the request-based Rput, Rget and
// the rest) it also returns a Request that completes with the operation
// at the origin. w.mu is taken.
func (w *Win[T]) issue(name string, k winKind, op opKind, data, reply []byte, target, disp, count int, user bool) (*Request, error) {
	if err := w.live(name); err != nil {
		return nil, err
	}
	done := func() (*Request, error) {
		if !user {
			return nil, nil
		}
		return (&Request{c: w.wc, op: name, elem: 1}).started(nil), nil
	}
	if target == ProcNull {
		return done()
	}
	if target < 0 || target >= len(w.sizes) {
		return nil, errorf(ErrRank, name, "target rank %d is not in %s (size %d)", target, w.name, len(w.sizes))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	fence, err := w.epoch(name, target)
	if err != nil {
		return nil, err
	}
	if user && fence {
		return nil, errorf(ErrRMASync, name, "request-based operations are for passive-target epochs (Lock or LockAll of rank %d of %s), not Fence or Start epochs", target, w.name)
	}
	if disp < 0 {
		return nil, errorf(ErrRMARange, name, "negative displacement %d", disp)
	}
	if !w.dynamic && (int64(disp) > w.sizes[target] || int64(count) > w.sizes[target]-int64(disp)) {
		return nil, errorf(ErrRMARange, name, "%d elements at %d: rank %d's part of %s has %d", count, disp, target, w.name, w.sizes[target])
	}
	if count == 0 {
		return done()
	}
	if fence {
		w.issued[target]++
	}
	var share *rmaShare
	if user {
		share = new(rmaShare)
	}
	if k == wkAcc || k == wkGetAcc || k == wkCAS {
		if w.directAcc(k, op, data, reply, target, disp, count) {
			return done()
		}
	}
	if k == wkPut || k == wkGet {
		// Truly one-sided where the transports allow (win_direct.go).
		r, did, err := w.directOp(name, k == wkPut, data, reply, target, disp)
		if err != nil {
			return nil, err
		}
		if did {
			if r == nil {
				return done() // copied already
			}
			p := pending{target: target, r: r, keep: data}
			var q *Request
			if user {
				p.share = share
				q = share.request(w.wc, w.eng, r, name, nil)
			}
			w.pend = append(w.pend, p)
			return q, nil
		}
	}
	h := winHdr{kind: k, op: op, disp: int64(disp), count: int64(count)}
	if fence {
		h.flags |= fFence
		w.fenceOps[target]++
	}
	chk := winCheck{want: len(reply), target: target, kind: k, disp: h.disp, count: h.count, name: name}
	if reply == nil && w.dynamic {
		// Only the target can check the range: it acknowledges.
		reply, chk.want = make([]byte, 1), 0
		h.flags |= fStatus
	}
	chk.on = reply != nil
	r, err := w.send(name, target, &h, data, reply, chk, share)
	if err != nil || !user {
		return nil, err
	}
	return share.request(w.wc, w.eng, r, name, func(got int) error { return w.replyErr(chk, got) }), nil
}

// send sends the request h (and data) to target and, when reply is not
// nil (or h expects an empty one: replyWanted), posts the receive of the
// reply first, whose length chk (when on) checks. It returns the p2p request whose completion completes the
// operation at the origin (the reply's receive, else the data's send,
// else the request's), which share, when not nil, co-owns with the
// window. w.mu is held.
func (w *Win[T]) send(name string, target int, h *winHdr, data, reply []byte, chk winCheck, share *rmaShare) (*p2p.Request, error) {
	wt := w.wc.world[target]
	var last *p2p.Request
	if reply != nil || h.kind >= wkLock {
		w.seq++
		h.tag = winTagReply + int(w.seq%winTagSpan)
		if reply == nil {
			reply = []byte{}
		}
		r, err := w.eng.Irecv(w.wc.ctx, wt, h.tag, reply)
		if err != nil {
			return nil, wrap(name, err)
		}
		w.pend = append(w.pend, pending{target: target, r: r, share: share, chk: chk})
		last, share = r, nil
	}
	if h.kind < wkLock {
		w.sent[target]++
	}
	hb := make([]byte, winHdrLen)
	h.encode(hb)
	r, err := w.eng.Isend(w.wc.ctx, wt, winTagReq, hb, false)
	if err != nil {
		if last != nil {
			// The request never left: withdraw its reply's receive,
			// which nothing would complete (a Request over it is never
			// returned).
			w.pend = w.pend[:len(w.pend)-1]
			if w.eng.CancelRecv(last) {
				w.eng.Release(last)
			}
		}
		return nil, wrap(name, err)
	}
	p := pending{target: target, r: r, keep: hb}
	if data == nil && last == nil {
		p.share, last = share, r
	}
	w.pend = append(w.pend, p)
	if data != nil {
		r, err := w.eng.Isend(w.wc.ctx, wt, winTagData, data, false)
		if err != nil {
			return nil, wrap(name, err)
		}
		p := pending{target: target, r: r, keep: data}
		if last == nil {
			p.share, last = share, r
		}
		w.pend = append(w.pend, p)
	}
	return last, nil
}

// epoch checks that an operation to target is inside an access epoch and
// reports whether that epoch is a fence epoch. w.mu is held.
func (w *Win[T]) epoch(name string, target int) (fence bool, err error) {
	if _, ok := w.locks[target]; ok || w.lockAll {
		return false, nil
	}
	if w.fence || w.started[target] {
		// A Start epoch's operations are counted as a fence epoch's.
		return true, nil
	}
	return false, errorf(ErrRMASync, name, "rank %d of %s is outside any access epoch: call Fence, Start, Lock(%d) or LockAll first", target, w.name, target)
}

// completeAll waits for this rank's pending operations with target (every
// target: -1) and returns the first error among them, and makes what the
// window's server wrote visible (Sync). w.mu is held.
func (w *Win[T]) completeAll(name string, target int) error {
	err := w.reap(name, target)
	w.srv.mu.Lock() // what the service goroutine wrote is visible (Sync)
	w.srv.mu.Unlock()
	return err
}

// reap is completeAll without the Sync. w.mu is held.
func (w *Win[T]) reap(name string, target int) error {
	var err error
	keep := w.pend[:0]
	for _, p := range w.pend {
		if target >= 0 && p.target != target {
			keep = append(keep, p)
			continue
		}
		w.await(p.r.Done)
		st, e := p.r.Result()
		if e == nil {
			e = w.replyErr(p.chk, st.Bytes)
		}
		if p.share != nil {
			e = nil // a request-based operation's error is its Request's
		}
		if e != nil && err == nil {
			err = wrap(name, e)
		}
		if p.share == nil || p.share.drop(true) {
			w.eng.Release(p.r)
		}
	}
	clear(w.pend[len(keep):])
	w.pend = keep
	return err
}
