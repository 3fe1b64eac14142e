package mpi

import (
	"slices"

	"github.com/gorun/gorun/coll"
)

// Neighbourhood collectives (MPI-3 §7.6) and distributed-graph
// communicators.
//
// A neighbourhood collective exchanges blocks with a rank's neighbours in
// the communicator's virtual topology only. Its sources (in-neighbours,
// whose blocks it receives) and destinations (out-neighbours, to which it
// sends) are, in this order:
//
//   - on a Cartesian communicator, for each dimension d in turn, the source
//     then the destination of CartShift(d, 1): the -1 then the +1
//     neighbour, for both lists. A ProcNull neighbour (past the edge of a
//     non-periodic dimension) is neither sent to nor received from, and its
//     block of the receive buffer is left as it was.
//   - on a distributed-graph communicator, the sources and destinations
//     given to DistGraphCreateAdjacent, as DistGraphNeighbors returns them.
//
// How they run: package coll's Neighbor posts every receive, then every
// send, on the call's own tag of the communicator's collective context,
// and waits for all. Going through coll (Begin, then the call) rather than
// straight to the point-to-point engine on a fixed tag range costs
// nothing and gives what the other collectives have: calls in flight at
// once never match each other's messages, a rank whose arguments are bad
// aborts the call for its neighbours instead of leaving them waiting, and
// a rank that makes a different call is found out by the stall query. It
// is one round of direct messages, as in Open MPI's coll/basic: each rank
// talks to a few neighbours, so a tree or ring has nothing to save.
//
// When one rank is a neighbour twice (a periodic dimension of size 1 or
// 2), the messages are told apart by a sub-channel of the call's tag per
// dimension and direction of travel: the message sent to the -1 neighbour
// of dimension d travels on channel 2d, the one to the +1 neighbour on
// 2d+1, and each receive names the channel its sender used. Past 15
// dimensions the 31 channels repeat; messages that share one are still
// matched correctly, by p2p's non-overtaking order, because sends and
// receives are both posted dimension by dimension. A distributed graph's
// repeated edges between two ranks are matched the same way: the k-th
// listing of a destination on the sender pairs with the k-th listing of
// that source on the receiver.

// neighborhood is a rank's neighbours with the sub-channel of each
// message (see above).
type neighborhood struct {
	src, dst     []int
	srcCh, dstCh []int
}

// graphTopo is a graph communicator's adjacency at this rank: of a
// distributed graph, or of a graph (GraphCreate) whose whole description
// every rank holds too.
type graphTopo struct {
	sources, dests     []int
	sweights, dweights []int       // nil: unweighted
	whole              *wholeGraph // nil: a distributed graph
}

func (t *graphTopo) clone() *graphTopo {
	return &graphTopo{sources: slices.Clone(t.sources), dests: slices.Clone(t.dests),
		sweights: slices.Clone(t.sweights), dweights: slices.Clone(t.dweights), whole: t.whole}
}

// cartNeighbors is the neighbourhood of this rank of grid t: for each
// dimension the -1 then the +1 neighbour, in both lists. The message to
// the -1 neighbour travels in the - direction, on channel 2d, and the one
// from the -1 neighbour in the + direction, on 2d+1.
func cartNeighbors(t *cartTopo) *neighborhood {
	nb := &neighborhood{}
	for d := range t.dims {
		src, dst := t.shift(d, 1)
		nb.src = append(nb.src, src, dst)
		nb.dst = append(nb.dst, src, dst)
		nb.srcCh = append(nb.srcCh, 2*d+1, 2*d)
		nb.dstCh = append(nb.dstCh, 2*d, 2*d+1)
	}
	return nb
}

// neighbors returns c's neighbourhood, or an error naming why c has none.
func (c *Comm) neighbors(op string) (*neighborhood, error) {
	if err := c.check(op); err != nil {
		return nil, err
	}
	switch {
	case c.cart != nil:
		return cartNeighbors(c.cart), nil
	case c.graph != nil:
		g := c.graph
		return &neighborhood{src: g.sources, dst: g.dests,
			srcCh: make([]int, len(g.sources)), dstCh: make([]int, len(g.dests))}, nil
	}
	return nil, errorf(ErrTopology, op, "%s has no Cartesian, graph or distributed-graph topology", c.name)
}

// neighborArgs checks that the send and receive buffers do not overlap
// (neighbourhood collectives have no in-place form) and returns the
// call's arguments. ProcNull, being negative, is "no neighbour" to
// package coll as it is.
func neighborArgs(op string, nb *neighborhood, send, recv []byte) (coll.Args, error) {
	if len(send) > 0 && len(recv) > 0 && aliasing(send, recv) != disjoint {
		return coll.Args{}, errorf(ErrBuffer, op, "send and receive buffers overlap (neighbourhood collectives have no in-place form)")
	}
	return coll.Args{Send: send, Recv: recv, Sources: nb.src, Dests: nb.dst, SrcCh: nb.srcCh, DstCh: nb.dstCh}, nil
}

// nbPrep prepares a neighbourhood collective's arguments, given c's
// neighbourhood.
type nbPrep func(nb *neighborhood) (coll.Args, error)

// runNeighbor begins a call on c, prepares it with prep and runs it; a
// rank whose preparation fails aborts the call for the others.
func runNeighbor(op string, c *Comm, prep nbPrep) (err error) {
	defer c.failTo(&err)
	nb, err := c.neighbors(op)
	if err != nil {
		return err
	}
	v, err := c.begin(op)
	if err != nil {
		return err
	}
	a, err := prep(nb)
	return finishCall(op, &v, &call{fn: coll.Neighbor, args: a}, err)
}

// NeighborAllgather sends sendbuf to every destination of c and receives
// every source's block into recvbuf (MPI_Neighbor_allgather): block i,
// len(sendbuf) elements at i*len(sendbuf), comes from source i. c must
// have a Cartesian or distributed-graph topology; a ProcNull source's
// block is left as it was.
func NeighborAllgather[T Element](c *Comm, sendbuf, recvbuf []T) error {
	return runNeighbor("NeighborAllgather", c, nbAllgather("NeighborAllgather", sendbuf, recvbuf))
}

func nbAllgather[T Element](op string, sendbuf, recvbuf []T) nbPrep {
	return func(nb *neighborhood) (coll.Args, error) {
		a, err := neighborBlocks(op, nb, sendbuf, recvbuf, len(sendbuf))
		clear(a.SendDispls) // the same block to every destination
		return a, err
	}
}

// NeighborAllgatherv is NeighborAllgather with blocks of their own sizes
// (MPI_Neighbor_allgatherv): source i's counts[i] elements land at
// displs[i] of recvbuf; len(counts) and len(displs) are the number of
// sources.
func NeighborAllgatherv[T Element](c *Comm, sendbuf, recvbuf []T, counts, displs []int) error {
	return runNeighbor("NeighborAllgatherv", c, nbAllgatherv("NeighborAllgatherv", sendbuf, recvbuf, counts, displs))
}

func nbAllgatherv[T Element](op string, sendbuf, recvbuf []T, counts, displs []int) nbPrep {
	return func(nb *neighborhood) (coll.Args, error) {
		a, err := neighborArgs(op, nb, elemBytes(sendbuf), elemBytes(recvbuf))
		if err != nil {
			return a, err
		}
		if a.Counts, a.Displs, err = layout(op, "receive", len(nb.src), counts, displs, len(recvbuf), elemSize[T]()); err != nil {
			return a, err
		}
		a.SendCounts, a.SendDispls = blocks(len(nb.dst), len(a.Send))
		clear(a.SendDispls)
		return a, nil
	}
}

// NeighborAlltoall sends block i of sendbuf to destination i and receives
// block i of recvbuf from source i (MPI_Neighbor_alltoall). Blocks are
// len(sendbuf)/(number of destinations) elements; with no destination,
// len(recvbuf)/(number of sources).
func NeighborAlltoall[T Element](c *Comm, sendbuf, recvbuf []T) error {
	return runNeighbor("NeighborAlltoall", c, nbAlltoall("NeighborAlltoall", sendbuf, recvbuf))
}

func nbAlltoall[T Element](op string, sendbuf, recvbuf []T) nbPrep {
	return func(nb *neighborhood) (coll.Args, error) {
		in, out := len(nb.src), len(nb.dst)
		var k int
		switch {
		case out > 0:
			if len(sendbuf)%out != 0 {
				return coll.Args{}, errorf(ErrCount, op, "send buffer of %d elements is not %d equal blocks", len(sendbuf), out)
			}
			k = len(sendbuf) / out
		case in > 0:
			k = len(recvbuf) / in
		}
		return neighborBlocks(op, nb, sendbuf, recvbuf, k)
	}
}

// neighborBlocks is the arguments of a call whose blocks are all k
// elements: block i of recvbuf from source i, block i of sendbuf to
// destination i.
func neighborBlocks[T Element](op string, nb *neighborhood, sendbuf, recvbuf []T, k int) (coll.Args, error) {
	in := len(nb.src)
	if len(recvbuf) < in*k {
		return coll.Args{}, errorf(ErrCount, op, "receive buffer of %d elements for %d sources of %d", len(recvbuf), in, k)
	}
	a, err := neighborArgs(op, nb, elemBytes(sendbuf), elemBytes(recvbuf[:in*k]))
	if err != nil {
		return a, err
	}
	kb := k * elemSize[T]()
	a.Counts, a.Displs = blocks(in, kb)
	a.SendCounts, a.SendDispls = blocks(len(nb.dst), kb)
	return a, nil
}

// NeighborAlltoallv is NeighborAlltoall with blocks of their own sizes
// (MPI_Neighbor_alltoallv): sendcounts[i] elements at sdispls[i] of
// sendbuf go to destination i, recvcounts[i] elements from source i land
// at rdispls[i] of recvbuf.
func NeighborAlltoallv[T Element](c *Comm, sendbuf []T, sendcounts, sdispls []int, recvbuf []T, recvcounts, rdispls []int) error {
	return runNeighbor("NeighborAlltoallv", c, nbAlltoallv("NeighborAlltoallv", sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls))
}

func nbAlltoallv[T Element](op string, sendbuf []T, sendcounts, sdispls []int, recvbuf []T, recvcounts, rdispls []int) nbPrep {
	return func(nb *neighborhood) (coll.Args, error) {
		a, err := neighborArgs(op, nb, elemBytes(sendbuf), elemBytes(recvbuf))
		if err != nil {
			return a, err
		}
		es := elemSize[T]()
		if a.Counts, a.Displs, err = layout(op, "receive", len(nb.src), recvcounts, rdispls, len(recvbuf), es); err != nil {
			return a, err
		}
		if a.SendCounts, a.SendDispls, err = layout(op, "send", len(nb.dst), sendcounts, sdispls, len(sendbuf), es); err != nil {
			return a, err
		}
		return a, nil
	}
}

// blocks is n consecutive blocks of k bytes: counts and displacements.
func blocks(n, k int) (counts, displs []int) {
	counts, displs = make([]int, n), make([]int, n)
	for i := range n {
		counts[i], displs[i] = k, i*k
	}
	return counts, displs
}

// DistGraphCreateAdjacent returns a communicator with c's ranks whose
// topology is a directed graph given by each rank's own edges
// (MPI_Dist_graph_create_adjacent): this rank receives from sources and
// sends to destinations in the neighbourhood collectives, in the order
// given (a rank may appear more than once). Weights may be nil
// (MPI_UNWEIGHTED); else one per edge; they are kept for
// DistGraphNeighbors and otherwise unused. reorder is accepted and
// ignored: ranks keep c's order, which MPI allows.
//
// The graph must be consistent: rank r lists s among its sources as many
// times as s lists r among its destinations. This is checked (an Alltoall
// of edge counts over c), and a rank whose own lists are bad makes the
// call fail at every rank, with ErrArg or ErrRank here and ErrTopology
// elsewhere, instead of leaving a neighbourhood collective waiting for a
// message that never comes. Collective over c.
func DistGraphCreateAdjacent(c *Comm, sources, sourceWeights, destinations, destWeights []int, reorder bool) (_ *Comm, err error) {
	defer c.failTo(&err)
	const op = "DistGraphCreateAdjacent"
	if err := c.check(op); err != nil {
		return nil, err
	}
	_ = reorder
	return distGraph(op, c, sources, sourceWeights, destinations, destWeights, nil)
}

// distGraph makes the graph communicator of DistGraphCreateAdjacent (and
// of GraphCreate, whose whole graph every rank passes as whole).
func distGraph(op string, c *Comm, sources, sourceWeights, destinations, destWeights []int, whole *wholeGraph) (*Comm, error) {
	n := c.Size()
	local := func() error {
		if sourceWeights != nil && len(sourceWeights) != len(sources) {
			return errorf(ErrArg, op, "%d source weights for %d sources", len(sourceWeights), len(sources))
		}
		if destWeights != nil && len(destWeights) != len(destinations) {
			return errorf(ErrArg, op, "%d destination weights for %d destinations", len(destWeights), len(destinations))
		}
		return checkGraph(op, c, slices.Concat(sourceWeights, destWeights), sources, destinations)
	}()
	// Every rank tells every other how many edges it has to it.
	counts := make([]int64, n)
	if local == nil {
		for _, r := range destinations {
			counts[r]++
		}
	}
	in, err := exchangeCounts(op, c, counts, local)
	if err != nil {
		return nil, err
	}
	want := make([]int64, n)
	for _, r := range sources {
		want[r]++
	}
	var why error
	for r := range n {
		if in[r] != want[r] {
			why = errorf(ErrTopology, op, "rank %d lists this rank (%d) %d times among its destinations, this rank lists it %d times among its sources", r, c.rank, in[r], want[r])
			break
		}
	}
	// A mismatch seen by one rank fails the call everywhere.
	flag := []int64{0}
	if why != nil {
		flag[0] = 1
	}
	if err := Allreduce(c, flag, flag, Max); err != nil {
		return nil, reop(op, err)
	}
	if why != nil {
		return nil, why
	}
	if flag[0] != 0 {
		return nil, errorf(ErrTopology, op, "the graph is inconsistent: another rank's sources disagree with its neighbours' destinations (see its error)")
	}
	ctx, err := c.agreeCtx(op)
	if err != nil {
		return nil, err
	}
	g := newComm(c.name+" graph", c.rt, ctx, slices.Clone(c.world), c.rank)
	g.inherit(c)
	g.graph = &graphTopo{sources: slices.Clone(sources), dests: slices.Clone(destinations),
		sweights: slices.Clone(sourceWeights), dweights: slices.Clone(destWeights), whole: whole}
	return g, nil
}

// IsDistGraph reports whether c has a distributed-graph topology
// (MPI_Topo_test's MPI_DIST_GRAPH).
func (c *Comm) IsDistGraph() bool { return c != nil && c.graph != nil && c.graph.whole == nil }

// DistGraphNeighbors returns this rank's sources and destinations and
// their weights (nil when unweighted), in the order the neighbourhood
// collectives use (MPI_Dist_graph_neighbors). On a Cartesian communicator
// it returns the 2·ndims neighbours of each list, ProcNull included.
func (c *Comm) DistGraphNeighbors() (sources, sourceWeights, destinations, destWeights []int, err error) {
	defer c.failTo(&err)
	const op = "DistGraphNeighbors"
	nb, err := c.neighbors(op)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if g := c.graph; g != nil {
		return slices.Clone(g.sources), slices.Clone(g.sweights), slices.Clone(g.dests), slices.Clone(g.dweights), nil
	}
	return slices.Clone(nb.src), nil, slices.Clone(nb.dst), nil, nil
}
