package mpi

// Fence ends the current fence epoch and opens the next (MPI_Win_fence):
// once it returns at a rank, every operation issued since the previous
// Fence by any rank to this rank's part of the window is complete there,
// and this rank's own operations are complete (Get results are in place,
// origin buffers may be reused). The first Fence opens the first epoch.
// How: each rank waits for its own operations, the ranks exchange how many
// requests each sent to each (a ReduceScatterBlock), each rank serves
// requests until it has handled as many as were sent to it, and a barrier
// keeps the next epoch's operations from arriving before every rank is
// done with this one. It fails with ErrRMASync while this rank holds
// passive-target locks. Collective over the window's communicator.
//
// Assertions (MPI_MODE_*, combined with |) let it do less; every rank must
// give ModeNoPrecede and ModeNoSucceed alike, as MPI requires. With
// ModeNoPrecede (no rank issued operations since the previous Fence) the
// ranks do not exchange counts; a rank that did issue some fails with
// ErrRMASync once the fence is over, without holding the others up. With
// ModeNoSucceed (no operation follows until the next synchronisation) no
// epoch opens; with both, the closing barrier is left out too (a fence
// that ends no epoch and opens none). ModeNoStore and ModeNoPut are
// accepted and change nothing here.
func (w *Win[T]) Fence(assert ...Assert) (err error) {
	defer w.failTo(&err)
	const name = "Win.Fence"
	if err := w.live(name); err != nil {
		return err
	}
	a, err := asserts(name, assert, ModeNoStore|ModeNoPut|ModeNoPrecede|ModeNoSucceed)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.locks) > 0 || w.lockAll {
		return errorf(ErrRMASync, name, "this rank holds passive-target locks on %s: Unlock them first", w.name)
	}
	if w.started != nil || w.posted != nil {
		return errorf(ErrRMASync, name, "this rank has a Start or Post epoch open on %s: Complete or Wait first", w.name)
	}
	var lie error
	if a&ModeNoPrecede != 0 {
		for t, n := range w.issued {
			if n > 0 && lie == nil {
				// Reported once the fence is over: the other ranks,
				// whose promise may hold, run it, and must not wait
				// for this one. The operations are counted in the next
				// Fence's exchange (their counts stay), which their
				// targets have served by then.
				lie = errorf(ErrRMASync, name, "ModeNoPrecede, but this rank issued %d operations to rank %d since the last Fence of %s", n, t, w.name)
			}
		}
	}
	err = w.completeAll(name, -1)
	if a&ModeNoPrecede == 0 {
		expect := []int64{0}
		q, cerr := IreduceScatterBlock(w.wc, w.fenceOps, expect, Sum)
		if cerr != nil {
			return reop(name, cerr)
		}
		w.await(q.r.Done)
		if _, cerr := q.Wait(); cerr != nil {
			return reop(name, cerr)
		}
		clear(w.fenceOps)
		clear(w.issued)
		if err := w.served(name, expect[0]); err != nil {
			return err
		}
	}
	if a&ModeNoSucceed != 0 {
		w.fence = false
	}
	if a&(ModeNoPrecede|ModeNoSucceed) == ModeNoPrecede|ModeNoSucceed {
		// No epoch ended and none opens: nothing to keep apart.
		return firstErr(lie, err)
	}
	// The barrier keeps the operations of what follows (the next fence
	// epoch, or a lock epoch after ModeNoSucceed) from reaching a target
	// before every target has served this epoch's.
	q, cerr := Ibarrier(w.wc)
	if cerr != nil {
		return reop(name, cerr)
	}
	w.await(q.r.Done)
	if _, cerr := q.Wait(); cerr != nil {
		return reop(name, cerr)
	}
	if a&ModeNoSucceed == 0 {
		w.fence = true
	}
	return firstErr(lie, err)
}

// Lock opens a passive-target epoch with target (MPI_Win_lock): it waits
// until target grants the lock, exclusive (no other rank holds a lock on
// target meanwhile) or shared. The target grants it without calling MPI
// (the window's service goroutine, see win.go). A Lock after a Fence ends
// the fence epoch, which must have no operation since that Fence
// (ErrRMASync otherwise). Locking a target this rank has locked already,
// or while LockAll is in force, is ErrRMASync. With ModeNoCheck (no other
// rank holds or asks for a conflicting lock meanwhile: the program
// guarantees it) the target is not asked.
func (w *Win[T]) Lock(typ LockType, target int, assert ...Assert) (err error) {
	defer w.failTo(&err)
	const name = "Win.Lock"
	if err := w.live(name); err != nil {
		return err
	}
	a, err := asserts(name, assert, ModeNoCheck)
	if err != nil {
		return err
	}
	if typ != LockExclusive && typ != LockShared {
		return errorf(ErrLockType, name, "%v is neither LockExclusive nor LockShared", typ)
	}
	if target == ProcNull {
		return nil
	}
	if target < 0 || target >= len(w.sizes) {
		return errorf(ErrRank, name, "target rank %d is not in %s (size %d)", target, w.name, len(w.sizes))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.locks[target]; ok || w.lockAll {
		return errorf(ErrRMASync, name, "this rank holds a lock on rank %d of %s already", target, w.name)
	}
	if w.started != nil {
		return errorf(ErrRMASync, name, "this rank has a Start epoch open on %s: Complete first", w.name)
	}
	if err := w.endFence(name); err != nil {
		return err
	}
	switch {
	case a&ModeNoCheck != 0:
	case w.shmLocking():
		w.shmLock(typ, target)
		w.shmHeld[target] = typ
	default:
		if err := w.ctl(name, wkLock, typ, target); err != nil {
			return err
		}
	}
	w.locks[target] = typ
	return nil
}

// Unlock completes this rank's operations with target, at the origin and
// at the target, and releases the lock (MPI_Win_unlock). Without a Lock of
// target it fails with ErrRMASync.
func (w *Win[T]) Unlock(target int) (err error) {
	defer w.failTo(&err)
	const name = "Win.Unlock"
	if err := w.live(name); err != nil {
		return err
	}
	if target == ProcNull {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.locks[target]; !ok {
		return errorf(ErrRMASync, name, "this rank holds no lock on rank %d of %s", target, w.name)
	}
	delete(w.locks, target)
	if w.shmLocking() {
		return w.shmRelease(name, target)
	}
	return w.ctl(name, wkUnlock, 0, target)
}

// LockAll takes a shared lock on every rank of the window
// (MPI_Win_lock_all), under the same rules as Lock (ModeNoCheck too).
func (w *Win[T]) LockAll(assert ...Assert) (err error) {
	defer w.failTo(&err)
	const name = "Win.LockAll"
	if err := w.live(name); err != nil {
		return err
	}
	a, err := asserts(name, assert, ModeNoCheck)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.locks) > 0 || w.lockAll {
		return errorf(ErrRMASync, name, "this rank holds locks on %s already", w.name)
	}
	if w.started != nil {
		return errorf(ErrRMASync, name, "this rank has a Start epoch open on %s: Complete first", w.name)
	}
	if err := w.endFence(name); err != nil {
		return err
	}
	switch {
	case a&ModeNoCheck != 0:
	case w.shmLocking():
		for t := range w.sizes {
			w.shmLock(LockShared, t)
			w.shmHeld[t] = LockShared
		}
	default:
		if err := w.ctlAll(name, wkLock, LockShared); err != nil {
			return err
		}
	}
	w.lockAll = true
	return nil
}

// UnlockAll completes this rank's operations at every rank and releases
// the locks of LockAll (MPI_Win_unlock_all); without LockAll it fails
// with ErrRMASync.
func (w *Win[T]) UnlockAll() (err error) {
	defer w.failTo(&err)
	const name = "Win.UnlockAll"
	if err := w.live(name); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.lockAll {
		return errorf(ErrRMASync, name, "this rank holds no LockAll on %s", w.name)
	}
	w.lockAll = false
	if w.shmLocking() {
		for t := range w.sizes {
			err = firstErr(err, w.shmRelease(name, t))
		}
		return err
	}
	return w.ctlAll(name, wkUnlock, 0)
}

// Flush completes this rank's operations with target, at the origin and
// at the target, inside a passive-target epoch (MPI_Win_flush); outside one
// it fails with ErrRMASync.
func (w *Win[T]) Flush(target int) (err error) {
	defer w.failTo(&err)
	const name = "Win.Flush"
	if err := w.live(name); err != nil {
		return err
	}
	if target == ProcNull {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.locks[target]; !ok && !w.lockAll {
		return errorf(ErrRMASync, name, "rank %d of %s is not locked by this rank", target, w.name)
	}
	if w.sent[target] == 0 {
		return w.reap(name, target) // one-sided operations only
	}
	return w.ctl(name, wkFlush, 0, target)
}

// FlushAll is Flush of every rank this rank holds a lock on
// (MPI_Win_flush_all).
func (w *Win[T]) FlushAll() (err error) {
	defer w.failTo(&err)
	const name = "Win.FlushAll"
	if err := w.live(name); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.lockAll && len(w.locks) == 0 {
		return errorf(ErrRMASync, name, "this rank holds no lock on %s", w.name)
	}
	for t := range w.sent {
		if _, ok := w.locks[t]; (ok || w.lockAll) && w.sent[t] > 0 {
			h := winHdr{kind: wkFlush}
			_, e := w.send(name, t, &h, nil, nil, winCheck{}, nil)
			err = firstErr(err, e)
			w.sent[t] = 0
		}
	}
	return firstErr(err, w.completeAll(name, -1))
}

// served serves requests until this rank has handled expect requests of
// the fence or PSCW epoch just ended (and counts them off), or the
// window's service has stopped. w.mu is held.
func (w *Win[T]) served(name string, expect int64) error {
	w.await(func() bool {
		w.srv.mu.Lock()
		defer w.srv.mu.Unlock()
		return w.srv.fenceDone >= expect || w.srv.dead != nil
	})
	w.srv.mu.Lock()
	w.srv.fenceDone -= expect
	dead := w.srv.dead
	w.srv.mu.Unlock()
	if dead != nil {
		return wrap(name, dead)
	}
	return nil
}

// endFence ends an open fence epoch before a passive-target one; it fails
// when operations were issued since the last Fence. w.mu is held.
func (w *Win[T]) endFence(name string) error {
	if !w.fence {
		return nil
	}
	for t, n := range w.issued {
		if n > 0 {
			return errorf(ErrRMASync, name, "%d operations to rank %d since the last Fence of %s: complete them with a Fence first", n, t, w.name)
		}
	}
	w.fence = false
	return nil
}

// ctl sends a lock, unlock or flush request to target and waits for its
// reply and for every earlier operation with target. w.mu is held.
func (w *Win[T]) ctl(name string, k winKind, typ LockType, target int) error {
	var err error
	if k == wkUnlock {
		// This rank's operations end before its lock does: a Get's
		// reply may still be read from the target's window (a
		// rendezvous), and the next holder must not write it meanwhile.
		err = w.completeAll(name, target)
	}
	h := winHdr{kind: k, lock: typ}
	_, e := w.send(name, target, &h, nil, nil, winCheck{}, nil)
	err = firstErr(err, e)
	w.sent[target] = 0
	return firstErr(err, w.completeAll(name, target))
}

// ctlAll is ctl to every rank, all requests sent before any is awaited.
func (w *Win[T]) ctlAll(name string, k winKind, typ LockType) error {
	var err error
	if k == wkUnlock {
		err = w.completeAll(name, -1) // as in ctl
	}
	for t := range w.sizes {
		h := winHdr{kind: k, lock: typ}
		_, e := w.send(name, t, &h, nil, nil, winCheck{}, nil)
		err = firstErr(err, e)
	}
	clear(w.sent)
	return firstErr(err, w.completeAll(name, -1))
}

// Assert is a synchronisation call's assertion about how the program uses
// the window (MPI_MODE_*, Open MPI's values), combined with |: a promise
// that lets the call do less. A false promise is erroneous, as in MPI;
// where it is cheap to see, the call fails with ErrRMASync instead.
type Assert int

const (
	// ModeNoCheck (Lock, LockAll, Post, Start): no conflicting lock, or
	// the matching Post has been called already; Post and Start must
	// both give it or neither.
	ModeNoCheck Assert = 1
	// ModeNoPrecede (Fence): no operation since the previous Fence.
	ModeNoPrecede Assert = 2
	// ModeNoPut (Fence, Post): the window is not the target of Puts or
	// accumulates until the next synchronisation. No effect here.
	ModeNoPut Assert = 4
	// ModeNoStore (Fence, Post): this rank did not store into its part
	// since the last synchronisation. No effect here.
	ModeNoStore Assert = 8
	// ModeNoSucceed (Fence): no operation until the next
	// synchronisation: the Fence opens no epoch.
	ModeNoSucceed Assert = 16
)

// asserts combines a call's assertions and checks them against those it
// takes.
func asserts(name string, as []Assert, allowed Assert) (Assert, error) {
	var a Assert
	for _, x := range as {
		a |= x
	}
	if a&^allowed != 0 {
		return 0, errorf(ErrArg, name, "assertion %#x: this call takes only %#x", int(a), int(allowed))
	}
	return a, nil
}
