package tests

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gorun/gorun/mpi"
)

func init() { rankCases["graph"] = caseGraph }

// The graph of caseGraph, 4 nodes, symmetric with repeated edges and a
// self edge: 0: 1 3 3; 1: 0 2; 2: 1 2 3; 3: 0 2 0.
var (
	graphIndex = []int{3, 5, 8, 11}
	graphEdges = []int{1, 3, 3, 0, 2, 1, 2, 3, 0, 2, 0}
)

func graphAdj(r int) []int {
	lo := 0
	if r > 0 {
		lo = graphIndex[r-1]
	}
	return graphEdges[lo:graphIndex[r]]
}

// caseGraph: GraphCreate on the first 4 ranks of the world (the others get
// nil), the graph read back, NeighborAllgather and NeighborAlltoall (and
// IneighborAllgather) against the adjacency, and the errors every rank
// must see alike.
func caseGraph(w *mpi.Comm) error {
	me := w.Rank()
	g, err := mpi.GraphCreate(w, graphIndex, graphEdges, true)
	if err != nil {
		return fmt.Errorf("GraphCreate: %w", err)
	}
	if me >= len(graphIndex) {
		if g != nil {
			return fmt.Errorf("rank %d, past the graph's %d nodes, got a communicator", me, len(graphIndex))
		}
	} else if err := checkGraphComm(g, me); err != nil {
		return err
	}
	if g != nil {
		if err := g.Free(); err != nil {
			return err
		}
	}

	// Errors, at every rank alike.
	if _, _, err := w.GraphGet(); !errors.Is(err, mpi.ErrTopology) {
		return fmt.Errorf("GraphGet on a communicator without a graph: %v, want ErrTopology", err)
	}
	n := w.Size()
	cases := []struct {
		what         string
		index, edges []int
		want         error
	}{
		{"an edge one way only", []int{1, 1}, []int{1}, mpi.ErrTopology},
		{"index decreasing", []int{2, 1}, []int{1, 0}, mpi.ErrArg},
		{"an edge out of range", []int{1, 2}, []int{2, 0}, mpi.ErrArg},
		{"more nodes than ranks", make([]int, n+1), nil, mpi.ErrArg},
		{"different graphs", []int{1, 2}, []int{1, 0}, mpi.ErrArg},
	}
	for _, c := range cases {
		edges := c.edges
		if c.what == "different graphs" && me == n-1 {
			edges = []int{0, 1} // well formed, but not the others' graph
		}
		if _, err := mpi.GraphCreate(w, c.index, edges, false); !errors.Is(err, c.want) {
			return fmt.Errorf("GraphCreate with %s: %v, want %v", c.what, err, c.want)
		}
	}
	// The world still works.
	x := []int{1}
	if err := mpi.Allreduce(w, x, x, mpi.Sum); err != nil || x[0] != n {
		return fmt.Errorf("Allreduce after the errors: %v, %d", err, x[0])
	}
	return nil
}

func checkGraphComm(g *mpi.Comm, me int) error {
	if g == nil || !g.IsGraph() || g.IsDistGraph() || g.IsCartesian() || g.Rank() != me || g.Size() != len(graphIndex) {
		return fmt.Errorf("GraphCreate: rank %d got %v (graph %v, size %d)", me, g, g != nil && g.IsGraph(), g.Size())
	}
	if nn, ne, err := g.GraphdimsGet(); err != nil || nn != len(graphIndex) || ne != len(graphEdges) {
		return fmt.Errorf("GraphdimsGet: %d %d %v", nn, ne, err)
	}
	if ix, ed, err := g.GraphGet(); err != nil || !slices.Equal(ix, graphIndex) || !slices.Equal(ed, graphEdges) {
		return fmt.Errorf("GraphGet: %v %v %v", ix, ed, err)
	}
	for r := range graphIndex {
		if nb, err := g.GraphNeighbors(r); err != nil || !slices.Equal(nb, graphAdj(r)) {
			return fmt.Errorf("GraphNeighbors(%d): %v %v, want %v", r, nb, err, graphAdj(r))
		}
	}
	if _, err := g.GraphNeighbors(len(graphIndex)); !errors.Is(err, mpi.ErrRank) {
		return fmt.Errorf("GraphNeighbors past the nodes: %v, want ErrRank", err)
	}
	adj := graphAdj(me)
	// Allgather: block i comes from neighbour adj[i].
	recv := make([]int64, 2*len(adj))
	if err := mpi.NeighborAllgather(g, []int64{int64(10 * me), int64(10*me + 1)}, recv); err != nil {
		return fmt.Errorf("NeighborAllgather: %w", err)
	}
	for i, s := range adj {
		if recv[2*i] != int64(10*s) || recv[2*i+1] != int64(10*s+1) {
			return fmt.Errorf("NeighborAllgather: block %d is %v, want neighbour %d's", i, recv[2*i:2*i+2], s)
		}
	}
	q, err := mpi.IneighborAllgather(g, []int64{int64(10 * me), int64(10*me + 1)}, make([]int64, len(recv)))
	if err == nil {
		_, err = q.Wait()
	}
	if err != nil {
		return fmt.Errorf("IneighborAllgather: %w", err)
	}
	// Alltoall: block i goes to adj[i]; the k-th listing of s here gets
	// what s sent to its k-th listing of this rank.
	send := make([]int64, len(adj))
	for i := range adj {
		send[i] = nbVal(me, i, 0)
	}
	recv = make([]int64, len(adj))
	if err := mpi.NeighborAlltoall(g, send, recv); err != nil {
		return fmt.Errorf("NeighborAlltoall: %w", err)
	}
	for i, s := range adj {
		k := 0
		for _, t := range adj[:i] {
			if t == s {
				k++
			}
		}
		j := -1
		for p, t := range graphAdj(s) {
			if t == me {
				if k == 0 {
					j = p
					break
				}
				k--
			}
		}
		if want := nbVal(s, j, 0); recv[i] != want {
			return fmt.Errorf("NeighborAlltoall: block %d is %d, want %d (neighbour %d's block %d)", i, recv[i], want, s, j)
		}
	}
	return nil
}

// TestGraphCreate runs caseGraph at np 4 (every rank a node) and 5 (one
// rank outside the graph), over sm and over tcp.
func TestGraphCreate(t *testing.T) {
	for _, np := range []int{4, 5} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { job{np: np, cas: "graph"}.ok(t) })
	}
	t.Run("tcp", func(t *testing.T) { job{np: 5, cas: "graph", env: []string{"GORUN_BTL=tcp,self"}}.ok(t) })
}
