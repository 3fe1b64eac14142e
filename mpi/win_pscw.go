package mpi

import (
	"encoding/binary"
	"slices"
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
// Complete; Wait ends the epoch. It does not wait for the origins.
func (w *Win[T]) Post(g *Group) (err error) {
	defer w.failTo(&err)
	const name = "Win.Post"
	if err := w.live(name); err != nil {
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
// epoch started already.
func (w *Win[T]) Start(g *Group) (err error) {
	defer w.failTo(&err)
	const name = "Win.Start"
	if err := w.live(name); err != nil {
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
		w.fenceOps[r] = 0
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
	var expect int64
	b := make([]byte, 8)
	for _, r := range w.posted {
		if err := w.recvCtl(name, r, winTagComplete, b); err != nil {
			return err
		}
		expect += int64(binary.LittleEndian.Uint64(b))
	}
	w.posted = nil
	return w.served(name, expect)
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
