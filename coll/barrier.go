package coll

// barrierDissemination: in round k every rank signals rank+2^k and waits
// for rank-2^k; ceil(log2 n) rounds of zero-byte messages, any n.
func barrierDissemination(c *Comm, _ *Args) error {
	n, me := c.Size(), c.Rank()
	for d := 1; d < n; d <<= 1 {
		if err := c.sendrecv(nil, (me+d)%n, nil, (me-d+n)%n); err != nil {
			return err
		}
	}
	return nil
}

// barrierRecursiveDoubling: pairwise exchanges at distance 1, 2, 4... in a
// power-of-two core; the ranks beyond it (see fold) check in with a core
// partner first and are released by it last.
func barrierRecursiveDoubling(c *Comm, _ *Args) error {
	n, me := c.Size(), c.Rank()
	f := newFold(n)
	v := f.vrank(me)
	if v < 0 {
		if err := c.send(nil, me+1); err != nil {
			return err
		}
		return c.recv(nil, me+1)
	}
	if me < 2*f.rem {
		if err := c.recv(nil, me-1); err != nil {
			return err
		}
	}
	for d := 1; d < f.p; d <<= 1 {
		peer := f.real(v ^ d)
		if err := c.sendrecv(nil, peer, nil, peer); err != nil {
			return err
		}
	}
	if me < 2*f.rem {
		return c.send(nil, me-1)
	}
	return nil
}

// barrierLinear: every rank checks in with rank 0, which then releases
// them all: 2(n-1) messages through one rank, two latencies.
func barrierLinear(c *Comm, _ *Args) error {
	n, me := c.Size(), c.Rank()
	if me != 0 {
		if err := c.send(nil, 0); err != nil {
			return err
		}
		return c.recv(nil, 0)
	}
	var p pending
	for r := 1; r < n; r++ {
		if err := p.recv(c, nil, r); err != nil {
			return err
		}
	}
	if err := p.wait(c); err != nil {
		return err
	}
	for r := 1; r < n; r++ {
		if err := p.send(c, nil, r); err != nil {
			return err
		}
	}
	return p.wait(c)
}

// barrierTree: check-ins climb a binomial tree to rank 0, the release
// goes down it: 2 ceil(log2 n) latencies, n-1 messages each way.
func barrierTree(c *Comm, _ *Args) error {
	b := newBinomial(c.Rank(), c.Size(), 0)
	var p pending
	for _, ch := range b.children {
		if err := p.recv(c, nil, ch); err != nil {
			return err
		}
	}
	if err := p.wait(c); err != nil {
		return err
	}
	if b.parent >= 0 {
		if err := c.send(nil, b.parent); err != nil {
			return err
		}
		if err := c.recv(nil, b.parent); err != nil {
			return err
		}
	}
	for _, ch := range b.children {
		if err := p.send(c, nil, ch); err != nil {
			return err
		}
	}
	return p.wait(c)
}

// barrierHier: the ranks of each node check in with their node's leader,
// the leaders run a dissemination barrier, and each leader releases its
// node.
func barrierHier(c *Comm, a *Args) error {
	h := c.hier(0)
	if err := barrierTreeSub(h.local, 1); err != nil {
		return err
	}
	if h.leaders != nil {
		if err := barrierDissemination(h.leaders, a); err != nil {
			return err
		}
	}
	return barrierTreeSub(h.local, 2)
}

// barrierTreeSub is half a tree barrier on a node: phase 1 gathers the
// check-ins at the leader (rank 0), phase 2 spreads the release.
func barrierTreeSub(c *Comm, phase int) error {
	b := newBinomial(c.Rank(), c.Size(), 0)
	var p pending
	if phase == 1 {
		for _, ch := range b.children {
			if err := p.recv(c, nil, ch); err != nil {
				return err
			}
		}
		if err := p.wait(c); err != nil {
			return err
		}
		if b.parent >= 0 {
			return c.send(nil, b.parent)
		}
		return nil
	}
	if b.parent >= 0 {
		if err := c.recv(nil, b.parent); err != nil {
			return err
		}
	}
	for _, ch := range b.children {
		if err := p.send(c, nil, ch); err != nil {
			return err
		}
	}
	return p.wait(c)
}

// chFinalize is the channel of FinalizeBarrier, of sequence 0
// (setupView), apart from every other tag of sequence 0 and ch* of a
// call.
const chFinalize = 9

// FinalizeBarrier is the barrier of package mpi's Finalize over c (the
// world), on a channel of its own, so that it never matches a collective
// the program called on c: it ran as a Barrier on c, and a rank that
// skipped a Barrier completed the others' from its Finalize. A rank in it
// begins no call on c any more: a call that others wait in and this rank
// never ran is aborted for every rank when they ask about it (a stall's
// query, notice.go), failing with this rank's name, instead of leaving
// them and this rank's Finalize waiting for each other.
//
// The other communicators of the process are served too: while it waits,
// on each of the watchdog's ticks, this rank answers their queries the
// same way (serveFinalizing), a communicator's first call included: its
// set-up (the shared-memory segment's, inside that call) asks whether the
// others have begun the call (Comm.setupIn), and this rank, which has
// not, aborts it.
func FinalizeBarrier(c *Comm) error {
	if s := c.sh; s != nil && len(c.World) > 1 {
		s.finalize()
		serveFinalizing(s)
	}
	return barrierDissemination(c.setupView(chFinalize), nil)
}
