package mpi

import (
	"errors"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/internal/nap"
	"github.com/gorun/gorun/internal/params"
	"github.com/gorun/gorun/p2p"
)

// Truly one-sided Put and Get. Where a transport reaches a target's part
// of the window without the target's CPU, Put and Get go that way: no
// request to the target, no service at the target, completion when the
// bytes are in place.
//
//	WinAllocateShared, and WinAllocate on one host
//	                   every part is mapped here: a copy, done at once
//	WinCreate, WinAllocate across hosts
//	                   process_vm_writev/readv between ranks of one host (btl/sm),
//	                   RDMA on a fabric (btl/ofi): each rank exposes its part
//	                   (p2p.Expose) and the ranks swap the regions at creation
//
// Accumulates (GetAccumulate, FetchAndOp, CompareAndSwap) on shared
// windows are applied by the origin too, under a lock per part in the
// segment that the target's server also takes (directAcc). Everything
// else goes by active messages (win.go): accumulates on other windows
// (atomic at the target, under its service lock), operations to this rank
// itself on them, dynamic windows, and targets no transport reaches
// directly. MPI leaves
// concurrent Put and accumulate to one location undefined, so the two
// paths need no ordering between them; synchronisation (Fence, Unlock,
// Flush, Complete) waits for both kinds.

var (
	pRMADirect = params.Int("GORUN_RMA_DIRECT", 1,
		"1: window Put and Get go straight into the target's memory where a transport allows (shared windows, process_vm on one host, RDMA), without the target's CPU; 0: always as messages served by the target (a window is one-sided only if every rank has 1)")
	// rmaDirect is pRMADirect read once (reading the environment on
	// every operation was a quarter of a small Put's time).
	rmaDirect = sync.OnceValue(func() bool { return pRMADirect() != 0 })
)

// exposeDirect exposes this rank's part for one-sided access and swaps
// the regions with every rank (collective, at creation).
func (w *Win[T]) exposeDirect(op string) error {
	if w.dynamic || w.shared != nil || !w.oneSided {
		return nil // shared windows copy; the others go as messages
	}
	n := w.wc.Size()
	const slot = 1 + btl.MaxRegionSize
	out, in := make([]byte, n*slot), make([]byte, n*slot)
	w.expo = w.eng.Expose(btl.HostMem(w.mem))
	for r := range n {
		wire, err := w.expo.For(w.wc.world[r])
		if err != nil {
			wire = nil // r goes by messages; the call goes on, collective
		}
		out[r*slot] = byte(len(wire))
		copy(out[r*slot+1:], wire)
	}
	if err := Alltoall(w.wc, out, in); err != nil {
		return reop(op, err)
	}
	w.direct = make([]*p2p.Remote, n)
	for r := range n {
		l := int(in[r*slot])
		if l == 0 || l > btl.MaxRegionSize {
			continue
		}
		// A region this side cannot use (another module) leaves r to
		// messages.
		if rm, err := w.eng.Reach(w.wc.world[r], in[r*slot+1:r*slot+1+l]); err == nil && rm.Len() == int(w.sizes[r])*w.es {
			w.direct[r] = rm
		}
	}
	return nil
}

// directOp does a Put (data) or Get (into reply) to target at element disp
// one-sidedly when it can: did reports whether it did, and r is the
// transfer's request, nil when it is over already (a shared window's
// copy). w.mu is held.
func (w *Win[T]) directOp(name string, put bool, data, reply []byte, target, disp int) (r *p2p.Request, did bool, err error) {
	if !w.oneSided {
		return nil, false, nil
	}
	off := disp * w.es
	if w.shared != nil {
		part := elemBytes(w.shared[target])
		if put {
			copy(part[off:], data)
		} else {
			copy(reply, part[off:])
		}
		return nil, true, nil
	}
	if target == w.wc.rank || w.direct == nil || w.direct[target] == nil {
		return nil, false, nil
	}
	if put {
		r, err = w.eng.PutTo(btl.HostMem(data), w.direct[target], off)
	} else {
		r, err = w.eng.GetFrom(btl.HostMem(reply), w.direct[target], off)
	}
	if errors.Is(err, btl.ErrRMARefused) {
		w.direct[target] = nil // messages from now on
		return nil, false, nil
	}
	if err != nil {
		return nil, false, wrap(name, err)
	}
	return r, true, nil
}

// directAcc applies an accumulate, GetAccumulate, FetchAndOp or
// CompareAndSwap (k) to target's part of a shared window itself, under
// the part's lock in the segment, which the target's server takes too
// (so they stay atomic per element against each other, as in MPI), and
// reports whether it did: on every shared window unless GORUN_RMA_DIRECT
// is 0. data is the operand (nil for NoOp), reply gets the old elements
// (nil for Accumulate). w.mu is held.
func (w *Win[T]) directAcc(k winKind, op opKind, data, reply []byte, target, disp, count int) bool {
	if w.shared == nil || !w.oneSided {
		return false
	}
	part := elemBytes(w.shared[target])[disp*w.es : (disp+count)*w.es]
	w.lockPart(target)
	w.accumulate(k, op, data, part, reply)
	w.unlockPart(target)
	return true
}

// lockPart takes the lock of rank t's part of a shared window (nothing
// on other windows): a word in the segment holding the holder's rank + 1.
// A holder that failed (under --enable-recovery) loses it to the first
// rank that finds it so; a live holder keeps it for one operation only.
func (w *Win[T]) lockPart(t int) {
	if w.shLocks == nil {
		return
	}
	l := (*uint32)(unsafe.Pointer(&w.shLocks[partLocks*t]))
	me := uint32(w.wc.rank + 1)
	for i := 0; ; i++ {
		h := atomic.LoadUint32(l)
		if h == 0 && atomic.CompareAndSwapUint32(l, 0, me) {
			return
		}
		if i < 64 {
			continue
		}
		if i%256 == 0 && h != 0 {
			if int(h-1) < len(w.wc.world) && w.eng.Failed(w.wc.world[h-1]) != nil && atomic.CompareAndSwapUint32(l, h, me) {
				return
			}
		}
		nap.Pass(i)
	}
}

// unlockPart releases the lock lockPart took.
func (w *Win[T]) unlockPart(t int) {
	if w.shLocks != nil {
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&w.shLocks[partLocks*t])), 0)
	}
}

// Passive-target locks on shared windows. Where every rank maps every
// part, Lock and Unlock take and release a readers-writer word in the
// segment (the second cache line of the part's locks) instead of asking
// the target's server: no message, no target CPU (Open MPI's osc/sm does
// the same). A waiting Lock serves the window and polls the transports
// meanwhile. A waiting exclusive locker holds new shared lockers back
// (rwWaiting), so shared epochs cannot starve it; among lockers of one
// kind there is no queue (the server grants in arrival order). Under
// --enable-recovery the server's locks are used, which it releases when
// their holder fails; the segment's word would stay held by a dead rank.

// partLocks is the size of a part's locks in a shared segment: the
// accumulate lock's cache line, then the readers-writer word's.
const partLocks = 128

// The readers-writer word: rwExclusive marks it held exclusively,
// rwWaiting that an exclusive locker waits (new shared lockers then wait
// too, so that a stream of shared epochs cannot starve it); below them it
// counts shared holders.
const (
	rwExclusive = 1 << 63
	rwWaiting   = 1 << 62
)

// shmLocking reports whether Lock and Unlock go through the segment.
func (w *Win[T]) shmLocking() bool {
	return w.shLocks != nil && w.oneSided && !w.wc.rt.env.Recovery
}

func (w *Win[T]) rwWord(t int) *uint64 {
	return (*uint64)(unsafe.Pointer(&w.shLocks[partLocks*t+64]))
}

// shmLock takes rank t's readers-writer word. w.mu is held.
func (w *Win[T]) shmLock(typ LockType, t int) {
	l := w.rwWord(t)
	try := func() bool {
		v := atomic.LoadUint64(l)
		if typ == LockExclusive {
			if v&^rwWaiting == 0 {
				// Free (perhaps with waiters announced, this one among
				// them): take it; another waiting exclusive locker
				// announces itself again.
				return atomic.CompareAndSwapUint64(l, v, rwExclusive)
			}
			if v&rwWaiting == 0 {
				atomic.CompareAndSwapUint64(l, v, v|rwWaiting)
			}
			return false
		}
		return v&(rwExclusive|rwWaiting) == 0 && atomic.CompareAndSwapUint64(l, v, v+1)
	}
	if !try() {
		w.await(try)
	}
}

// shmRelease ends a passive-target epoch with t on a window locked
// through its segment: this rank's operations with t complete (a flush
// round trip for any that went as messages), then the word this rank
// holds, if any (a ModeNoCheck lock holds none), is released. w.mu is
// held.
func (w *Win[T]) shmRelease(name string, t int) error {
	err := w.completeAll(name, t)
	if w.sent[t] > 0 {
		err = firstErr(err, w.ctl(name, wkFlush, 0, t))
	}
	typ, ok := w.shmHeld[t]
	if !ok {
		return err
	}
	delete(w.shmHeld, t)
	l := w.rwWord(t)
	if typ == LockExclusive {
		for { // keep a waiter's announcement
			v := atomic.LoadUint64(l)
			if atomic.CompareAndSwapUint64(l, v, v&^rwExclusive) {
				break
			}
		}
	} else {
		atomic.AddUint64(l, ^uint64(0))
	}
	return err
}
