package tests

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// Issue 16: DistGraphCreate, the form of MPI_Dist_graph_create in which
// any process names any edge.

func init() { rankCases["distgraph"] = caseDistGraph }

// distEdges is the graph of caseDistGraph, as (naming rank, source,
// destination, weight): rank 0 names a ring r -> r+1 (weight 10+r), rank
// n-1 names r -> r+2 (weight 20+r), every rank r names the edge r+1 -> r
// (weight 30+r), and rank 1 names 0 -> 1 once more (weight 7), so the
// graph has a repeated edge and edges named by neither end.
func distEdges(n int) [][4]int {
	var es [][4]int
	for r := range n {
		es = append(es, [4]int{0, r, (r + 1) % n, 10 + r})
	}
	for r := range n {
		es = append(es, [4]int{n - 1, r, (r + 2) % n, 20 + r})
	}
	for r := range n {
		es = append(es, [4]int{r, (r + 1) % n, r, 30 + r})
	}
	if n > 1 {
		es = append(es, [4]int{1, 0, 1, 7})
	}
	return es
}

// caseDistGraph: each rank passes the edges it names (grouped by source,
// as DistGraphCreate takes them); every rank's sources and destinations
// with their weights are then the ones the whole edge list gives it, and
// a NeighborAllgather delivers, at position i, the value of sources[i].
// Bad arguments at one rank fail the call at all of them.
func caseDistGraph(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	es := distEdges(n)
	var srcs, degs, dsts, wts []int
	for _, e := range es {
		if e[0] != me {
			continue
		}
		if len(srcs) == 0 || srcs[len(srcs)-1] != e[1] {
			srcs, degs = append(srcs, e[1]), append(degs, 0)
		}
		degs[len(degs)-1]++
		dsts, wts = append(dsts, e[2]), append(wts, e[3])
	}
	g, err := mpi.DistGraphCreate(w, srcs, degs, dsts, wts, false)
	if err != nil {
		return err
	}
	gs, gsw, gd, gdw, err := g.DistGraphNeighbors()
	if err != nil {
		return err
	}
	// The sequential answer, as multisets of (rank, weight).
	pairs := func(ranks, ws []int) [][2]int {
		var p [][2]int
		for i := range ranks {
			p = append(p, [2]int{ranks[i], ws[i]})
		}
		slices.SortFunc(p, func(a, b [2]int) int { return a[0]*1000 + a[1] - b[0]*1000 - b[1] })
		return p
	}
	var wantIn, wantOut [][2]int
	for _, e := range es {
		if e[2] == me {
			wantIn = append(wantIn, [2]int{e[1], e[3]})
		}
		if e[1] == me {
			wantOut = append(wantOut, [2]int{e[2], e[3]})
		}
	}
	wantIn, wantOut = pairs(transpose(wantIn)), pairs(transpose(wantOut))
	if got := pairs(gs, gsw); !slices.Equal(got, wantIn) {
		return fmt.Errorf("sources %v weights %v, want %v", gs, gsw, wantIn)
	}
	if got := pairs(gd, gdw); !slices.Equal(got, wantOut) {
		return fmt.Errorf("destinations %v weights %v, want %v", gd, gdw, wantOut)
	}
	recv := make([]int, 2*len(gs))
	if err := mpi.NeighborAllgather(g, []int{me, 100 * me}, recv); err != nil {
		return err
	}
	for i, s := range gs {
		if recv[2*i] != s || recv[2*i+1] != 100*s {
			return fmt.Errorf("NeighborAllgather: block %d is %v, from source %d", i, recv[2*i:2*i+2], s)
		}
	}
	if err := g.Free(); err != nil {
		return err
	}
	// Unweighted, and a bad destination at the last rank.
	bad := []int{0}
	if me == n-1 {
		bad[0] = n
	}
	_, err = mpi.DistGraphCreate(w, []int{me}, []int{1}, bad, nil, false)
	switch {
	case me == n-1 && !errors.Is(err, mpi.ErrRank):
		return fmt.Errorf("DistGraphCreate with destination %d: %v, want ErrRank", n, err)
	case me != n-1 && !errors.Is(err, mpi.ErrTopology):
		return fmt.Errorf("DistGraphCreate with a bad destination at rank %d: %v, want ErrTopology", n-1, err)
	}
	g, err = mpi.DistGraphCreate(w, []int{me}, []int{1}, []int{0}, nil, false)
	if err != nil {
		return err
	}
	if _, sw, _, dw, _ := g.DistGraphNeighbors(); sw != nil || dw != nil {
		return fmt.Errorf("unweighted graph with weights %v %v", sw, dw)
	}
	return g.Free()
}

// transpose splits pairs into two lists.
func transpose(p [][2]int) ([]int, []int) {
	a, b := make([]int, len(p)), make([]int, len(p))
	for i, x := range p {
		a[i], b[i] = x[0], x[1]
	}
	return a, b
}

func TestDistGraphCreate(t *testing.T) {
	for _, np := range []int{1, 2, 5} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { job{np: np, cas: "distgraph"}.ok(t) })
	}
}
