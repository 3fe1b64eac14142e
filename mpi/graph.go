package mpi

import "slices"

// Graph communicators (MPI_Graph_create, MPI-1's graph topology): every
// process passes the whole graph, as MPI's index and edges arrays, and
// gets back a communicator whose neighbourhood is its adjacency list, the
// same list for sources and destinations (MPI-3 §7.6: a graph
// communicator's neighbourhood collectives send to and receive from every
// neighbour, in the order of the list).

// wholeGraph is a GraphCreate graph: node r's neighbours are
// edges[index[r-1]:index[r]] (index[-1] being 0).
type wholeGraph struct {
	index, edges []int
}

// neighbors returns node r's neighbours.
func (g *wholeGraph) neighbors(r int) []int {
	lo := 0
	if r > 0 {
		lo = g.index[r-1]
	}
	return g.edges[lo:g.index[r]]
}

// GraphCreate makes a communicator of the first len(index) ranks of c
// with the graph topology index and edges describe (MPI_Graph_create):
// rank r's neighbours are edges[index[r-1]:index[r]] (from 0 for rank 0),
// ranks of the new communicator. Every rank of c passes the same graph;
// the ranks past the graph's nodes get nil (MPI_COMM_NULL). reorder is
// accepted and ignored: ranks keep c's order, which MPI allows.
//
// The graph must be symmetric for the neighbourhood collectives to match
// (r lists s as many times as s lists r), as MPI requires of them: this is
// checked, and a graph that is not fails the call at every rank with
// ErrTopology, a malformed one (index not non-decreasing, a neighbour out
// of range, more nodes than c has ranks) with ErrArg, and so do graphs
// that differ between ranks. Collective over c.
func GraphCreate(c *Comm, index, edges []int, reorder bool) (_ *Comm, err error) {
	defer c.failTo(&err)
	const op = "GraphCreate"
	if err := c.check(op); err != nil {
		return nil, err
	}
	nn := len(index)
	// Every rank checks the graph, then all learn whether any found it
	// malformed and whether all passed the same one (a hash, its maximum
	// and minimum over c), so that they fail together instead of some
	// waiting in the calls below for ranks that left.
	local := checkWhole(op, c, index, edges)
	h := graphHash(index, edges)
	flags := []int64{0, h, -h}
	if local != nil {
		flags[0] = 1
	}
	if err := Allreduce(c, flags, flags, Max); err != nil {
		return nil, reop(op, err)
	}
	switch {
	case local != nil:
		return nil, local
	case flags[0] != 0:
		return nil, errorf(ErrArg, op, "another rank passed a malformed graph (see its error)")
	case flags[1] != -flags[2]:
		return nil, errorf(ErrArg, op, "the ranks passed different graphs")
	}
	g := &wholeGraph{index: slices.Clone(index), edges: slices.Clone(edges)}
	_ = reorder
	// The graph's ranks in a communicator of their own.
	sub := c
	if nn < c.Size() {
		color := Undefined
		if c.Rank() < nn {
			color = 0
		}
		if sub, err = c.Split(color, c.Rank()); err != nil || sub == nil {
			return nil, reop(op, err)
		}
		defer sub.Free()
	}
	adj := g.neighbors(sub.Rank())
	return distGraph(op, sub, adj, nil, adj, nil, g)
}

// checkWhole checks a GraphCreate graph of len(index) nodes for c.
func checkWhole(op string, c *Comm, index, edges []int) error {
	nn := len(index)
	switch {
	case nn > c.Size():
		return errorf(ErrArg, op, "a graph of %d nodes on %s of %d ranks", nn, c.name, c.Size())
	case nn > 0 && index[nn-1] != len(edges):
		return errorf(ErrArg, op, "index ends at %d, with %d edges", index[nn-1], len(edges))
	}
	for r := range nn {
		if index[r] < 0 || (r > 0 && index[r] < index[r-1]) {
			return errorf(ErrArg, op, "index is not non-decreasing at node %d (%v)", r, index)
		}
	}
	for _, e := range edges {
		if e < 0 || e >= nn {
			return errorf(ErrArg, op, "edge to node %d of a graph of %d nodes", e, nn)
		}
	}
	// Symmetric: every rank checks the whole graph, so all agree.
	g := &wholeGraph{index: index, edges: edges}
	count := map[[2]int]int{}
	for r := range nn {
		for _, s := range g.neighbors(r) {
			count[[2]int{r, s}]++
		}
	}
	for e, k := range count {
		if back := count[[2]int{e[1], e[0]}]; back != k {
			return errorf(ErrTopology, op, "node %d lists node %d %d times, node %d lists node %d %d times: the graph must be symmetric", e[0], e[1], k, e[1], e[0], back)
		}
	}
	return nil
}

// graphHash is an FNV-1a hash of a graph's arrays, to tell whether every
// rank passed the same one.
func graphHash(index, edges []int) int64 {
	h := uint64(14695981039346656037)
	for _, v := range slices.Concat(index, []int{-1}, edges) {
		h = (h ^ uint64(v)) * 1099511628211
	}
	return int64(h >> 1) // non-negative, so that -h does not overflow
}

// IsGraph reports whether c has a graph topology made by GraphCreate
// (MPI_Topo_test's MPI_GRAPH).
func (c *Comm) IsGraph() bool { return c != nil && c.graph != nil && c.graph.whole != nil }

// graphOf returns c's whole graph, or an error naming why it has none.
func (c *Comm) graphOf(op string) (*wholeGraph, error) {
	if err := c.check(op); err != nil {
		return nil, err
	}
	if !c.IsGraph() {
		return nil, errorf(ErrTopology, op, "%s has no graph topology (GraphCreate)", c.name)
	}
	return c.graph.whole, nil
}

// GraphdimsGet returns the number of nodes and of edges of c's graph
// (MPI_Graphdims_get).
func (c *Comm) GraphdimsGet() (nnodes, nedges int, err error) {
	defer c.failTo(&err)
	g, err := c.graphOf("GraphdimsGet")
	if err != nil {
		return 0, 0, err
	}
	return len(g.index), len(g.edges), nil
}

// GraphGet returns c's graph as GraphCreate took it: index and edges
// (MPI_Graph_get).
func (c *Comm) GraphGet() (index, edges []int, err error) {
	defer c.failTo(&err)
	g, err := c.graphOf("GraphGet")
	if err != nil {
		return nil, nil, err
	}
	return slices.Clone(g.index), slices.Clone(g.edges), nil
}

// GraphNeighbors returns the neighbours of rank r of c's graph, in order
// (MPI_Graph_neighbors; MPI_Graph_neighbors_count is its length).
func (c *Comm) GraphNeighbors(r int) (_ []int, err error) {
	defer c.failTo(&err)
	const op = "GraphNeighbors"
	g, err := c.graphOf(op)
	if err != nil {
		return nil, err
	}
	if r < 0 || r >= len(g.index) {
		return nil, errorf(ErrRank, op, "rank %d is not in %s (size %d)", r, c.name, len(g.index))
	}
	return slices.Clone(g.neighbors(r)), nil
}
