package coll

import (
	"encoding/binary"
	"fmt"
)

// The v forms and Reduce_scatter on an intercommunicator (c and split as
// in inter.go). Counts and displacements name the other group's ranks
// (Gatherv, Scatterv, Allgatherv, Alltoallv), or this group's
// (Reduce_scatter: the other group's reduced vectors are scattered over
// this one). A rank knows only the counts of what it receives, so the
// rooted forms and Alltoallv exchange directly with every rank of the
// other group, as MPICH's linear intercommunicator algorithms do; a
// sender whose block does not have the receiver's count fails the
// receiver's call with ErrCount.

// InterGatherv gathers the a.Send of every rank of the group that is not
// the root's into the root's a.Recv, rank j's a.Counts[j] bytes at
// a.Displs[j] (a.Root as InterReduce's): the root receives from every
// rank of that group at once.
func InterGatherv(c *Comm, a *Args, split int) error {
	_, _, rlo, rhi := c.sides(split)
	_, _, done, err := c.rooted(a, split, func(*Comm) error {
		var p pending
		for j := range rhi - rlo {
			if err := p.recv(c, a.Recv[a.Displs[j]:a.Displs[j]+a.Counts[j]], rlo+j); err != nil {
				return err
			}
		}
		return p.wait(c)
	})
	if done {
		return err
	}
	return c.send(a.Send, a.Root)
}

// InterScatterv sends a.Counts[j] bytes at a.Displs[j] of the root's
// a.Send to rank j of the group that is not the root's, into its a.Recv
// (a.Root as InterReduce's): the root sends to every rank of that group
// at once.
func InterScatterv(c *Comm, a *Args, split int) error {
	_, _, rlo, rhi := c.sides(split)
	_, _, done, err := c.rooted(a, split, func(*Comm) error {
		var p pending
		for j := range rhi - rlo {
			if err := p.send(c, a.Send[a.Displs[j]:a.Displs[j]+a.Counts[j]], rlo+j); err != nil {
				return err
			}
		}
		return p.wait(c)
	})
	if done {
		return err
	}
	return c.recv(a.Recv, a.Root)
}

// InterAllgatherv gives every rank of each group the other group's
// a.Send, rank j's a.Counts[j] bytes at a.Displs[j] of a.Recv (the same
// counts at every rank of a group). Every rank sends its a.Send to the
// other group's leader, which receives them all, packed in rank order,
// and broadcasts the pack within its group (MPICH's scheme: an
// intercommunicator Gatherv to each leader, then a Bcast). a.Recv
// outside the blocks is left alone.
func InterAllgatherv(c *Comm, a *Args, split int) (err error) {
	if err := c.Poll(); err != nil {
		return err
	}
	lo, hi, rlo, rhi := c.sides(split)
	total := 0
	for _, k := range a.Counts {
		total += k
	}
	pack := getBuf(total)
	defer putBufOK(pack, &err)
	var p pending
	if c.Me == lo {
		off := 0
		for j := range rhi - rlo {
			if err := p.recv(c, pack[off:off+a.Counts[j]], rlo+j); err != nil {
				return err
			}
			off += a.Counts[j]
		}
	}
	if err := p.send(c, a.Send, rlo); err != nil {
		return err
	}
	if err := p.wait(c); err != nil {
		return err
	}
	if err := bcastFlat(c.group(lo, hi, chInterOut), &Args{Recv: pack}); err != nil {
		return err
	}
	off := 0
	for j, k := range a.Counts {
		copy(a.Recv[a.Displs[j]:a.Displs[j]+k], pack[off:off+k])
		off += k
	}
	return nil
}

// InterAlltoallv sends a.SendCounts[j] bytes at a.SendDispls[j] of a.Send
// to rank j of the other group and receives that rank's block for this
// one, a.Counts[j] bytes, at a.Displs[j] of a.Recv: every exchange posted
// at once.
func InterAlltoallv(c *Comm, a *Args, split int) error {
	if err := c.Poll(); err != nil {
		return err
	}
	_, _, rlo, rhi := c.sides(split)
	var p pending
	for j := range rhi - rlo {
		if err := p.recv(c, a.Recv[a.Displs[j]:a.Displs[j]+a.Counts[j]], rlo+j); err != nil {
			return err
		}
	}
	for j := range rhi - rlo {
		if err := p.send(c, a.Send[a.SendDispls[j]:a.SendDispls[j]+a.SendCounts[j]], rlo+j); err != nil {
			return err
		}
	}
	return p.wait(c)
}

// InterReduceScatter reduces with a.Op the a.Send of every rank of the
// other group (in its rank order) and leaves block r of the result,
// a.Counts[r] bytes, the blocks laid end to end, in a.Recv at rank r of
// this group (MPI_Reduce_scatter and MPI_Reduce_scatter_block on an
// intercommunicator: both groups' a.Send have the length of the sum of
// a.Counts). Each group reduces its a.Send at its leader; the leaders
// exchange the lengths, then the reductions; each leader scatters what
// came over its group (MPICH's scheme, with the two reductions at once).
func InterReduceScatter(c *Comm, a *Args, split int) (err error) {
	if err := c.Poll(); err != nil {
		return err
	}
	lo, hi, rlo, _ := c.sides(split)
	total := 0
	displs := make([]int, len(a.Counts))
	for r, k := range a.Counts {
		displs[r] = total
		total += k
	}
	var mine, theirs []byte // this group's reduction and the other's, at the leader
	if c.Me == lo {
		mine, theirs = getBuf(total), getBuf(total)
		defer putBufOK(mine, &err)
		defer putBufOK(theirs, &err)
	}
	ra := *a
	ra.Recv, ra.Root = mine, 0
	if err := reduceFlat(c.group(lo, hi, chInterIn), &ra); err != nil {
		return err
	}
	if c.Me == lo {
		x := c.leaders(rlo)
		var hdr, got [8]byte
		binary.LittleEndian.PutUint64(hdr[:], uint64(total))
		if err := x.sendrecv(hdr[:], 1, got[:], 1); err != nil {
			return err
		}
		if n := binary.LittleEndian.Uint64(got[:]); n != uint64(total) {
			// This group's other ranks learn it from the abort.
			return fmt.Errorf("the other group reduces vectors of %d bytes, this group of %d (%w)", n, total, ErrCount)
		}
		if err := x.sendrecv(mine, 1, theirs, 1); err != nil {
			return err
		}
	}
	me := c.Me - lo
	return collScatterv.runFlat(c.group(lo, hi, chInterOut), &Args{Send: theirs, Counts: a.Counts, Displs: displs, Recv: a.Recv[:a.Counts[me]], Root: 0}, func() {
		copy(a.Recv, theirs[:a.Counts[me]])
	})
}
