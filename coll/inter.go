package coll

import (
	"encoding/binary"
	"fmt"
)

// Intercommunicator collectives (MPI's semantics for an intercommunicator:
// each group receives what the other group contributed).
//
// c is a view, begun with Comm.Begin, of the union of the two groups:
// ranks [0, split) are one group and [split, n) the other, each in its own
// rank order; a group's leader is its first rank. Each algorithm runs in
// three phases on sub-channels of the call: within this rank's group,
// between the two leaders, and within the group again (as MPICH's
// intercommunicator algorithms do over their local communicator). Every
// phase runs the flat (point-to-point) algorithm of its collective on a
// view of one node, so that no hierarchical algorithm nests its own
// sub-channels inside these; the shared-memory algorithms are not used.
//
// The v forms and Reduce_scatter are in interv.go. Every algorithm here
// is also a nonblocking call's: it uses only the call's own tags and
// shares no state with the communicator's other calls.
//
// On failure the caller aborts the call on c, as for any collective: the
// ranks of both groups still in it then fail too.

// Sub-channels of the phases (hier.go uses 1 and 2 on other calls).
const (
	chInterIn      = 3 // within a group, before the leaders' exchange
	chInterLeaders = 4 // between the two leaders
	chInterOut     = 5 // within a group, after it
	chInterLen     = 6 // within a group: the length of what came
)

// sides returns the bounds of this rank's group and of the other group in
// c, split as above.
func (c *Comm) sides(split int) (lo, hi, rlo, rhi int) {
	n := c.Size()
	if split <= 0 || split >= n {
		panic(fmt.Sprintf("coll: intercommunicator split %d of %d ranks", split, n))
	}
	if c.Me < split {
		return 0, split, split, n
	}
	return split, n, 0, split
}

// group is the view of c's ranks [lo, hi) on sub-channel ch, as one node.
func (c *Comm) group(lo, hi, ch int) *Comm {
	ranks := make([]int, hi-lo)
	for i := range ranks {
		ranks[i] = lo + i
	}
	v := c.sub(ranks, ch)
	v.Node = make([]int, len(ranks))
	v.Nodes = 1
	return v
}

// leaders is the view of this group's leader (0) and the other group's
// (1); only a leader uses it.
func (c *Comm) leaders(rlo int) *Comm {
	return c.sub([]int{c.Me, rlo}, chInterLeaders)
}

// InterBarrier returns once every rank of both groups has entered it: the
// barrier of the union, which is MPI's intercommunicator barrier.
func InterBarrier(c *Comm, a *Args) error {
	return Barrier(c, a)
}

// InterBcast broadcasts a.Recv of the root, a rank of one group, to every
// rank of the other group. a.Root is the root's rank in c at the other
// group's ranks and at the root; the root's group's other ranks pass -1
// and take no part (MPI_PROC_NULL).
func InterBcast(c *Comm, a *Args, split int) error {
	lo, hi, done, err := c.rooted(a, split, func(x *Comm) error { return x.send(a.Recv, 1) })
	if done {
		return err
	}
	if c.Me == lo {
		if err := c.toRoot(a).recv(a.Recv, 1); err != nil {
			return err
		}
	}
	return bcastFlat(c.group(lo, hi, chInterOut), &Args{Recv: a.Recv})
}

// rooted starts a rooted collective (a.Root as InterBcast's): done is true
// when this rank's part is over: at the root's group's other ranks (none),
// and at the root, after atRoot, its one exchange with the other group's
// leader (x). Elsewhere lo, hi is this rank's group, whose leader (lo)
// exchanges with the root through toRoot.
func (c *Comm) rooted(a *Args, split int, atRoot func(x *Comm) error) (lo, hi int, done bool, err error) {
	if err := c.Poll(); err != nil {
		return 0, 0, true, err
	}
	lo, hi, rlo, _ := c.sides(split)
	switch {
	case a.Root < 0:
		return lo, hi, true, nil
	case a.Root == c.Me:
		return lo, hi, true, atRoot(c.leaders(rlo))
	}
	return lo, hi, false, nil
}

// toRoot is the view of this group's leader (0) and the root (1) of a
// rooted collective; only the leader uses it.
func (c *Comm) toRoot(a *Args) *Comm {
	return c.sub([]int{c.Me, a.Root}, chInterLeaders)
}

// InterAllreduce gives every rank of each group the reduction with a.Op of
// the other group's a.Send (in that group's rank order) in a.Recv, which
// has the same length. a.Send may be a.Recv: it is read before a.Recv is
// written.
func InterAllreduce(c *Comm, a *Args, split int) error {
	if err := c.Poll(); err != nil {
		return err
	}
	lo, hi, rlo, _ := c.sides(split)
	mine := make([]byte, len(a.Recv)) // this group's reduction, at its leader
	ra := *a
	ra.Recv, ra.Root = mine, 0
	if a.Send == nil { // in place: this rank's contribution is in a.Recv
		ra.Send = a.Recv
	}
	if err := reduceFlat(c.group(lo, hi, chInterIn), &ra); err != nil {
		return err
	}
	if c.Me == lo {
		if err := c.leaders(rlo).sendrecv(mine, 1, a.Recv, 1); err != nil {
			return err
		}
	}
	return bcastFlat(c.group(lo, hi, chInterOut), &Args{Recv: a.Recv})
}

// InterAllgather gives every rank of each group the other group's a.Send,
// concatenated in that group's rank order, at the start of a.Recv. The
// other group's blocks may have another length than this group's; a.Recv
// must hold them all (the call fails with ErrCount otherwise); the rest
// of it is left alone.
func InterAllgather(c *Comm, a *Args, split int) error {
	if err := c.Poll(); err != nil {
		return err
	}
	lo, hi, rlo, _ := c.sides(split)
	var mine []byte
	if c.Me == lo {
		mine = make([]byte, (hi-lo)*len(a.Send))
	}
	if err := collGather.runFlat(c.group(lo, hi, chInterIn), &Args{Send: a.Send, Recv: mine}, func() {
		copy(mine, a.Send)
	}); err != nil {
		return err
	}
	var hdr [8]byte
	if c.Me == lo {
		// The lengths first: the other group's blocks have a length
		// this group learns here.
		x := c.leaders(rlo)
		var theirs [8]byte
		binary.LittleEndian.PutUint64(hdr[:], uint64(len(mine)))
		if err := x.sendrecv(hdr[:], 1, theirs[:], 1); err != nil {
			return err
		}
		got := binary.LittleEndian.Uint64(theirs[:])
		if got > uint64(len(a.Recv)) {
			// The other ranks of this group learn it from the abort.
			return fmt.Errorf("the other group sends %d bytes to a receive buffer of %d (%w)", got, len(a.Recv), ErrCount)
		}
		if err := x.sendrecv(mine, 1, a.Recv[:got], 1); err != nil {
			return err
		}
		hdr = theirs
	}
	if err := bcastFlat(c.group(lo, hi, chInterLen), &Args{Recv: hdr[:]}); err != nil {
		return err
	}
	got := binary.LittleEndian.Uint64(hdr[:])
	if got > uint64(len(a.Recv)) {
		return fmt.Errorf("the other group sends %d bytes to a receive buffer of %d (%w)", got, len(a.Recv), ErrCount)
	}
	return bcastFlat(c.group(lo, hi, chInterOut), &Args{Recv: a.Recv[:got]})
}

// InterReduce reduces with a.Op the a.Send of every rank of the group
// that is not the root's (in that group's rank order) into a.Recv at the
// root. a.Root is as InterBcast's: the root's rank in c at the root and at
// the other group's ranks, -1 at the root's group's other ranks (they
// take no part). The reduction runs within the other group, whose leader
// sends it to the root.
func InterReduce(c *Comm, a *Args, split int) error {
	return c.interToRoot(a, split, false, func(g *Comm, mine []byte) error {
		ra := *a
		ra.Recv, ra.Root = mine, 0
		return reduceFlat(g, &ra)
	})
}

// InterGather gathers the a.Send of every rank of the group that is not
// the root's, in that group's rank order, into a.Recv at the root (a.Root
// as InterReduce's). The group gathers at its leader, which sends the
// whole to the root.
func InterGather(c *Comm, a *Args, split int) error {
	return c.interToRoot(a, split, true, func(g *Comm, mine []byte) error {
		return collGather.runFlat(g, &Args{Send: a.Send, Recv: mine}, func() { copy(mine, a.Send) })
	})
}

// interToRoot runs the rooted collectives whose root receives from the
// other group: collect combines that group's a.Send into mine at its
// leader (mine holds one a.Send, or one per rank of the group when
// perRank), which sends it to the root.
func (c *Comm) interToRoot(a *Args, split int, perRank bool, collect func(g *Comm, mine []byte) error) error {
	lo, hi, done, err := c.rooted(a, split, func(x *Comm) error { return x.recv(a.Recv, 1) })
	if done {
		return err
	}
	var mine []byte
	if c.Me == lo {
		n := 1
		if perRank {
			n = hi - lo
		}
		mine = make([]byte, n*len(a.Send))
	}
	if err := collect(c.group(lo, hi, chInterIn), mine); err != nil {
		return err
	}
	if c.Me != lo {
		return nil
	}
	return c.toRoot(a).send(mine, 1)
}

// InterScatter sends block r of the root's a.Send (its length over the
// other group's size) to rank r of the group that is not the root's, into
// a.Recv (a.Root as InterReduce's). The root sends the whole to that
// group's leader, which scatters it.
func InterScatter(c *Comm, a *Args, split int) error {
	lo, hi, done, err := c.rooted(a, split, func(x *Comm) error { return x.send(a.Send, 1) })
	if done {
		return err
	}
	var all []byte
	if c.Me == lo {
		all = make([]byte, (hi-lo)*len(a.Recv))
		if err := c.toRoot(a).recv(all, 1); err != nil {
			return err
		}
	}
	return collScatter.runFlat(c.group(lo, hi, chInterOut), &Args{Send: all, Recv: a.Recv, Root: 0}, func() {
		copy(a.Recv, all)
	})
}

// InterAlltoall sends block j of a.Send (its length over the other group's
// size) to rank j of the other group and receives that rank's block for
// this one into block j of a.Recv: every exchange posted at once.
func InterAlltoall(c *Comm, a *Args, split int) error {
	if err := c.Poll(); err != nil {
		return err
	}
	_, _, rlo, rhi := c.sides(split)
	m := rhi - rlo
	sb, rb := len(a.Send)/m, len(a.Recv)/m
	var p pending
	for j := range m {
		if err := p.recv(c, a.Recv[j*rb:(j+1)*rb], rlo+j); err != nil {
			return err
		}
	}
	for j := range m {
		if err := p.send(c, a.Send[j*sb:(j+1)*sb], rlo+j); err != nil {
			return err
		}
	}
	return p.wait(c)
}
