package mpi

import (
	"cmp"
	"slices"
)

// DistGraphCreate returns a communicator with a distributed-graph
// topology whose edges any process may name (MPI_Dist_graph_create, the
// general form of DistGraphCreateAdjacent): this process contributes, for
// each i, degrees[i] edges from rank sources[i] to the next degrees[i]
// ranks of destinations, each with the weight at the same place in
// weights (nil: unweighted, MPI_UNWEIGHTED; every process passes nil or
// none does). An edge may be named twice, by one process or by two: the
// graph then has it twice. Collective over c; reorder is accepted and
// ignored (the ranks keep c's order).
//
// How: every edge named here goes to both its ends (a count Alltoall, then
// an Alltoallv of the edges), and each process builds its lists: its
// sources ordered by source rank, then by the naming process, then by the
// edge's place in that process's lists, and its destinations likewise, so
// that the k-th edge from s to r is the k-th at both s and r. The lists
// then go to DistGraphCreateAdjacent, which checks them and makes the
// communicator. DistGraphNeighbors reports them in that order. A process
// whose own arguments are bad fails with ErrArg or ErrRank, and the
// others with ErrTopology.
func DistGraphCreate(c *Comm, sources, degrees, destinations, weights []int, reorder bool) (_ *Comm, err error) {
	defer c.failTo(&err)
	const op = "DistGraphCreate"
	if err := c.check(op); err != nil {
		return nil, err
	}
	n, me := c.Size(), c.Rank()
	local := checkEdges(op, c, sources, degrees, destinations, weights)
	// Edge records, to each end: kind (0: an out-edge of the receiver, 1:
	// an in-edge), the other end, the weight (-1: unweighted), the naming
	// rank and the edge's index there.
	const rec = 5
	to := make([][]int64, n)
	if local == nil {
		k := 0
		for i, s := range sources {
			for range degrees[i] {
				d, w := destinations[k], -1
				if weights != nil {
					w = weights[k]
				}
				to[s] = append(to[s], 0, int64(d), int64(w), int64(me), int64(k))
				to[d] = append(to[d], 1, int64(s), int64(w), int64(me), int64(k))
				k++
			}
		}
	}
	counts := make([]int64, n)
	for r := range n {
		counts[r] = int64(len(to[r]))
	}
	in, err := exchangeCounts(op, c, counts, local)
	if err != nil {
		return nil, err
	}
	scounts, sdispls := make([]int, n), make([]int, n)
	rcounts, rdispls := make([]int, n), make([]int, n)
	var send []int64
	total := 0
	for r := range n {
		sdispls[r], scounts[r] = len(send), len(to[r])
		send = append(send, to[r]...)
		rdispls[r], rcounts[r] = total, int(in[r])
		total += rcounts[r]
	}
	got := make([]int64, total)
	if err := Alltoallv(c, send, scounts, sdispls, got, rcounts, rdispls); err != nil {
		return nil, reop(op, err)
	}
	type edge struct{ peer, w, by, idx int }
	var outs, ins []edge
	for i := 0; i+rec <= len(got); i += rec {
		e := edge{int(got[i+1]), int(got[i+2]), int(got[i+3]), int(got[i+4])}
		if got[i] == 0 {
			outs = append(outs, e)
		} else {
			ins = append(ins, e)
		}
	}
	lists := func(es []edge) (ranks, ws []int) {
		slices.SortFunc(es, func(a, b edge) int {
			return cmp.Or(cmp.Compare(a.peer, b.peer), cmp.Compare(a.by, b.by), cmp.Compare(a.idx, b.idx))
		})
		for _, e := range es {
			ranks = append(ranks, e.peer)
			if e.w >= 0 {
				ws = append(ws, e.w)
			}
		}
		if len(ws) != len(ranks) {
			ws = nil // unweighted (a mix is the caller's error, as in MPI)
		}
		return ranks, ws
	}
	srcs, sw := lists(ins)
	dsts, dw := lists(outs)
	g, err := DistGraphCreateAdjacent(c, srcs, sw, dsts, dw, reorder)
	return g, reop(op, err)
}

// checkEdges validates DistGraphCreate's arguments at this process.
func checkEdges(op string, c *Comm, sources, degrees, destinations, weights []int) error {
	if len(degrees) != len(sources) {
		return errorf(ErrArg, op, "%d degrees for %d sources", len(degrees), len(sources))
	}
	total := 0
	for i, d := range degrees {
		if d < 0 {
			return errorf(ErrArg, op, "negative degree %d of source %d", d, sources[i])
		}
		total += d
	}
	if total != len(destinations) {
		return errorf(ErrArg, op, "degrees sum to %d, but %d destinations", total, len(destinations))
	}
	if weights != nil && len(weights) != len(destinations) {
		return errorf(ErrArg, op, "%d weights for %d destinations", len(weights), len(destinations))
	}
	return checkGraph(op, c, weights, sources, destinations)
}

// checkGraph fails with ErrArg on a negative weight and with ErrRank on a
// rank of the lists that is not in c (the checks of both graph
// constructors).
func checkGraph(op string, c *Comm, weights []int, lists ...[]int) error {
	for _, w := range weights {
		if w < 0 {
			return errorf(ErrArg, op, "negative weight %d", w)
		}
	}
	for _, l := range lists {
		for _, r := range l {
			if r < 0 || r >= c.Size() {
				return errorf(ErrRank, op, "neighbour %d is not in %s (size %d)", r, c.name, c.Size())
			}
		}
	}
	return nil
}

// exchangeCounts sends counts[r] to every rank r of c and returns what
// each sent here (an Alltoall), with a flag saying whether this rank's
// arguments are bad (local, its own error): then every rank fails, this
// one with local and the others with ErrTopology, instead of leaving the
// graph's later exchanges waiting.
func exchangeCounts(op string, c *Comm, counts []int64, local error) ([]int64, error) {
	n := c.Size()
	out, in := make([]int64, 2*n), make([]int64, 2*n)
	for r := range n {
		out[2*r] = counts[r]
		if local != nil {
			out[2*r+1] = 1
		}
	}
	if err := Alltoall(c, out, in); err != nil {
		return nil, reop(op, err)
	}
	if local != nil {
		return nil, local
	}
	got := make([]int64, n)
	for r := range n {
		if in[2*r+1] != 0 {
			return nil, errorf(ErrTopology, op, "rank %d passed bad neighbour lists (see its error)", r)
		}
		got[r] = in[2*r]
	}
	return got, nil
}
