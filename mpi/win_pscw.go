package mpi

import (
	"encoding/binary"
	"slices"

	"github.com/gorun/gorun/p2p"
)

// Generalized active-target synchronization (MPI-3 §11.5.2: Post, Start,
// Complete, Wait): a target exposes its part of the window to a group of
// origins (Post ... Wait), an origin accesses a group of targets (Start
// ... Complete), and only the ranks involved synchronize, where a Fence
// involves every rank of the window.
//
// How: Post sends an empty "post" message to each origin of its group;
// Start waits for the post of each target of its group. Operations in the
// access epoch are counted per target as in a fence epoch; Complete waits
// for this rank's operations and sends each target of its group how many
// it sent there ("complete", 8 bytes); Wait receives the count of each
// origin of its post group and serves requests until it has handled that
// many. Fence and the PSCW epochs share that count, so one must not overlap
// the other on a window (MPI calls it erroneous); Lock and Start refuse
// each other.

const (
	winTagPost     = 3
	winTagComplete = 4
)

// groupRanks returns the ranks in the window's communicator of g's
// members, or ErrGroup for a member outside it.
func (w *Win[T]) groupRanks(name string, g *Group) ([]int, error) {
	if g == nil {
		return nil, errorf(ErrGroup, name, "nil group")
	}
	ranks := make([]int, len(g.world))
	for i, wr := range g.world {
		r := slices.Index(w.wc.world, wr)
		if r < 0 {
			return nil, errorf(ErrGroup, name, "world rank %d of the group is not in %s", wr, w.name)
		}
		ranks[i] = r
	}
	return ranks, nil
}

// Post opens an exposure epoch for the origins of g (MPI_Win_post): they
// may access this rank's part of the window between their Start and
// Complete; Wait ends the epoch. It does not wait for the origins. With
// ModeNoCheck (every origin's matching Start gives it too) it sends them
// nothing; ModeNoStore and ModeNoPut change nothing here.
func (w *Win[T]) Post(g *Group, assert ...Assert) (err error) {
	defer w.failTo(&err)
	const name = "Win.Post"
	if err := w.live(name); err != nil {
		return err
	}
	a, err := asserts(name, assert, ModeNoCheck|ModeNoStore|ModeNoPut)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.posted != nil {
		return errorf(ErrRMASync, name, "%s has an exposure epoch open already (Wait first)", w.name)
	}
	ranks, err := w.groupRanks(name, g)
	if err != nil {
		return err
	}
	for _, r := range ranks {
		if a&ModeNoCheck != 0 {
			break
		}
		if err := w.sendCtl(name, r, winTagPost, nil); err != nil {
			return err
		}
	}
	w.posted = ranks
	return nil
}

// Start opens an access epoch to the targets of g (MPI_Win_start): it
// waits until each has posted an exposure epoch that includes this rank;
// Put, Get and the accumulates to them are then allowed until Complete.
// It fails with ErrRMASync while this rank holds locks or has an access
// epoch started already. With ModeNoCheck (each target's matching Post
// has been called, with ModeNoCheck too) it does not wait.
func (w *Win[T]) Start(g *Group, assert ...Assert) (err error) {
	defer w.failTo(&err)
	const name = "Win.Start"
	if err := w.live(name); err != nil {
		return err
	}
	a, err := asserts(name, assert, ModeNoCheck)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started != nil {
		return errorf(ErrRMASync, name, "%s has an access epoch started already (Complete first)", w.name)
	}
	if len(w.locks) > 0 || w.lockAll {
		return errorf(ErrRMASync, name, "this rank holds passive-target locks on %s: Unlock them first", w.name)
	}
	ranks, err := w.groupRanks(name, g)
	if err != nil {
		return err
	}
	for _, r := range ranks {
		if a&ModeNoCheck != 0 {
			break
		}
		if err := w.recvCtl(name, r, winTagPost, nil); err != nil {
			return err
		}
	}
	w.started = map[int]bool{}
	for _, r := range ranks {
		w.started[r] = true
	}
	return nil
}

// Complete ends the access epoch that Start opened (MPI_Win_complete):
// once it returns, this rank's operations in it are complete here (origin
// buffers may be reused, Get results are in place); the targets learn how
// many to expect, and their Wait returns once all are done there.
func (w *Win[T]) Complete() (err error) {
	defer w.failTo(&err)
	const name = "Win.Complete"
	if err := w.live(name); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started == nil {
		return errorf(ErrRMASync, name, "%s has no access epoch started (Start first)", w.name)
	}
	for r := range w.started {
		err = firstErr(err, w.completeAll(name, r))
	}
	for r := range w.started {
		b := binary.LittleEndian.AppendUint64(nil, uint64(w.fenceOps[r]))
		w.fenceOps[r], w.issued[r] = 0, 0
		err = firstErr(err, w.sendCtl(name, r, winTagComplete, b))
	}
	w.started = nil
	return err
}

// Wait ends the exposure epoch that Post opened (MPI_Win_wait): it returns
// once every origin of the post group has called Complete and each of
// their operations on this rank's part is done.
func (w *Win[T]) Wait() (err error) {
	defer w.failTo(&err)
	const name = "Win.Wait"
	if err := w.live(name); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.posted == nil {
		return errorf(ErrRMASync, name, "%s has no exposure epoch posted (Post first)", w.name)
	}
	if err := w.postWaits(name); err != nil {
		return err
	}
	w.await(w.waitsDone)
	w.await(w.epochServed)
	return w.endExposure(name)
}

// Test is Wait that does not block (MPI_Win_test): it reports whether the
// exposure epoch that Post opened is over, ending it when it is (as Wait
// does; a later Test or Wait then fails with ErrRMASync), and serves the
// window's requests once meanwhile.
func (w *Win[T]) Test() (done bool, err error) {
	defer w.failTo(&err)
	const name = "Win.Test"
	if err := w.live(name); err != nil {
		return false, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.posted == nil {
		return false, errorf(ErrRMASync, name, "%s has no exposure epoch posted (Post first)", w.name)
	}
	if err := w.postWaits(name); err != nil {
		return false, err
	}
	w.serve()
	w.eng.Progress()
	if !w.waitsDone() || !w.epochServed() {
		return false, nil
	}
	return true, w.endExposure(name)
}

// exposure is the end of an exposure epoch under way: the receives of the
// origins' "complete" counts, posted by the first Wait or Test.
type exposure struct {
	reqs    []*p2p.Request
	buf     []byte
	expect  int64 // their sum, once all arrived (counted)
	counted bool
	err     error
}

// postWaits posts the receives of the post group's "complete" counts,
// once an epoch. w.mu is held.
func (w *Win[T]) postWaits(name string) error {
	if w.exp != nil {
		return nil
	}
	x := &exposure{reqs: make([]*p2p.Request, len(w.posted)), buf: make([]byte, 8*len(w.posted))}
	for i, r := range w.posted {
		q, err := w.eng.Irecv(w.wc.ctx, w.wc.world[r], winTagComplete, x.buf[8*i:8*i+8])
		if err != nil {
			// A failed origin: the epoch ends with its error.
			x.err = firstErr(x.err, wrap(name, err))
			continue
		}
		x.reqs[i] = q
	}
	w.exp = x
	return nil
}

// waitsDone reports whether every "complete" count has arrived and, the
// first time, adds them up. w.mu is held.
func (w *Win[T]) waitsDone() bool {
	x := w.exp
	if x.counted {
		return true
	}
	for _, q := range x.reqs {
		if q != nil && !q.Done() {
			return false
		}
	}
	for i, q := range x.reqs {
		if q == nil {
			continue
		}
		if _, err := q.Result(); err != nil {
			x.err = firstErr(x.err, err)
		} else {
			x.expect += int64(binary.LittleEndian.Uint64(x.buf[8*i:]))
		}
		w.eng.Release(q)
		x.reqs[i] = nil
	}
	x.counted = true
	return true
}

// epochServed reports whether this rank has handled every request the
// origins counted (or the window's service stopped). w.mu is held.
func (w *Win[T]) epochServed() bool {
	w.srv.mu.Lock()
	defer w.srv.mu.Unlock()
	return w.exp.err != nil || w.srv.fenceDone >= w.exp.expect || w.srv.dead != nil
}

// endExposure ends the exposure epoch once its counts are in and served:
// the handled requests are counted off, and the first error is returned.
// w.mu is held.
func (w *Win[T]) endExposure(name string) error {
	x := w.exp
	w.exp, w.posted = nil, nil
	if x.err != nil {
		return wrap(name, x.err)
	}
	w.srv.mu.Lock()
	dead := w.srv.dead
	if dead == nil {
		w.srv.fenceDone -= x.expect
	}
	w.srv.mu.Unlock()
	if dead != nil {
		return wrap(name, dead)
	}
	return nil
}

// sendCtl starts sending a PSCW message (b, nil for none) to rank r; the
// send completes among the window's pending operations. w.mu is held.
func (w *Win[T]) sendCtl(name string, r, tag int, b []byte) error {
	q, err := w.eng.Isend(w.wc.ctx, w.wc.world[r], tag, b, false)
	if err != nil {
		return wrap(name, err)
	}
	w.pend = append(w.pend, pending{target: r, r: q, keep: b})
	return nil
}

// recvCtl receives a PSCW message from rank r into b (nil for none),
// serving the window's requests meanwhile. w.mu is held.
func (w *Win[T]) recvCtl(name string, r, tag int, b []byte) error {
	q, err := w.eng.Irecv(w.wc.ctx, w.wc.world[r], tag, b)
	if err != nil {
		return wrap(name, err)
	}
	w.await(q.Done)
	_, err = q.Result()
	w.eng.Release(q)
	return wrap(name, err)
}
