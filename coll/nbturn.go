package coll

// Nonblocking calls in shared memory.
//
// The shared-memory algorithms run one call at a time, in the same order
// at every rank (shm.go). A nonblocking call runs its algorithm on a
// goroutine of its own (package mpi), possibly beside other calls on the
// communicator, so it used to take the point-to-point algorithms: at
// np=32 on the lent 32-core host an Ibarrier and its Wait took 14 µs where
// a Barrier takes 1.5. It may run in shared memory now, because every
// call on a communicator that can reach the segment takes its turn there
// in the order the calls began (their sequence numbers, which every rank
// gives alike): a nonblocking call that may use the segment (ShmReady)
// registers when it begins (Launched) and unregisters when its algorithm
// has ended (Landed), and a call does not touch the segment, nor set it
// up or renew it (Prepare), while a nonblocking call begun before it is
// still running (inTurn). No call waits for a later one, and every call
// waited for completes once every rank has begun it, so a correct
// program cannot deadlock on a turn: a blocking call that waits for an
// earlier nonblocking one at this rank waits for something every rank
// has begun (MPI forbids relying on a collective to return before the
// others enter it).
//
// Which algorithm a nonblocking call runs must also be the same at every
// rank, whenever its goroutine picks it: the pick reads the segment's
// state, which a blocking call may change (the set-up at the first
// blocking call, the renewal at each epoch's first). So whether the call
// may run in shared memory is settled when it begins, in program order
// (ShmReady, into Args.ShmReady): only on a segment already set up and
// current, which no later call changes before this one has run (its
// Prepare waits its turn).

import (
	"slices"
)

// Launched registers the call of view c, a nonblocking one begun just
// now (before any later call began), as running; Landed unregisters it
// once its algorithm has ended, whatever its outcome.
func (c *Comm) Launched() {
	s := c.sh
	s.nbMu.Lock()
	s.nb = append(s.nb, c.seq)
	s.nbN.Store(int32(len(s.nb)))
	s.nbMu.Unlock()
}

// Landed is the end of the call of view c, registered by Launched. The
// last to land on a communicator closed meanwhile unmaps its segment
// (Close).
func (c *Comm) Landed() {
	s := c.sh
	s.nbMu.Lock()
	if i := slices.Index(s.nb, c.seq); i >= 0 {
		s.nb = slices.Delete(s.nb, i, i+1)
	}
	s.nbN.Store(int32(len(s.nb)))
	unmap := s.unmap && len(s.nb) == 0
	if unmap {
		s.unmap = false
	}
	s.nbMu.Unlock()
	if unmap {
		s.shm.close()
	}
}

// ShmReady reports whether a nonblocking call of view c, begun just now,
// may run in shared memory: the communicator's segment is set up and
// current for the call's epoch (Prepare would do nothing).
func (c *Comm) ShmReady() bool {
	if c.sh == nil || !c.sh.shm.tried.Load() {
		return false
	}
	g := c.sh.shm.seg.Load()
	return g != nil && c.seq>>shmEpoch == g.epoch
}

// inTurn waits until no nonblocking call begun before c's call is still
// running at this rank (see above); the running ones progress meanwhile
// (the waits give way to their goroutines).
func (c *Comm) inTurn() {
	s := c.sh
	if s == nil || s.nbN.Load() == 0 || c.seq == 0 {
		return
	}
	idle := c.E.Idler()
	for s.earlierRunning(c.seq) {
		idle.Idle()
	}
}

// earlierRunning reports whether a nonblocking call of a lower sequence
// number than seq is running.
func (s *shared) earlierRunning(seq uint64) bool {
	s.nbMu.Lock()
	defer s.nbMu.Unlock()
	for _, t := range s.nb {
		if t < seq {
			return true
		}
	}
	return false
}
