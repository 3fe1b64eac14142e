package mpi

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gorun/gorun/launcher/boot"
	"github.com/gorun/gorun/p2p"
)

// Fault tolerance (ULFM, as standardized in MPI 5.0: MPI_Comm_revoke,
// MPI_Comm_shrink, MPI_Comm_agree, MPI_Comm_get_failed,
// MPI_Comm_ack_failed, MPI_Comm_is_revoked).
//
// By default a failed rank ends the job (gorun stops every rank). Started
// with `gorun --enable-recovery` (or --with-ft ulfm), the job goes on: gorun
// declares the rank failed (and makes sure it is gone), and every
// operation that needs it fails with ErrProcFailed at the ranks that call
// it, while the others go on. What the caller may do then:
//
//   - A point-to-point operation with the failed rank failed and will keep
//     failing; nothing was delivered to or taken from it (a send whose
//     message the failed rank had already received may still have
//     completed before).
//   - A receive from AnySource on a communicator with a failed member fails
//     with ErrProcFailed, since the message it waits for may have been the
//     failed rank's; after c.AckFailed() such receives work again (until
//     another member fails).
//   - A collective that failed at one rank fails at every rank that has not
//     completed it (gorun tells them); some may have completed it. Its
//     results are undefined: retry it on a shrunk communicator, after
//     agreeing on where to restart (Agree, or an Allreduce there).
//   - c.Revoke() makes every pending and later operation on c fail with
//     ErrRevoked at every member (except Agree, Shrink, GetFailed,
//     AckFailed, IsRevoked and Free), so that ranks blocked in operations
//     with live peers come out too.
//   - c.Shrink() returns a communicator of c's survivors, the same at all
//     of them; c.Agree(flag) returns the bitwise and of flag over the
//     survivors, the same at all of them.
//
// Agree and Shrink are agreed through gorun, the authority on which ranks
// failed under --enable-recovery (launcher/boot/recovery.go), so their
// answers are uniform; without --enable-recovery they fail with ErrOther.
// Limits: a frozen rank on another host that the failure detector gives
// up on is killed by that host's agent; gorun itself failing still ends
// the job.

// ErrRevoked is the class of operations on a revoked communicator
// (MPI_ERR_REVOKED).
const ErrRevoked Class = 77

func init() { classNames[ErrRevoked] = "communicator revoked" }

// ftComm is a communicator's fault-tolerance state.
type ftComm struct {
	revoked atomic.Bool
	seq     atomic.Uint64 // agreements started on this communicator
	mu      sync.Mutex
	acked   int // failures of rt.failed acknowledged (AckFailed)
}

// ftProc is the process's fault-tolerance state (in rt).
type ftProc struct {
	mu     sync.Mutex
	failed []int            // world ranks gorun declared failed, in order
	comms  map[uint32]*Comm // live communicators by context
}

// RecoveryEnabled reports whether the job runs with gorun
// --enable-recovery: a failed rank does not end it.
func RecoveryEnabled() bool {
	s := live.Load()
	return s != nil && s.env.Recovery
}

// register records c so that revocations and failures reach it.
func (s *rt) register(c *Comm) {
	s.ft.mu.Lock()
	if s.ft.comms == nil {
		s.ft.comms = map[uint32]*Comm{}
	}
	s.ft.comms[c.ctx] = c
	s.ft.mu.Unlock()
}

func (s *rt) unregister(c *Comm) {
	s.ft.mu.Lock()
	if s.ft.comms[c.ctx] == c {
		delete(s.ft.comms, c.ctx)
	}
	s.ft.mu.Unlock()
	s.eng.Unrevoke(c.ctx)
	s.eng.Unrevoke(c.ctx + 1)
}

// declared handles gorun's verdict that world rank failed: its peers'
// operations with it fail, and so do receives from AnySource on the
// communicators it belongs to.
func (s *rt) declared(rank int, err error) {
	s.ft.mu.Lock()
	var in []*Comm
	for _, c := range s.ft.comms {
		if _, ok := c.index[rank]; ok {
			in = append(in, c)
		}
	}
	s.ft.mu.Unlock()
	s.eng.PeerFailed(rank, err)
	for _, c := range in {
		s.eng.FailAnySource(c.ctx, fmt.Errorf("%w: %w (receive from AnySource on %s; AckFailed lets them go on)", p2p.ErrProcFailed, err, c.name))
	}
}

// noteFailed records that gorun declared world rank failed, at once (the
// rest of declared may run later, on another goroutine): an Agree answer
// and the GetFailed or AckFailed that follow it must see it. It reports
// whether the rank was new.
func (s *rt) noteFailed(rank int) bool {
	s.ft.mu.Lock()
	defer s.ft.mu.Unlock()
	if slices.Contains(s.ft.failed, rank) {
		return false
	}
	s.ft.failed = append(s.ft.failed, rank)
	return true
}

// onRevoke handles another member's revocation of the communicator with
// context ctx.
func (s *rt) onRevoke(ctx uint32) {
	s.ft.mu.Lock()
	c := s.ft.comms[ctx]
	s.ft.mu.Unlock()
	if c != nil {
		c.revokeHere("revoked by another member")
	}
}

// Revoke revokes c at every member: their pending and later operations on
// c fail with ErrRevoked, except Agree, Shrink, GetFailed, AckFailed,
// IsRevoked and Free (MPI_Comm_revoke). It does not wait for the others.
// Without --enable-recovery it revokes c here only and returns ErrOther.
func (c *Comm) Revoke() (err error) {
	defer c.failTo(&err)
	const op = "Comm.Revoke"
	if err := c.checkLive(op); err != nil {
		return err
	}
	if !c.revokeHere("revoked by this rank") {
		return nil
	}
	// c.cc.World: an intercommunicator's two groups.
	if err := c.rt.sess.Revoke(c.ctx, c.cc.World); err != nil {
		return errorf(ErrOther, op, "tell the other members: %w", err)
	}
	return nil
}

// revokeHere revokes c in this process; it reports whether c was not
// revoked before.
func (c *Comm) revokeHere(why string) bool {
	if !c.ft.revoked.CompareAndSwap(false, true) {
		return false
	}
	err := fmt.Errorf("%s: %w (%s)", c.name, p2p.ErrRevoked, why)
	c.rt.eng.Revoke(c.ctx, err)
	c.rt.eng.Revoke(c.ctx+1, err)
	return true
}

// IsRevoked reports whether c was revoked (MPI_Comm_is_revoked).
func (c *Comm) IsRevoked() bool { return c != nil && c.ft.revoked.Load() }

// GetFailed returns the ranks of c (in c) that this process knows to have
// failed, in increasing order (MPI_Comm_get_failed).
func (c *Comm) GetFailed() []int {
	if c == nil || c.rt == nil {
		return nil
	}
	c.rt.ft.mu.Lock()
	defer c.rt.ft.mu.Unlock()
	var rs []int
	for _, w := range c.rt.ft.failed {
		if r, ok := c.index[w]; ok {
			rs = append(rs, r)
		}
	}
	slices.Sort(rs)
	return rs
}

// AckFailed acknowledges the failures of c's members known so far:
// receives from AnySource on c work again until another member fails. It
// returns how many of c's members are acknowledged as failed
// (MPI_Comm_ack_failed with every known failure).
func (c *Comm) AckFailed() (_ int, err error) {
	defer c.failTo(&err)
	if err := c.checkLive("Comm.AckFailed"); err != nil {
		return 0, err
	}
	c.rt.ft.mu.Lock()
	n := len(c.rt.ft.failed)
	c.rt.ft.mu.Unlock()
	c.ft.mu.Lock()
	c.ft.acked = n
	c.ft.mu.Unlock()
	c.rt.eng.AckAnySource(c.ctx)
	return len(c.GetFailed()), nil
}

// unacked returns a failed member of c not acknowledged by AckFailed (a
// world rank), or -1.
func (c *Comm) unacked() int {
	s := c.rt
	s.ft.mu.Lock()
	defer s.ft.mu.Unlock()
	if len(s.ft.failed) == 0 {
		return -1
	}
	c.ft.mu.Lock()
	from := c.ft.acked
	c.ft.mu.Unlock()
	for _, w := range s.ft.failed[from:] {
		if _, ok := c.index[w]; ok {
			return w
		}
	}
	return -1
}

// checkAnySource fails a receive or probe from AnySource on c while a
// member has failed unacknowledged.
func (c *Comm) checkAnySource(op string) error {
	if !c.rt.env.Recovery {
		return nil
	}
	if w := c.unacked(); w >= 0 {
		return errorf(ErrProcFailed, op, "rank %d of %s failed, and a message from AnySource may have been its (call AckFailed to receive from AnySource again)", c.index[w], c.name)
	}
	return nil
}

// agree runs one agreement of words over c's members through gorun and
// returns the bitwise and over the survivors, and the failed members
// (world ranks, sorted).
func (c *Comm) agree(op string, words []uint64) ([]uint64, []int, error) {
	key := boot.AgreeKey(c.ctx, c.ft.seq.Add(1), c.world)
	out, failed, err := c.rt.sess.Agree(key, op, c.world, words)
	for _, w := range failed {
		// Before the notice, perhaps: every survivor's next call must
		// know what this answer said.
		if c.rt.noteFailed(w) {
			go c.rt.declared(w, fmt.Errorf("rank %d failed (gorun's answer to %s)", w, op))
		}
	}
	if errors.Is(err, boot.ErrNoRecovery) {
		return nil, nil, errorf(ErrOther, op, "%w (without it a failed rank ends the job, and there is nothing to agree on)", err)
	}
	if err != nil {
		return nil, nil, errorf(ErrOther, op, "%w", err)
	}
	return out, failed, nil
}

// Agree returns the bitwise and of flag over the members of c that have
// not failed, the same at every one of them, even if c is revoked
// (MPI_Comm_agree). When members have failed that this rank has not
// acknowledged (AckFailed), it also returns an ErrProcFailed error: the
// result is still valid. Collective over c.
func (c *Comm) Agree(flag int) (_ int, err error) {
	defer c.failTo(&err)
	const op = "Comm.Agree"
	if err := c.checkLive(op); err != nil {
		return 0, err
	}
	if err := c.intra(op); err != nil {
		return 0, err
	}
	out, failed, err := c.agree(op, []uint64{uint64(uint32(flag))})
	if err != nil {
		return 0, err
	}
	res := int(int32(uint32(out[0])))
	if len(failed) > 0 {
		c.ft.mu.Lock()
		acked := c.ft.acked
		c.ft.mu.Unlock()
		c.rt.ft.mu.Lock()
		known := c.rt.ft.failed[:acked]
		c.rt.ft.mu.Unlock()
		for _, w := range failed {
			if !slices.Contains(known, w) {
				return res, errorf(ErrProcFailed, op, "rank %d of %s failed (the result is the agreement of the %d others)", c.index[w], c.name, len(c.world)-len(failed))
			}
		}
	}
	return res, nil
}

// Shrink returns a new communicator of the members of c that have not
// failed, in c's order, the same at every one of them (MPI_Comm_shrink).
// It works on a revoked c. Collective over c's survivors.
func (c *Comm) Shrink() (_ *Comm, err error) {
	defer c.failTo(&err)
	const op = "Comm.Shrink"
	if err := c.checkLive(op); err != nil {
		return nil, err
	}
	var failed []int
	ctx, err := c.agreeCtxBy(op, func(buf []uint64) error {
		out, f, err := c.agree(op, buf)
		if err != nil {
			return err
		}
		copy(buf, out)
		failed = f
		return nil
	})
	if err != nil {
		return nil, err
	}
	var world []int
	me := -1
	for _, w := range c.world {
		if slices.Contains(failed, w) {
			continue
		}
		if w == c.rt.env.Rank {
			me = len(world)
		}
		world = append(world, w)
	}
	if me < 0 {
		ctxs.release(ctx)
		return nil, errorf(ErrIntern, op, "gorun counts this rank among the failed")
	}
	s := newComm(c.name+"'", c.rt, ctx, world, me)
	s.inherit(c)
	return s, nil
}

// checkLive is check without the revocation test: for the calls that work
// on a revoked communicator (and check's first part).
func (c *Comm) checkLive(op string) error {
	if c == nil {
		return errorf(ErrComm, op, "nil communicator")
	}
	if c.freed.Load() {
		return errorf(ErrComm, op, "communicator %s was freed", c.name)
	}
	if c.rt == nil && live.Load() != nil {
		return errorf(ErrComm, op, "communicator %s is not ready: complete its Idup's request first", c.name)
	}
	if c.rt == nil || live.Load() != c.rt {
		stateMu.Lock()
		fin := finalized
		stateMu.Unlock()
		return notLive(op, fin)
	}
	return nil
}
