package coll

import "fmt"

// Neighbourhood collectives (MPI-3 §7.6): every rank exchanges blocks with
// its neighbours in a virtual topology only, which package mpi turns into
// lists; this file only moves the blocks.
//
// Args: a.Sources[i] is the rank whose block lands in a.Recv at
// a.Displs[i] (a.Counts[i] bytes), a.Dests[i] the rank that gets
// a.Send[a.SendDispls[i]:][:a.SendCounts[i]]. A negative rank (MPI's
// PROC_NULL) is no neighbour: nothing is sent, and that receive block is
// left as it was. a.SrcCh[i] and a.DstCh[i] are the sub-channels the
// messages travel on (taken modulo NeighborChannels): a sender and its
// receiver must name the same one. Two messages between one pair of
// ranks in one call (a periodic dimension of size 1 or 2 of a Cartesian
// grid, repeated edges of a graph) are told apart by their channel, and
// where they share one by p2p's non-overtaking order: the receives are
// posted in list order and the sends go out in list order, so package mpi
// orders both lists the same way.

// NeighborChannels is the number of sub-channels a neighbourhood call may
// use: the low subBits of the call's tag, less subNotify (a nonblocking
// call's completion notice).
const NeighborChannels = subNotify

// neighborID is the collective id a neighbourhood call records for stall
// queries; it is no registered collective (there is one algorithm and no
// table to override).
const neighborID = 1<<16 - 1

// Neighbor runs a neighbourhood exchange on the begun view c: every
// receive is posted, then every send, then all complete. One round, as in
// Open MPI's coll/basic neighbour collectives: each rank talks to a
// handful of neighbours, so there is nothing for a tree or ring to save.
// Unlike the other entry points it runs on a communicator of one rank
// too (a periodic grid of one rank is its own neighbour).
func Neighbor(c *Comm, a *Args) error {
	if err := c.Poll(); err != nil {
		return err
	}
	if c.Size() > 1 {
		if err := c.sh.record(c, callRec{coll: neighborID, size: -1}); err != nil {
			return fmt.Errorf("neighbor: %w", err)
		}
	}
	if err := neighborLinear(c, a); err != nil {
		if isAborted(err) {
			return err
		}
		return fmt.Errorf("neighbor: %w", err)
	}
	return nil
}

func neighborLinear(c *Comm, a *Args) error {
	var p pending
	for i, src := range a.Sources {
		if src < 0 {
			continue
		}
		v := c.onChannel(a.SrcCh[i])
		if err := p.recv(v, a.Recv[a.Displs[i]:a.Displs[i]+a.Counts[i]], src); err != nil {
			return err
		}
	}
	for i, dst := range a.Dests {
		if dst < 0 {
			continue
		}
		v := c.onChannel(a.DstCh[i])
		if err := p.send(v, a.Send[a.SendDispls[i]:a.SendDispls[i]+a.SendCounts[i]], dst); err != nil {
			return err
		}
	}
	return p.wait(c)
}

// onChannel is c on sub-channel ch (mod NeighborChannels) of its call.
func (c *Comm) onChannel(ch int) *Comm {
	v := *c
	v.tag = c.tag&^(1<<subBits-1) | ch%NeighborChannels
	return &v
}
